"""Sorted-set operations on the keyspace (Redis 7's @sortedset family). Each command's mutation
is ONE keyspace operation of one physical change (ops.py "Z": the (member, score) pairs put,
then the members deleted; "c" for a store), committed once: a journal frame, WATCH and
waiters told (space.py Rule 2).

Rule 1: a change carries results, never commands: ZINCRBY and ZADD INCR journal the new score,
a pop or a range removal the members it removed, so replay needs no arithmetic and no range
(ops.py Rule 1). The change carries the server's listpack limits at the time
(zset-max-listpack-entries/-value), so a replay converts at the same change (zsetvalue.py
Rule 3).
Rule 2: a key that holds another kind answers WRONGTYPE before anything changes; a sorted set
is deleted by the change that removes its last member (space.py Rule 6).
Rule 3 (ZADD, as Redis's zsetAdd): members are taken in argument order, each seeing the ones
before it; NX skips existing members, XX missing ones, GT/LT an update that does not raise /
lower the score; INCR adds to the current score and a NaN result refuses the command.
Rule 4 (stores: ZRANGESTORE, ZUNIONSTORE, ZINTERSTORE, ZDIFFSTORE): the destination is put
whole ("c", with the server's limits: packed when it fits them, as zsetConvertToListpackIfNeeded),
or deleted when the result is empty.
Rule 5 (ZUNION/ZINTER/ZDIFF inputs): a missing key is an empty set, a set (kind "set") counts
each member with score 1, as Redis's zuiInitIterator; anything else is WRONGTYPE.
"""

from __future__ import annotations

import math
import random
from typing import Any, Final

from topicsrv.engine.journal import Group, all_of
from topicsrv.engine.keyspace.colls import LIMIT_CAP
from topicsrv.engine.keyspace.ops import Op
from topicsrv.engine.keyspace.scanorder import page
from topicsrv.engine.keyspace.space import STREAM, ZSET, Keyspace, wrongtype
from topicsrv.engine.keyspace.strings import error
from topicsrv.engine.keyspace.zsetvalue import Pair, ZsetValue

Token = Any  # engine/journal.py's CommitToken | None
NAN_ERROR: Final = "resulting score is not a number (NaN)"
_random: Final = random.Random()


def get(ks: Keyspace, name: str) -> ZsetValue | None:
    """The sorted set at `name`, None if there is no key (WRONGTYPE for another kind)."""
    zv: ZsetValue | None = ks.coll(name, ZSET)
    return zv


def change(ks: Keyspace, name: str, sets: list[Pair], dels: list[bytes]) -> Any:
    """The change, with the server's limits (Rule 1), capped to the journal's 31 bits."""
    return ("Z", name, sets, dels, min(ks.zset_entries, LIMIT_CAP),
            min(ks.zset_value, LIMIT_CAP))


def limits(ks: Keyspace) -> tuple[int, int]:
    return min(ks.zset_entries, LIMIT_CAP), min(ks.zset_value, LIMIT_CAP)


def zadd(ks: Keyspace, name: str, pairs: list[tuple[float, bytes]], nx: bool = False,
         xx: bool = False, gt: bool = False, lt: bool = False,
         incr: bool = False) -> tuple[int, int, float | None, Token]:
    """ZADD/ZINCRBY (Rule 3): (added, updated, the INCR score or None when skipped, token)."""
    zv = get(ks, name)
    if zv is None and xx:
        return 0, 0, None, None
    seen: dict[bytes, float] = {}
    added = updated = 0
    result: float | None = None
    for score, member in pairs:
        cur = seen.get(member)
        if cur is None and zv is not None:
            cur = zv.score(member)
        if cur is not None:
            if nx:
                continue
            if incr:
                score += cur
                if math.isnan(score):
                    raise error(NAN_ERROR)
            if (lt and score >= cur) or (gt and score <= cur):
                continue
            result = score
            if score != cur:
                updated += 1
                seen[member] = score
        elif not xx:
            added += 1
            seen[member] = score
            result = score
    if not seen:
        return added, updated, result, None
    token = ks.commit([change(ks, name, list(seen.items()), [])], True)
    return added, updated, result, token


def zrem(ks: Keyspace, name: str, members: list[bytes]) -> tuple[int, Token]:
    zv = get(ks, name)
    if zv is None:
        return 0, None
    gone = list(dict.fromkeys(m for m in members if zv.score(m) is not None))
    if not gone:
        return 0, None
    return len(gone), ks.commit([change(ks, name, [], gone)])


def remove_span(ks: Keyspace, name: str, zv: ZsetValue, lo: int, hi: int) -> tuple[int, Token]:
    """ZREMRANGEBY*: remove the members at positions [lo, hi) (Rule 1: journaled by name)."""
    if lo >= hi:
        return 0, None
    gone = [m for m, _ in zv.span(lo, hi)]
    return len(gone), ks.commit([change(ks, name, [], gone)])


