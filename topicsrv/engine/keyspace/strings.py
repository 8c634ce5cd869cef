"""String and generic-key operations over the Keyspace: each validates, computes the result
values and commits ONE keyspace operation (space.py Rule 2); both fronts call these.

Rule 1: a string write over a topic replaces it, as Redis's SET replaces a key of any type:
the topic is deleted first exactly as DEL (its own drop frame), then the string is committed;
both in one commit group (engine/journal.py Rule 4), so a crash keeps both or neither. A DEL
of several keys of both kinds is one group too.
Rule 2: errors carry Redis's own text (`TopicsError.resp_line()` is what redis-server
answers); nothing changes when one is raised.
Rule 3: TTLs are absolute deadlines (Unix ms); KEEP keeps a key's current deadline.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from topicsrv.engine.journal import Group, all_of
from topicsrv.engine.keyspace import colls, values
from topicsrv.engine.keyspace.ops import Op
from topicsrv.engine.keyspace.space import STREAM, STRING, Keyspace
from topicsrv.errors import TopicsError

if TYPE_CHECKING:
    from topicsrv.engine.journal import CommitToken

KEEP: Final = -1  # Rule 3


def error(text: str) -> TopicsError:
    """An `ERR <text>` reply / HTTP 400."""
    return TopicsError("invalid_request", text)


def too_big() -> TopicsError:
    return error("string exceeds maximum allowed size (proto-max-bulk-len)")


def replace_topics(ks: Keyspace, names: list[str]) -> list[CommitToken | None]:
    """Rule 1: delete the topics among `names` (after storage accepted the write)."""
    ks.host.journal.check_writable(None)
    return [ks.host.delete_topic(n)[1] for n in names if n in ks.host.topics]


def put(ks: Keyspace, pairs: list[tuple[str, bytes]], deadline: int = 0,
        enc: str = "") -> CommitToken | None:
    """SET/MSET/...: store each value; `deadline` 0 = no TTL, KEEP = keep the current one."""
    op: Op = []
    for name, value in pairs:
        d = (ks.expiry.get(name) or 0) if deadline == KEEP else deadline
        op.append(("s", name, value, d, enc))
    topics = ks.host.topics
    if not any(n in topics for n, _ in pairs):
        return ks.commit(op, True)  # a write is an access (OBJECT IDLETIME counts from it)
    with Group(ks.host.journal):  # Rule 1
        tokens = replace_topics(ks, [n for n, _ in pairs])
        tokens.append(ks.commit(op, True))
    return all_of(tokens)


def delete(ks: Keyspace, names: list[str]) -> tuple[int, CommitToken | None]:
    """DEL/UNLINK over both kinds: how many keys existed; several keys are one commit group
    (Rule 1)."""
    if len(names) == 1:
        return _delete(ks, names)
    with Group(ks.host.journal):
        return _delete(ks, names)


def _delete(ks: Keyspace, names: list[str]) -> tuple[int, CommitToken | None]:
    tokens: list[CommitToken | None] = []
    gone: Op = []
    n = 0
    for name in names:
        kind = ks.kind(name)
        if kind is None or any(c[1] == name for c in gone):
            continue
        n += 1
        if kind == STREAM:
            tokens.append(ks.host.delete_topic(name)[1])
        else:
            gone.append(("d", name))
    if gone:
        tokens.append(ks.commit(gone))
    return n, all_of(tokens)


def incr_by(ks: Keyspace, name: str, delta: int) -> tuple[int, CommitToken | None]:
    old = ks.get(name)
    cur = 0
    if old is not None:
        parsed = values.parse_i64(old)
        if parsed is None:
            raise error("value is not an integer or out of range")
        cur = parsed
    new = cur + delta
    if not values.I64_MIN <= new <= values.I64_MAX:
        raise error("increment or decrement would overflow")
    return new, put(ks, [(name, str(new).encode())], KEEP)


def incr_by_float(ks: Keyspace, name: str, incr: bytes) -> tuple[bytes, CommitToken | None]:
    old = ks.get(name)
    cur = values.parse_ld(old) if old is not None else values.parse_ld(b"0")
    if cur is None:
        raise error("value is not a valid float")
    by = values.parse_ld(incr)
    if by is None:
        raise error("value is not a valid float")
    total = values.add_ld(cur, by)
    if total is None:
        raise error("increment would produce NaN or Infinity")
    text = values.format_ld(total)
    enc = values.ENC_EMBSTR if len(text) <= values.EMBSTR_MAX else values.ENC_RAW
    return text, put(ks, [(name, text)], KEEP, enc)


def append(ks: Keyspace, name: str, suffix: bytes, limit: int) -> tuple[int, CommitToken | None]:
    old = ks.get(name)
    if old is None:  # Redis stores the argument itself: its encoding is derived
        return len(suffix), put(ks, [(name, suffix)])
    if len(old) + len(suffix) > limit:
        raise too_big()
    new = old + suffix
    return len(new), put(ks, [(name, new)], KEEP, values.ENC_RAW)


def setrange(ks: Keyspace, name: str, offset: int, data: bytes,
             limit: int) -> tuple[int, CommitToken | None]:
    if offset < 0:
        raise error("offset is out of range")
    old = ks.get(name)
    if not data:
        return (0 if old is None else len(old)), None
    if offset + len(data) > limit:
        raise too_big()
    cur = old or b""
    buf = bytearray(cur)
    if len(buf) < offset:
        buf.extend(bytes(offset - len(buf)))
    buf[offset:offset + len(data)] = data
    return len(buf), put(ks, [(name, bytes(buf))], KEEP, values.ENC_RAW)


def getrange(value: bytes, start: int, end: int) -> bytes:
    """GETRANGE's index rules (negative from the end, clamped; empty when start > end)."""
    n = len(value)
    if start < 0 and end < 0 and start > end:
        return b""
    if start < 0:
        start = max(0, n + start)
    if end < 0:
        end = max(0, n + end)
    end = min(end, n - 1)
    if start > end or n == 0:
        return b""
    return value[start:end + 1]


