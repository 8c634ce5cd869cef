"""Lists, hashes and sorted sets in the keyspace (space.py Rules 5-6): applying their changes
(ops.py "L", "H", "Z", "c"), the one change that puts a whole collection (the checkpoint,
COPY, RENAME), and what MEMORY USAGE and the status page read of them. Sans-IO; `ks` is the Keyspace.

Rule 1: a collection exists while it holds an element: the change that empties it deletes
the key, a change that would make an empty one makes nothing.
Rule 2: `add` and `drop` are the only places `colls`, `order` and `nbytes` change for a
collection (space.py Rule 5).
Rule 3 (hash field TTLs, hashexpiry.py): `ks.fexpiry` maps each hash with field deadlines to
its soonest one; every change of a hash ("H", "h", "c") puts it back in step (`reindex`),
`drop` removes it. A whole-hash change carries the field deadlines as a 7th element.
Rule 4 (memory): the access stamp a change puts on a value is one shared int object per
second (`shared`), not an int of its own per value.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import islice
from typing import TYPE_CHECKING, Any, Final

from topicsrv.engine.keyspace.hashvalue import HashValue
from topicsrv.engine.keyspace.quicklist import ListValue
from topicsrv.engine.keyspace.setvalue import SetValue, limits_of
from topicsrv.engine.keyspace.zsetvalue import ZsetValue

if TYPE_CHECKING:
    from topicsrv.engine.keyspace.space import Keyspace

LIST: Final = "list"  # annotated: space.py reads them inside an import cycle (mypyc)
HASH: Final = "hash"
SET: Final = "set"
ZSET: Final = "zset"


LIMIT_CAP = (1 << 31) - 1  # the journal keeps the limits in 31 bits (hashes.py)


def hash_limits(value: HashValue) -> tuple[int, int]:
    """The limits a whole copy of a hash is made with ("c": COPY, RENAME, the checkpoint):
    no limit for a packed one, (0, 0) for a dict-encoded one, so that the copy keeps the
    encoding (Redis's COPY and RENAME keep it; topicsrv's restart does as well). The next
    change carries the server's limits again (hashvalue.py Rule 3)."""
    return (LIMIT_CAP, LIMIT_CAP) if value.table is None else (0, 0)


def zset_limits(value: ZsetValue) -> tuple[int, int]:
    """As `hash_limits`, for a sorted set (zsetvalue.py Rule 3)."""
    return (LIMIT_CAP, LIMIT_CAP) if value.table is None else (0, 0)


def put_change(name: str, value: Any, deadline: int) -> tuple[Any, ...]:
    """The change that puts collection `value` whole at `name`, with `deadline` (0: none)."""
    if value.KIND == LIST:
        return ("c", name, LIST, list(value), deadline, (value.fill, 0))
    if value.KIND == SET:
        return ("c", name, SET, value.members(), deadline, limits_of(value))
    if value.KIND == ZSET:
        return ("c", name, ZSET, value.pairs(), deadline, zset_limits(value))
    ttls = value.ttl_pairs()
    if ttls:  # Rule 3
        return ("c", name, HASH, list(value.items()), deadline, hash_limits(value), ttls)
    return ("c", name, HASH, list(value.items()), deadline, hash_limits(value))


def elements(value: Any, start: int) -> Iterator[Any]:
    """The items of a whole-collection change of `value` ("c": a list's elements, a hash's
    (field, value) pairs), in order, from the `start`-th (the checkpoint writes a big
    collection in pieces: snapshot.py Rule 3)."""
    if value.KIND == LIST:
        return value.iter_from(start) if start else iter(value)
    if value.KIND == SET:
        return value.iter_from(start)
    if value.KIND == ZSET:
        table = value.table
        if table is not None:
            return table.order.walk(start) if start < len(table) else iter(())
        return islice(value.pairs(), start, None)
    return islice(value.items(), start, None)


def piece_change(name: str, value: Any, items: list[Any], pos: int, deadline: int) -> tuple[Any, ...]:
    """The change that writes `items` (the collection's from its `pos`-th on): the first piece
    puts the collection ("c", with its TTL), a later one appends to it."""
    if value.KIND == LIST:
        if pos == 0:
            return ("c", name, LIST, items, deadline, (value.fill, 0))
        return ("L", name, pos, 0, items, value.fill)
    if value.KIND == SET:
        if pos == 0:
            return ("c", name, SET, items, deadline, limits_of(value))
        return ("S", name, items, [], limits_of(value))
    if value.KIND == ZSET:
        zl = zset_limits(value)
        if pos == 0:
            return ("c", name, ZSET, items, deadline, zl)
        return ("Z", name, items, [], zl[0], zl[1])
    limits = hash_limits(value)
    if pos == 0:
        return ("c", name, HASH, items, deadline, limits)
    return ("H", name, items, [], limits[0], limits[1])


def tail_changes(name: str, value: Any) -> list[tuple[Any, ...]]:
    """What a collection written in pieces still needs after its last one: a hash's field
    deadlines (Rule 3)."""
    if value.KIND == HASH:
        ttls = value.ttl_pairs()
        if ttls:
            return [("h", name, ttls)]
    return []


def copy(value: Any) -> Any:
    """A copy of a collection that later changes of the original leave alone (the checkpoint's
    image of a key changed before it is written: snapshot.py Rule 2). A list and a set copy
    themselves; other kinds are rebuilt from their whole-collection change."""
    if value.KIND == LIST or value.KIND == SET:
        return value.copy()
    if value.KIND == ZSET:
        return ZsetValue.of(value.pairs(), zset_limits(value))
    ch = put_change("", value, 0)
    hv = HashValue.of(ch[3], ch[5])
    for f, d in (ch[6] if len(ch) > 6 else ()):
        hv.expire(f, d)
    return hv


