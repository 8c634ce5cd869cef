"""List operations on the keyspace (Redis 7's @list family, the non-blocking part). Each
command's mutation is ONE keyspace operation of physical splices (ops.py "L",
quicklist.py Rule 3), committed once: a journal frame, WATCH and waiters told (space.py Rule 2).

Rule 1: positions are computed here, from the list as it is, so the operation replays to
the same list. Several changes of one command (LREM's removals, LTRIM's two ends, LMOVE's
pop and push) are one operation, applied and journaled together.
Rule 2: a key that holds another kind answers WRONGTYPE before anything changes (LMOVE and
RPOPLPUSH check the destination too, as Redis).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from topicsrv.engine.keyspace.ops import Op
from topicsrv.engine.keyspace.space import LIST, Keyspace
from topicsrv.engine.keyspace.strings import error

if TYPE_CHECKING:
    from topicsrv.engine.journal import CommitToken

Token = Any  # CommitToken | None


def get(ks: Keyspace, name: str) -> Any:
    """The list value (quicklist.ListValue) of `name`, None if there is no key."""
    return ks.coll(name, LIST)


def _splice(ks: Keyspace, name: str, pos: int, remove: int, insert: list[bytes]) -> Any:
    return ("L", name, pos, remove, insert, ks.list_fill)


def push(ks: Keyspace, name: str, values: list[bytes], left: bool,
         only_existing: bool) -> tuple[int, CommitToken | None]:
    """LPUSH/RPUSH (and the X forms: nothing when the key does not exist); the new length."""
    lv = get(ks, name)
    if lv is None and only_existing:
        return 0, None
    n = len(lv) if lv is not None else 0
    change = _splice(ks, name, 0, 0, values[::-1]) if left else _splice(ks, name, n, 0, values)
    return n + len(values), ks.commit([change], True)


def pop(ks: Keyspace, name: str, count: int, left: bool) -> tuple[list[bytes] | None, Token]:
    """LPOP/RPOP of up to `count` elements, in pop order; None when there is no key."""
    lv = get(ks, name)
    if lv is None:
        return None, None
    k = min(count, len(lv))
    if k == 0:
        return [], None
    n = len(lv)
    if left:
        out = lv.range(0, k - 1)
        return out, ks.commit([_splice(ks, name, 0, k, [])])
    out = lv.range(n - k, n - 1)
    out.reverse()
    return out, ks.commit([_splice(ks, name, n - k, k, [])])


def clamp(start: int, stop: int, n: int) -> tuple[int, int]:
    """LRANGE/LTRIM's index rules: negative from the end, clamped; start > stop is empty."""
    if start < 0:
        start = max(start + n, 0)
    if stop < 0:
        stop += n
    stop = min(stop, n - 1)
    return start, stop


def lrange(ks: Keyspace, name: str, start: int, stop: int) -> list[bytes]:
    lv = get(ks, name)
    if lv is None:
        return []
    s, e = clamp(start, stop, len(lv))
    return lv.range(s, e) if s <= e else []


def lset(ks: Keyspace, name: str, index: int, value: bytes) -> Token:
    lv = get(ks, name)
    if lv is None:
        raise error("no such key")
    n = len(lv)
    i = index + n if index < 0 else index
    if not 0 <= i < n:
        raise error("index out of range")
    return ks.commit([_splice(ks, name, i, 1, [value])], True)


def find(lv: Any, pivot: bytes) -> int:
    """The position of the first element equal to `pivot`, -1 if none."""
    for i, v in enumerate(lv):
        if v == pivot:
            return i
    return -1


def linsert(ks: Keyspace, name: str, before: bool, pivot: bytes,
            value: bytes) -> tuple[int, Token]:
    lv = get(ks, name)
    if lv is None:
        return 0, None
    i = find(lv, pivot)
    if i < 0:
        return -1, None
    pos = i if before else i + 1
    return len(lv) + 1, ks.commit([_splice(ks, name, pos, 0, [value])], True)


def lrem(ks: Keyspace, name: str, count: int, value: bytes) -> tuple[int, Token]:
    """LREM: the first `count` matches from the head (count > 0), from the tail (< 0), all
    (0); the removals are one operation, highest position first (Rule 1)."""
    lv = get(ks, name)
    if lv is None:
        return 0, None
    hits = [i for i, v in enumerate(lv) if v == value]
    if count > 0:
        hits = hits[:count]
    elif count < 0:
        hits = hits[count:]
    if not hits:
        return 0, None
    op: Op = [_splice(ks, name, i, 1, []) for i in reversed(hits)]
    return len(hits), ks.commit(op)


def ltrim(ks: Keyspace, name: str, start: int, stop: int) -> Token:
    lv = get(ks, name)
    if lv is None:
        return None
    n = len(lv)
    s, e = clamp(start, stop, n)
    if s > e or s >= n:
        return ks.commit([("d", name)])
    op: Op = []
    if e < n - 1:
        op.append(_splice(ks, name, e + 1, n - 1 - e, []))
    if s > 0:
        op.append(_splice(ks, name, 0, s, []))
    return ks.commit(op) if op else None


def lpos(lv: Any, value: bytes, rank: int, count: int | None, maxlen: int) -> list[int]:
    """LPOS's matches: from the head for rank > 0, from the tail for rank < 0, skipping the
    first |rank| - 1; at most `count` (0: all; None: one); comparing at most `maxlen`
    elements (0: all)."""
    n = len(lv)
    want = 1 if count is None else count
    skip = abs(rank) - 1
    out: list[int] = []
    seq = enumerate(lv) if rank > 0 else ((n - 1 - j, v) for j, v in enumerate(lv.reversed()))
    for compared, (i, v) in enumerate(seq):
        if maxlen and compared >= maxlen:
            break
        if v == value:
            if skip:
                skip -= 1
                continue
            out.append(i)
            if want and len(out) >= want:
                break
    return out


def move(ks: Keyspace, src: str, dst: str, from_left: bool,
         to_left: bool) -> tuple[bytes | None, Token]:
    """LMOVE/RPOPLPUSH: one element from `src` to `dst`, one operation (Rule 1): never lost,
    never in both lists, across a crash too."""
    lv = get(ks, src)
    if lv is None:
        return None, None
    other = get(ks, dst)  # WRONGTYPE before anything changes (Rule 2)
    n = len(lv)
    value: bytes = lv.get(0 if from_left else n - 1)
    op: Op = [_splice(ks, src, 0 if from_left else n - 1, 1, [])]
    if src == dst:
        m = n - 1
    else:
        m = len(other) if other is not None else 0
    op.append(_splice(ks, dst, 0 if to_left else m, 0, [value]))
    return value, ks.commit(op, True)


def first_nonempty(ks: Keyspace, names: list[str]) -> tuple[str, Any] | None:
    """LMPOP/BLMPOP: the first key (in argument order) that holds a list."""
    for name in names:
        lv = get(ks, name)
        if lv is not None:
            return name, lv
    return None