# ---- expiry --------------------------------------------------------------------------------

def set_deadline(ks: Keyspace, name: str, deadline: int, nx: bool, xx: bool, gt: bool,
                 lt: bool) -> tuple[int, CommitToken | None]:
    """EXPIRE family with an absolute deadline: 1 when set (or the key was deleted because
    the deadline is already past), 0 when the key is missing or a condition failed."""
    if ks.kind(name) is None:
        return 0, None
    cur = ks.expiry.get(name)
    if nx and cur is not None or xx and cur is None:
        return 0, None
    if gt and (cur is None or deadline <= cur):  # no TTL = infinite
        return 0, None
    if lt and cur is not None and deadline >= cur:
        return 0, None
    if deadline <= ks.clock.now_ms():
        return delete(ks, [name])
    return 1, ks.commit(ks.ttl_change(name, deadline))


def persist(ks: Keyspace, name: str) -> tuple[int, CommitToken | None]:
    if ks.kind(name) is None or ks.expiry.get(name) is None:
        return 0, None
    return 1, ks.commit(ks.ttl_change(name, 0))


# ---- rename / copy -------------------------------------------------------------------------

def topic_unsupported(cmd: str) -> TopicsError:
    return error(f"{cmd} of a topic (stream) key is not supported: a topic's name is its "
                 "identity for routers, groups and storage (docs/redis-compatibility.md)")


def rename(ks: Keyspace, src: str, dst: str, nx: bool) -> tuple[int, CommitToken | None]:
    """RENAME/RENAMENX of a string (a topic answers `topic_unsupported`)."""
    kind = ks.kind(src)
    if kind is None:
        raise error("no such key")
    if kind == STREAM:
        raise topic_unsupported("RENAMENX" if nx else "RENAME")
    if nx and ks.kind(dst) is not None:
        return 0, None
    if src == dst:
        return 1, None
    with Group(ks.host.journal):
        tokens = replace_topics(ks, [dst])
        tokens.append(ks.commit([("d", src), _put_copy(ks, kind, src, dst)]))
    return 1, all_of(tokens)


def _put_copy(ks: Keyspace, kind: str, src: str, dst: str) -> Any:
    """The change that puts a copy of `src` (a string or a collection) at `dst`, with its
    TTL."""
    if kind != STRING:
        return colls.copy_change(ks, src, dst)
    return ("s", dst, ks.value(src), ks.expiry.get(src) or 0, ks.enc.get(src, ""))


def copy(ks: Keyspace, src: str, dst: str, replace: bool) -> tuple[int, CommitToken | None]:
    kind = ks.kind(src)
    if kind is None:
        return 0, None
    if kind == STREAM:
        raise topic_unsupported("COPY")
    if ks.kind(dst) is not None and not replace:
        return 0, None
    with Group(ks.host.journal):
        tokens = replace_topics(ks, [dst])
        change = _put_copy(ks, kind, src, dst)
        tokens.append(ks.commit([("d", dst), change] if dst in ks.strings or
                                dst in ks.colls else [change]))
    return 1, all_of(tokens)
