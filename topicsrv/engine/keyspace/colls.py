"""Lists and hashes in the keyspace (space.py Rules 5-6): applying their changes (ops.py "L",
"H", "c"), the one change that puts a whole collection (the checkpoint, COPY, RENAME), and
what MEMORY USAGE and the status page read of them. Sans-IO; `ks` is the Keyspace.

Rule 1: a collection exists while it holds an element: the change that empties it deletes
the key, a change that would make an empty one makes nothing.
Rule 2: `add` and `drop` are the only places `colls`, `order` and `nbytes` change for a
collection (space.py Rule 5).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from topicsrv.engine.keyspace.hashvalue import HashValue
from topicsrv.engine.keyspace.quicklist import ListValue

if TYPE_CHECKING:
    from topicsrv.engine.keyspace.space import Keyspace

LIST, HASH = "list", "hash"


def hash_limits(value: HashValue) -> tuple[int, int]:
    """The limits a whole copy of a hash is made with ("c": COPY, RENAME, the checkpoint):
    its own, or (0, 0) for a dict-encoded one, so that the copy is a dict too (Redis's COPY
    and RENAME keep the encoding; topicsrv's restart does as well)."""
    return (value.max_entries, value.max_value) if value.table is None else (0, 0)


def put_change(name: str, value: Any, deadline: int) -> tuple[Any, ...]:
    """The change that puts collection `value` whole at `name`, with `deadline` (0: none)."""
    if value.KIND == LIST:
        return ("c", name, LIST, list(value), deadline, (value.fill, 0))
    return ("c", name, HASH, list(value.items()), deadline, hash_limits(value))


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
    extra = 0 if coll.table is None else 56 * len(coll)
    return 72 + len(name) + coll.nbytes + extra


def counts(ks: Keyspace) -> dict[str, int]:
    """Keys by kind (the status page, /metrics)."""
    out = {"string": len(ks.strings), LIST: 0, HASH: 0}
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
        value = ListValue.of(ch[3], ch[5][0]) if ch[2] == LIST else \
            HashValue.of(ch[3], ch[5][0], ch[5][1])
        if not len(value):
            return
        add(ks, name, value)
        if ch[4]:
            ks.expiry.set(name, ch[4])
    elif kind == "L":
        if value is None:
            if not ch[4]:
                return
            value = ListValue(ch[5])
            add(ks, name, value)
        old = value.nbytes
        value.splice(ch[2], ch[3], ch[4])
        ks.nbytes += value.nbytes - old
    else:
        if value is None:
            if not ch[2]:
                return
            value = HashValue(ch[4], ch[5])
            add(ks, name, value)
        value.limits(ch[4], ch[5])  # the server's at this change (hashvalue.py Rule 3)
        old = value.nbytes
        for f, v in ch[2]:
            value.set(f, v)
        for f in ch[3]:
            value.delete(f)
        ks.nbytes += value.nbytes - old
    if second:
        value.second = second
    if not len(value):
        drop(ks, name)


def add(ks: Keyspace, name: str, value: Any) -> None:
    ks.colls[name] = value
    ks.order.add(name)
    ks.nbytes += len(name) + value.nbytes


def drop(ks: Keyspace, name: str) -> None:
    value = ks.colls.pop(name)
    ks.order.remove(name)
    ks.nbytes -= len(name) + value.nbytes
    ks.expiry.clear(name)