def pop(ks: Keyspace, name: str, count: int, top: bool) -> tuple[list[Pair], Token]:
    """ZPOPMIN/ZPOPMAX: up to `count` members from the low (top: high) end, in pop order."""
    return pop_from(ks, name, get(ks, name), count, top)


def pop_from(ks: Keyspace, name: str, zv: ZsetValue | None, count: int,
             top: bool) -> tuple[list[Pair], Token]:
    """`pop` of `zv`, the value the caller just looked up at `name` (one lookup a ZPOPMIN)."""
    if zv is None or count <= 0:
        return [], None
    n = len(zv)
    k = min(count, n)
    out = zv.span(n - k, n, True) if top else zv.span(0, k)
    return out, ks.commit([change(ks, name, [], [m for m, _ in out])])


def store(ks: Keyspace, dst: str, pairs: list[Pair]) -> tuple[int, Token]:
    """Rule 4: put `pairs` (distinct members) whole at `dst`, or delete it when empty; a
    topic there is deleted first, in the same commit group (as strings.py Rule 1)."""
    kind = ks.kind(dst)
    op: Op = [("c", dst, ZSET, pairs, 0, limits(ks))] if pairs else [("d", dst)]
    if kind != STREAM:
        if not pairs and kind is None:
            return 0, None
        return len(pairs), ks.commit(op, True)
    with Group(ks.host.journal):
        ks.host.journal.check_writable(None)
        tokens = [ks.host.delete_topic(dst)[1]]
        if pairs:
            tokens.append(ks.commit(op, True))
    return len(pairs), all_of(tokens)


def first_nonempty(ks: Keyspace, names: list[str]) -> str | None:
    """ZMPOP/BZMPOP: the first key (in argument order) that holds a sorted set."""
    for name in names:
        if get(ks, name) is not None:
            return name
    return None


# ---- several inputs (ZUNION, ZINTER, ZDIFF and their stores; ZINTERCARD) -----------------

def source(ks: Keyspace, name: str) -> dict[bytes, float] | None:
    """Rule 5: an input's members and scores (None: missing)."""
    kind = ks.kind(name)
    if kind is None:
        return None
    value = ks.colls.get(name)
    if value is None:
        raise wrongtype(name)
    if value.KIND == ZSET:
        table = value.table
        return dict(table) if table is not None else dict(value.pairs())
    if value.KIND == "set":
        return dict.fromkeys(value.members(), 1.0)
    raise wrongtype(name)


def _aggregate(a: float, b: float, how: bytes) -> float:
    if how == b"min":
        return b if b < a else a
    if how == b"max":
        return b if b > a else a
    total = a + b
    return 0.0 if math.isnan(total) else total


def combine(inputs: list[dict[bytes, float] | None], op: str, weights: list[float],
            how: bytes, limit: int = 0) -> list[Pair]:
    """The result of ZUNION ("union"), ZINTER ("inter") or ZDIFF ("diff") as (member, score)
    pairs in order; `limit` (> 0) stops an intersection after so many members (ZINTERCARD)."""
    srcs = [s or {} for s in inputs]
    out: dict[bytes, float] = {}
    if op == "diff":
        first = srcs[0]
        rest = srcs[1:]
        out = {m: s for m, s in first.items() if not any(m in o for o in rest)}
    elif op == "union":
        for src, w in zip(srcs, weights, strict=True):
            for m, s in src.items():
                v = w * s
                if math.isnan(v):
                    v = 0.0
                old = out.get(m)
                out[m] = v if old is None else _aggregate(old, v, how)
    else:
        order = sorted(range(len(srcs)), key=lambda i: len(srcs[i]))
        base = order[0]
        for m, s in srcs[base].items():
            score = weights[base] * s
            if math.isnan(score):
                score = 0.0
            for i in order[1:]:
                other = srcs[i].get(m)
                if other is None:
                    break
                score = _aggregate(score, other * weights[i], how)
            else:
                out[m] = score
                if limit and len(out) >= limit:
                    break
    return sorted(out.items(), key=lambda p: (p[1], p[0]))


# ---- reads -----------------------------------------------------------------------------

def random_members(zv: ZsetValue, count: int) -> list[Pair]:
    """ZRANDMEMBER's pairs: distinct for a positive count (the whole set, highest first, when
    the count reaches its size), repeats allowed for a negative one, as Redis."""
    pairs = zv.pairs()
    if count < 0:
        return _random.choices(pairs, k=-count)
    if count >= len(pairs):
        return pairs[::-1]  # the whole set, as Redis's zuiNext walks it: from the top
    return _random.sample(pairs, count)


def scan(zv: ZsetValue, cursor: int, count: int) -> tuple[int, list[Pair]]:
    """ZSCAN's page from `cursor` (as hashes.py Rule 3): a packed set answers in one page."""
    table = zv.table
    if table is None:
        return 0, zv.pairs()
    nxt, members = page([zv.scan_index()], cursor, count)
    return nxt, [(m, table[m]) for m in members]
