"""A hash value: a packed run of field/value pairs while small (Redis's listpack), a dict once
past `hash-max-listpack-entries` pairs or a field or value longer than
`hash-max-listpack-value` (Redis's hashtable); it never goes back, as in Redis. Sans-IO, typed
for the compiled build.

Rule 1 (order): the packed form keeps insertion order (HGETALL answers in it, as Redis's
listpack); the dict keeps insertion order too (Redis's hashtable order is its own: tests
compare hashtable replies as sets).
Rule 2 (cost): a lookup in the packed form walks at most `max_entries` pairs; in the dict it
is one hash lookup. `nbytes` is the packed size, or the sum of field and value lengths.
Rule 3 (conversion, as Redis 7.0's hashTypeSet): a set converts the packed form when the
field or the value is longer than `max_value`, or when the hash then holds more than
`max_entries` pairs (an update too: the limits may have been lowered by CONFIG SET since).
The limits are the server's at each change (`limits`), so a replay converts at the same
change.
Rule 4 (HSCAN): a dict-encoded hash that has been scanned keeps its fields in SCAN order
(`index`, by scanorder.field_hash) from then on, in step with every set and delete: a scan
page is O(log n + count), a hash never scanned pays nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

from sortedcontainers import SortedKeyList

from topicsrv.engine.keyspace import packed
from topicsrv.engine.keyspace.scanorder import field_hash

LISTPACK: Final = "listpack"
HASHTABLE: Final = "hashtable"


class HashValue:
    __slots__ = ("run", "count", "table", "nbytes", "max_entries", "max_value", "second",
                 "index")
    KIND: Final = "hash"

    def __init__(self, max_entries: int = 512, max_value: int = 64) -> None:
        self.second = 0  # the last access, in whole seconds (OBJECT IDLETIME; space.py Entry)
        self.run: bytearray | None = bytearray()
        self.count = 0
        self.table: dict[bytes, bytes] | None = None
        self.nbytes = 0
        self.max_entries, self.max_value = max_entries, max_value
        self.index: SortedKeyList | None = None  # Rule 4

    @property
    def encoding(self) -> str:
        return LISTPACK if self.table is None else HASHTABLE

    def __len__(self) -> int:
        table = self.table
        return self.count if table is None else len(table)

    def _find(self, field: bytes) -> tuple[int, int]:
        """(offset of the pair, offset past it) in the packed form; (-1, -1) if absent."""
        run = self.run
        assert run is not None
        pos, end = 0, len(run)
        while pos < end:
            f, vpos = packed.read(run, pos)
            nxt = packed.skip(run, vpos)
            if f == field:
                return pos, nxt
            pos = nxt
        return -1, -1

    def get(self, field: bytes) -> bytes | None:
        table = self.table
        if table is not None:
            return table.get(field)
        start, _ = self._find(field)
        if start < 0:
            return None
        run = self.run
        assert run is not None
        return packed.read(run, packed.skip(run, start))[0]

    def __contains__(self, field: bytes) -> bool:
        return self.get(field) is not None

    def limits(self, max_entries: int, max_value: int) -> None:
        """The server's limits at this change (Rule 3)."""
        self.max_entries, self.max_value = max_entries, max_value

    def set(self, field: bytes, value: bytes) -> bool:
        """Set one field; True when the field is new (Rule 3)."""
        table = self.table
        if table is None and (len(field) > self.max_value or len(value) > self.max_value):
            table = self._convert()
        if table is not None:
            old = table.get(field)
            table[field] = value
            if old is None:
                self.nbytes += len(field) + len(value)
                if self.index is not None:
                    self.index.add(field)
                return True
            self.nbytes += len(value) - len(old)
            return False
        run = self.run
        assert run is not None
        start, end = self._find(field)
        pair = packed.encode(field) + packed.encode(value)
        new = start < 0
        if new:
            run += pair
            self.count += 1
            self.nbytes += len(pair)
        else:
            run[start:end] = pair
            self.nbytes += len(pair) - (end - start)
        if self.count > self.max_entries:
            self._convert()
        return new

    def delete(self, field: bytes) -> bool:
        table = self.table
        if table is not None:
            old = table.pop(field, None)
            if old is None:
                return False
            self.nbytes -= len(field) + len(old)
            if self.index is not None:
                self.index.remove(field)
            return True
        start, end = self._find(field)
        if start < 0:
            return False
        run = self.run
        assert run is not None
        del run[start:end]
        self.count -= 1
        self.nbytes -= end - start
        return True

    def items(self) -> Iterator[tuple[bytes, bytes]]:
        table = self.table
        if table is not None:
            yield from table.items()
            return
        run = self.run
        assert run is not None
        it = packed.values(run)
        for f in it:
            yield f, next(it)

    def scan_index(self) -> SortedKeyList:
        """The fields of a dict-encoded hash in SCAN order, built on first use (Rule 4)."""
        index = self.index
        if index is None:
            index = self.index = SortedKeyList(self.table or (), key=field_hash)
        return index

    def _convert(self) -> dict[bytes, bytes]:
        table = dict(self.items())
        self.table, self.run, self.count = table, None, 0
        self.nbytes = sum(len(f) + len(v) for f, v in table.items())
        return table

    @classmethod
    def of(cls, pairs: list[tuple[bytes, bytes]], max_entries: int = 512,
           max_value: int = 64) -> HashValue:
        hv = cls(max_entries, max_value)
        for f, v in pairs:
            hv.set(f, v)
        return hv
