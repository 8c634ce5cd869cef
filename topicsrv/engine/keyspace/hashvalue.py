"""A hash value: a packed run of field/value pairs while small (Redis's listpack), a dict once
past `hash-max-listpack-entries` pairs or a field or value longer than
`hash-max-listpack-value` (Redis's hashtable); it never goes back, as in Redis. Fields may
carry a deadline (Redis 7.4's hash field expiry, `ttls`). Sans-IO, typed for the compiled
build.

Rule 1 (order): the packed form keeps insertion order (HGETALL answers in it, as Redis's
listpack); the dict keeps insertion order too (Redis's hashtable order is its own: tests
compare hashtable replies as sets).
Rule 2 (cost): a lookup in the packed form walks at most `hash-max-listpack-entries` pairs; in
the dict it is one hash lookup. `nbytes` is the packed size, or the sum of field and value
lengths (kept in `count`, which counts the packed run's pairs while there is one).
Rule 3 (conversion, as Redis 7.0's hashTypeSet): a set converts the packed form when the
field or the value is longer than `max_value`, or when the hash then holds more than
`max_entries` pairs (an update too: the limits may have been lowered by CONFIG SET since).
The limits are the server's at each change, passed to every set, so a replay converts at the
same change.
Rule 4 (HSCAN): a dict-encoded hash that has been scanned keeps its fields in SCAN order
(`index`, by scanorder.field_hash) from then on, in step with every set and delete: a
scan page is O(log n + count), a hash never scanned pays nothing.
Rule 5 (memory: 100,000 small hashes must cost at most twice redis-server's): a small hash is
this object (five slots) and ONE immutable bytes run, allocated to its exact size; a big
hash's byte count is `count` (Rule 2), what only a hash with field TTLs needs is on its
`FieldTTLs`. A set rebuilds the run (a copy of at most
`max_entries` pairs, as Redis's listpack insert moves its tail); a set of many pairs
rebuilds it once.
Rule 6 (field TTLs): `ttls` is None until a field gets a deadline, then a `FieldTTLs` kept
even when no field has one any more: the encoding is then `listpackex` (or `hashtable`), as
Redis 7.4 keeps OBJ_ENCODING_LISTPACK_EX. A set or a delete of a field removes its deadline
(HSET clears a field's TTL, as 7.4); deadlines are absolute Unix milliseconds.
Rule 7 (outside the cyclic GC): HashValue and FieldTTLs are acyclic native classes, and the
dict form is a plain dict of bytes, which CPython never tracks: in the compiled build a hash
of any size adds nothing for a full collection to walk (docs/decisions.md, "The keyspace's
values outside the cyclic GC").
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from typing import Final

from mypy_extensions import mypyc_attr
from sortedcontainers import SortedKeyList

from topicsrv.engine.keyspace import packed
from topicsrv.engine.keyspace.scanorder import field_hash

LISTPACK: Final = "listpack"
LISTPACKEX: Final = "listpackex"
HASHTABLE: Final = "hashtable"
DEFAULT_LIMITS: Final = (512, 64)
# a set of more pairs than this rebuilds a packed run once instead of once per pair (Rule 5)
_BULK: Final = 4


@mypyc_attr(acyclic=True)  # Rule 7
class FieldTTLs:
    """The deadlines of a hash's fields: a dict (the truth) and a heap of (deadline, field)
    that may hold stale pairs, dropped as they surface (as expiry.py's index)."""

    __slots__ = ("deadlines", "heap")

    def __init__(self) -> None:
        self.deadlines: dict[bytes, int] = {}
        self.heap: list[tuple[int, bytes]] = []

    def set(self, field: bytes, deadline: int) -> None:
        if self.deadlines.get(field) == deadline:
            return
        self.deadlines[field] = deadline
        heapq.heappush(self.heap, (deadline, field))
        if len(self.heap) > 2 * len(self.deadlines) + 16:
            self.heap = [(d, f) for f, d in self.deadlines.items()]
            heapq.heapify(self.heap)

    def clear(self, field: bytes) -> None:
        self.deadlines.pop(field, None)

    def next(self) -> int:
        """The soonest deadline of any field, 0 if none."""
        heap, deadlines = self.heap, self.deadlines
        while heap:
            deadline, field = heap[0]
            if deadlines.get(field) == deadline:
                return deadline
            heapq.heappop(heap)
        return 0

    def due(self, now: int, budget: int) -> list[bytes]:
        """At most `budget` fields whose deadline is <= now, soonest first (they stay in
        `deadlines` until the caller deletes them)."""
        out: list[bytes] = []
        heap, deadlines = self.heap, self.deadlines
        while heap and len(out) < budget and heap[0][0] <= now:
            deadline, field = heapq.heappop(heap)
            if deadlines.get(field) == deadline:
                out.append(field)
        return out


@mypyc_attr(acyclic=True)  # Rule 7
class HashValue:
    __slots__ = ("data", "count", "ttls", "second", "index")
    KIND: Final = "hash"

    def __init__(self) -> None:
        self.data: bytes | dict[bytes, bytes] = b""  # Rule 5: the packed run, or the dict
        self.count = 0  # pairs in the packed run; the dict's field and value bytes (Rule 2)
        self.ttls: FieldTTLs | None = None  # Rule 6
        self.second = 0  # the last access, in whole seconds (OBJECT IDLETIME; space.py Entry)
        self.index: SortedKeyList | None = None  # a scanned dict's fields in SCAN order (Rule 4)

    @property
    def table(self) -> dict[bytes, bytes] | None:
        """The dict form, None while packed."""
        data = self.data
        return data if type(data) is dict else None

    @property
    def encoding(self) -> str:
        if type(self.data) is dict:
            return HASHTABLE
        return LISTPACK if self.ttls is None else LISTPACKEX

    @property
    def nbytes(self) -> int:
        data = self.data
        return self.count if type(data) is dict else len(data)

    def __len__(self) -> int:
        data = self.data
        return len(data) if type(data) is dict else self.count

    def _find(self, field: bytes) -> tuple[int, int]:
        """(offset of the pair, offset past it) in the packed run; (-1, -1) if absent."""
        run = self.data
        assert type(run) is bytes
        n = len(field)
        short = n < packed.SMALL
        pos, end = 0, len(run)
        while pos < end:
            vpos = packed.skip(run, pos)
            head = run[pos]
            if (head == n and run[pos + 1:pos + 1 + n] == field) if short else \
                    (head == packed.BIG and packed.read(run, pos)[0] == field):
                return pos, packed.skip(run, vpos)
            pos = packed.skip(run, vpos)
        return -1, -1

    def get(self, field: bytes) -> bytes | None:
        data = self.data
        if type(data) is dict:
            return data.get(field)
        start, end = self._find(field)
        if start < 0:
            return None
        assert type(data) is bytes
        return packed.read(data, packed.skip(data, start))[0]

    def __contains__(self, field: bytes) -> bool:
        return self.get(field) is not None

    def set(self, field: bytes, value: bytes, limits: tuple[int, int] = DEFAULT_LIMITS) -> bool:
        """Set one field (its TTL removed, Rule 6); True when the field is new (Rule 3)."""
        max_entries, max_value = limits
        if self.ttls is not None:
            self.ttls.clear(field)
        data = self.data
        if type(data) is not dict and (len(field) > max_value or len(value) > max_value):
            data = self._convert()
        if type(data) is dict:
            old = data.get(field)
            data[field] = value
            if old is None:
                self.count += len(field) + len(value)
                if self.index is not None:
                    self.index.add(field)
                return True
            self.count += len(value) - len(old)
            return False
        assert type(data) is bytes
        start, end = self._find(field)
        pair = packed.encode(field) + packed.encode(value)
        new = start < 0
        if new:
            self.data = data + pair
            self.count += 1
        else:
            self.data = b"".join((data[:start], pair, data[end:]))
        if self.count > max_entries:
            self._convert()
        return new

    def set_many(self, pairs: list[tuple[bytes, bytes]],
                 limits: tuple[int, int] = DEFAULT_LIMITS) -> None:
        """Set each pair in order, as `set` of each; a packed run is rebuilt once (Rule 5)."""
        if len(pairs) <= _BULK or type(self.data) is dict:
            for f, v in pairs:
                self.set(f, v, limits)
            return
        max_entries, max_value = limits
        items = dict(self.items())
        items.update(pairs)
        ttls = self.ttls
        if ttls is not None:
            for f, _ in pairs:
                ttls.clear(f)
        if len(items) > max_entries or any(len(f) > max_value or len(v) > max_value
                                           for f, v in pairs):
            self._to_dict(items)
            return
        self.data = packed.encode_many([x for pair in items.items() for x in pair])
        self.count = len(items)

    def delete(self, field: bytes) -> bool:
        if self.ttls is not None:
            self.ttls.clear(field)
        data = self.data
        if type(data) is dict:
            old = data.pop(field, None)
            if old is None:
                return False
            self.count -= len(field) + len(old)
            if self.index is not None:
                self.index.remove(field)
            return True
        start, end = self._find(field)
        if start < 0:
            return False
        assert type(data) is bytes
        self.data = data[:start] + data[end:]
        self.count -= 1
        return True

    def items(self) -> Iterator[tuple[bytes, bytes]]:
        data = self.data
        if type(data) is dict:
            yield from data.items()
            return
        assert type(data) is bytes
        it = packed.values(data)
        for f in it:
            yield f, next(it)

    # ---- field TTLs (Rule 6) ---------------------------------------------------------------

    def ttl(self, field: bytes) -> int:
        """The deadline of `field` (absolute ms), 0 when it has none."""
        ttls = self.ttls
        return 0 if ttls is None else ttls.deadlines.get(field, 0)

    def expire(self, field: bytes, deadline: int) -> None:
        """Give an existing field a deadline (0: remove it); a missing field is left alone."""
        if field not in self:
            return
        ttls = self.ttls
        if ttls is None:
            if not deadline:
                return
            ttls = self.ttls = FieldTTLs()
        if deadline:
            ttls.set(field, deadline)
        else:
            ttls.clear(field)

    def ttl_pairs(self) -> list[tuple[bytes, int]]:
        """Every (field, deadline) of the hash (the whole-value change, colls.put_change)."""
        ttls = self.ttls
        return [] if ttls is None else list(ttls.deadlines.items())

    def scan_index(self) -> SortedKeyList:
        """The fields of a dict-encoded hash in SCAN order, built on first use (Rule 4)."""
        table = self.data
        assert type(table) is dict
        index = self.index
        if index is None:
            index = self.index = SortedKeyList(table, key=field_hash)
        return index

    def _convert(self) -> dict[bytes, bytes]:
        return self._to_dict(dict(self.items()))

    def _to_dict(self, table: dict[bytes, bytes]) -> dict[bytes, bytes]:
        """The dict form (Rule 3), `count` its bytes (Rule 2)."""
        self.data, self.count = table, sum(len(f) + len(v) for f, v in table.items())
        return table

    @classmethod
    def of(cls, pairs: list[tuple[bytes, bytes]],
           limits: tuple[int, int] = DEFAULT_LIMITS) -> HashValue:
        hv = cls()
        hv.set_many(pairs, limits)
        return hv