def copy_change(ks: Keyspace, src: str, dst: str) -> tuple[Any, ...]:
    """The change that puts a copy of collection `src` at `dst` (COPY, RENAME), its TTL
    included."""
    return put_change(dst, ks.colls[src], ks.expiry.get(src) or 0)


def usage(ks: Keyspace, name: str) -> int:
    """MEMORY USAGE of a list or hash: its packed bytes, per-node and per-entry overheads and
    the key (an estimate of the same order as Redis's)."""
    coll = ks.colls[name]
    if coll.KIND == LIST:
        return 72 + len(name) + coll.nbytes + 48 * len(coll.nodes)
    if coll.KIND == SET:  # a small set is one run; a big one a Python set
        return 72 + len(name) + coll.nbytes + (0 if coll.table is None else 40 * len(coll))
    if coll.KIND == ZSET:
        return 72 + len(name) + coll.nbytes + (0 if coll.table is None else 72 * len(coll))
    extra = 0 if coll.table is None else 56 * len(coll)
    return 72 + len(name) + coll.nbytes + extra


def counts(ks: Keyspace) -> dict[str, int]:
    """Keys by kind (the status page, /metrics)."""
    out = {"string": len(ks.strings), LIST: 0, HASH: 0}
    out[SET] = 0
    out[ZSET] = 0
    for value in ks.colls.values():
        out[value.KIND] += 1
    return out


def apply(ks: Keyspace, ch: Any, second: int) -> None:
    """A collection change (Rule 1); `second` (non-zero) records an access."""
    kind, name = ch[0], ch[1]
    value = ks.colls.get(name)
    if kind == "c":
        if value is not None:
            drop(ks, name)
        elif name in ks.strings:
            ks.apply([("d", name)])
        if ch[2] == LIST:
            value = ListValue.of(ch[3], ch[5][0])
        elif ch[2] == SET:
            value = SetValue.of(ch[3], ch[5])
        elif ch[2] == ZSET:
            value = ZsetValue.of(ch[3], (ch[5][0], ch[5][1]))
        else:
            hv = HashValue.of(ch[3], (ch[5][0], ch[5][1]))
            for f, d in ch[6] if len(ch) > 6 else ():
                hv.expire(f, d)
            value = hv
        if not len(value):
            return
        add(ks, name, value)
        if ch[4]:
            ks.expiry.set(name, ch[4])
        if isinstance(value, HashValue) and value.ttls is not None:
            reindex(ks, name, value)
    elif kind == "L":
        if value is None:
            if not ch[4]:
                return
            value = ListValue(ch[5])
            add(ks, name, value)
        old = value.nbytes
        value.splice(ch[2], ch[3], ch[4])
        ks.nbytes += value.nbytes - old
    elif kind == "H":
        if value is None:
            if not ch[2]:
                return
            value = HashValue()
            add(ks, name, value)
        old = value.nbytes
        value.set_many(ch[2], (ch[4], ch[5]))  # the server's limits (hashvalue.py Rule 3)
        for f in ch[3]:
            value.delete(f)
        ks.nbytes += value.nbytes - old
        if value.ttls is not None:
            reindex(ks, name, value)
    elif kind == "Z":
        if value is None:
            if not ch[2]:
                return
            value = ZsetValue()
            add(ks, name, value)
        old = value.nbytes
        limits = (ch[4], ch[5])  # the server's at the change (zsetvalue.py Rule 3)
        for m, score in ch[2]:
            value.set(m, score, limits)
        for m in ch[3]:
            value.delete(m)
        ks.nbytes += value.nbytes - old
    elif kind == "S":  # the server's limits at the change (setvalue.py Rule 2)
        if value is None:
            if not ch[2]:
                return
            value = SetValue()
            add(ks, name, value)
        old = value.nbytes
        value.add_many(ch[2], ch[4])
        value.remove_many(ch[3])
        ks.nbytes += value.nbytes - old
    else:  # "h": field deadlines (Rule 3)
        if value is None or value.KIND != HASH:
            return
        for f, d in ch[2]:
            value.expire(f, d)
        reindex(ks, name, value)
    if second:
        value.second = shared(second)
    if not len(value):
        drop(ks, name)


_SECOND: Final[list[Any]] = [0]  # Any: the compiled module keeps the boxed int, unboxed not


def shared(second: int) -> Any:
    """One int object per second for every value stamped in it (Rule 4): a compiled caller
    would box a new int for each value, and a Python-class value (a set) keeps it."""
    if _SECOND[0] != second:
        _SECOND[0] = second
    return _SECOND[0]


def reindex(ks: Keyspace, name: str, value: HashValue) -> None:
    """Rule 3: the hash's soonest field deadline in `ks.fexpiry`."""
    ttls = value.ttls
    nxt = 0 if ttls is None else ttls.next()
    index = ks.fexpiry
    if not nxt:
        index.clear(name)
    elif index.deadlines.get(name) != nxt:
        index.set(name, nxt)


def add(ks: Keyspace, name: str, value: Any) -> None:
    ks.colls[name] = value
    ks.order.add(name)
    ks.nbytes += len(name) + value.nbytes


def drop(ks: Keyspace, name: str) -> None:
    value = ks.colls.pop(name)
    ks.order.remove(name)
    ks.nbytes -= len(name) + value.nbytes
    ks.expiry.clear(name)
    ks.fexpiry.clear(name)
