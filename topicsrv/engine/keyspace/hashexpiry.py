"""Hash field expiry (Redis 7.4's HEXPIRE family) on the keyspace: the commands' operations
and the reaping of expired fields. Sans-IO; `ks` is the Keyspace.

Rule 1 (never visible): a field whose deadline passed is deleted before anything reads the
hash: every hash lookup (hashes.get) and every key lookup (space.py `kind`) first reaps the
due fields of that one hash (`reap_if_due`: one dict read when it has nothing due), and
counts (DBSIZE, KEYS, SCAN) reap every due hash first. The active expiry tick reaps at most
`budget` hashes and `budget` fields per tick (`reap`), taken from `ks.fexpiry` (hash -> its
soonest field deadline, colls.py Rule 3) and each hash's own heap of field deadlines: the
work is proportional to what expired, never a scan of the keyspace or of a hash.
Rule 2 (durable): reaping is ONE journaled operation per hash, the physical delete of the
fields ("H"), so replay deletes exactly those; deadlines are journaled absolute ("h"), so a
field whose deadline passed while the server was down is reaped on its first access after
the restart and never seen. A hash whose last field expires is deleted by that change.
Rule 3 (events): each reap tells `ks.on_hexpired(name, gone)`: the bus fires `hexpired`, then
`del` when the hash went with its fields (Redis 7.4's active and lazy expiry).
Rule 4 (replies, Redis 7.4's t_hash.c): HEXPIRE* answer per field -2 (no such field), 0 (the
NX/XX/GT/LT condition failed; a field without TTL is an infinite TTL for GT/LT), 1 (set), 2
(deleted: the deadline is not in the future); HTTL* -2 / -1 (no TTL) / the time left or the
deadline (seconds rounded up); HPERSIST -2 / -1 / 1. The fields are taken in argument order,
each seeing the previous ones' changes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from topicsrv.engine.keyspace.colls import HASH, reindex
from topicsrv.errors import TopicsError

if TYPE_CHECKING:
    from topicsrv.engine.keyspace.hashvalue import HashValue
    from topicsrv.engine.keyspace.space import Keyspace

Token = Any
NX, XX, GT, LT = "NX", "XX", "GT", "LT"
NO_FIELD, NOT_MET, SET, DELETED = -2, 0, 1, 2
NO_TTL, PERSISTED = -1, 1
# the limits a reap's delete carries: deleting never converts a hash (hashvalue.py Rule 3)
_KEEP = ((1 << 31) - 1, (1 << 31) - 1)


def _delete(ks: Keyspace, name: str, fields: list[bytes]) -> bool:
    """Delete expired `fields` of hash `name` as one journaled change (Rule 2); True when the
    hash went with them."""
    op: Any = [("H", name, [], fields, _KEEP[0], _KEEP[1])]
    try:
        ks.commit(op)
    except TopicsError:  # storage refuses writes: hide them anyway (as space.py's _expire)
        ks.apply(op)
        ks.host.notify(name)
    ks.stats["expired_fields"] = ks.stats.get("expired_fields", 0) + len(fields)
    gone = name not in ks.colls
    if ks.on_hexpired is not None:
        ks.on_hexpired(name, gone)
    return gone


def _reap_hash(ks: Keyspace, name: str, now: int, budget: int) -> tuple[int, bool]:
    """Reap at most `budget` due fields of `name`: (how many, whether the hash is gone)."""
    hv = ks.colls.get(name)
    if hv is None or hv.KIND != HASH or hv.ttls is None:
        ks.fexpiry.clear(name)
        return 0, False
    due = hv.ttls.due(now, budget)
    gone = _delete(ks, name, due) if due else False
    if not gone:
        ks.fexpiry.clear(name)  # the popped heap entry is gone: index it afresh
        reindex(ks, name, hv)
    return len(due), gone


def reap_if_due(ks: Keyspace, name: str, now: int | None = None) -> bool:
    """Rule 1's lazy reap of one hash; True when the hash is gone."""
    deadline = ks.fexpiry.deadlines.get(name)
    if deadline is None:
        return False
    if now is None:
        now = ks.clock.now_ms()
    if deadline > now:
        return False
    return _reap_hash(ks, name, now, 1 << 62)[1]


def reap(ks: Keyspace, now: int, budget: int | None) -> int:
    """Reap due hashes: at most `budget` hashes and fields (the active tick), or all of them
    (None: before a count). Returns how many hashes were deleted."""
    index = ks.fexpiry
    gone = 0
    if budget is None:
        while index.heap and index.heap[0][0] <= now:
            for name in index.due(now, len(index.heap)):
                gone += _reap_hash(ks, name, now, 1 << 62)[1]
        return gone
    fields = budget
    for name in index.due(now, budget):
        if fields <= 0:  # the field budget ran out: the hash waits for the next tick
            deadline = ks.colls[name].ttls.next() if name in ks.colls else 0
            index.clear(name)
            if deadline:
                index.set(name, deadline)
            continue
        n, went = _reap_hash(ks, name, now, fields)
        fields -= n
        gone += went
    return gone


def expire_fields(ks: Keyspace, hv: HashValue | None, name: str, deadline: int,
                  cond: str | None, fields: list[bytes]) -> tuple[list[int], Token]:
    """HEXPIRE/HPEXPIRE/HEXPIREAT/HPEXPIREAT at absolute `deadline` (ms) (Rule 4)."""
    if hv is None:
        return [NO_FIELD] * len(fields), None
    past = deadline <= ks.clock.now_ms()
    pending: dict[bytes, int] = {}
    dels: dict[bytes, None] = {}
    out: list[int] = []
    for f in fields:
        if f in dels or f not in hv:
            out.append(NO_FIELD)
            continue
        prev = pending.get(f, hv.ttl(f))
        if not prev:
            if cond in (XX, GT):
                out.append(NOT_MET)
                continue
        elif cond == NX or cond == GT and prev >= deadline or cond == LT and prev <= deadline:
            out.append(NOT_MET)
            continue
        if past:
            dels[f] = None
            out.append(DELETED)
        else:
            pending[f] = deadline
            out.append(SET)
    if dels:
        from topicsrv.engine.keyspace.hashes import change

        return out, ks.commit([change(ks, name, [], list(dels))])
    if pending:
        return out, ks.commit([("h", name, list(pending.items()))])
    return out, None


def persist_fields(ks: Keyspace, hv: HashValue | None, name: str,
                   fields: list[bytes]) -> tuple[list[int], Token]:
    """HPERSIST (Rule 4)."""
    if hv is None:
        return [NO_FIELD] * len(fields), None
    done: dict[bytes, None] = {}
    out: list[int] = []
    for f in fields:
        if f not in hv:
            out.append(NO_FIELD)
        elif f in done or not hv.ttl(f):
            out.append(NO_TTL)
        else:
            done[f] = None
            out.append(PERSISTED)
    if not done:
        return out, None
    return out, ks.commit([("h", name, [(f, 0) for f in done])])


def field_times(ks: Keyspace, hv: HashValue | None, fields: list[bytes], relative: bool,
                millis: bool) -> list[int]:
    """HTTL (relative, seconds), HPTTL, HEXPIRETIME, HPEXPIRETIME (Rule 4)."""
    if hv is None:
        return [NO_FIELD] * len(fields)
    base = ks.clock.now_ms() if relative else 0
    out: list[int] = []
    for f in fields:
        if f not in hv:
            out.append(NO_FIELD)
            continue
        deadline = hv.ttl(f)
        if not deadline:
            out.append(NO_TTL)
        elif millis:
            out.append(deadline - base)
        else:
            out.append((deadline + 999 - base) // 1000)
    return out
