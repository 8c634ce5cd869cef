"""A set value: a sorted run of 64-bit integers while every member is an integer (Redis's
intset), a packed run of members while small (Redis 7.2's listpack), a Python set once big
(Redis's hashtable); it never goes back, as in Redis. Sans-IO.

Rule 1 (encodings): `data` is an intset's bytes (a header, then native integers, ascending,
of width 2, 4 or 8 bytes each, the narrowest that holds every member, widened by an add and
never narrowed, as Redis's int16/int32/int64 intsets), a small set's bytes (a header, then
packed.py's run of its members in insertion order), or a `Table` (a set, settable.py: Python,
as this module is compiled) for a big one. The header of the two runs (Rule 4): byte 0 the
intset's width, or 0 for a packed run; bytes 1-4 the last access (u32, whole seconds); a
packed run then counts its members (u32). OBJECT ENCODING answers `intset` for the first and
`hashtable` for the other two, as redis-server 7.0, which has no listpack sets
(docs/decisions.md, "Sets").
Rule 2 (conversion, as Redis's setTypeAdd): an add converts an intset when the member is not
an integer's canonical form (values.parse_i64) or the set then holds more than
`limits[0]` members (set-max-intset-entries); it converts a packed run when the set then holds
more than `limits[1]` members (set-max-listpack-entries) or the member is longer than
`limits[2]` bytes (set-max-listpack-value). A set leaving the intset becomes a packed run when
it fits those two limits, else a Table. The limits are the server's at each change and
travel with it (ops.py "S"), so replay converts at the same change.
Rule 3 (order): an intset iterates in ascending numeric order (SMEMBERS of an intset answers
sorted on both servers); a packed run in insertion order; a Table in Python's set order
(tests compare non-intset replies as sets).
Rule 4 (memory: 100,000 small sets cost at most twice redis-server's): a small set is this
object (ONE slot: with its GC header and vtable pointer, 48 bytes, where a second slot made
64) and ONE plain immutable bytes run of its exact size (no subclass: that would add a GC
header to each) whose header holds what the slots held: the encoding, the member count, the
access stamp (OBJECT IDLETIME), which an access in a new second writes by replacing the run
(an access within the same second writes nothing). What only a big set needs (byte count,
SSCAN index, random pool, its access stamp) lives on its Table.
Rule 5 (random members of a Table, SPOP/SRANDMEMBER): drawn uniformly from `pool`, a list
of the members built on demand in which every member of the set has exactly ONE entry: an
add appends a new member, or revives the stale entry of one removed since the build (`gone`:
the removed members whose entries are stale); a stale entry drawn is drawn again
(rejection), and the pool is rebuilt once it is over twice the set's size. So SPOP and
SRANDMEMBER of `count` members cost O(count) amortized, however adds and pops interleave.
Rule 6 (the checkpoint in pieces, snapshot.py Rule 3): a Table's copy remembers its
source's iteration order (`Table.order`), since a Python set copied may iterate in another
order: a piece resumed on the copy skips exactly the members already written.
"""

from __future__ import annotations

import random
import struct
import sys
from array import array
from collections.abc import Iterable, Iterator
from itertools import chain, islice
from typing import Final

from mypy_extensions import mypyc_attr
from sortedcontainers import SortedKeyList

from topicsrv.engine.keyspace import packed
from topicsrv.engine.keyspace.scanorder import field_hash
from topicsrv.engine.keyspace.settable import Table
from topicsrv.engine.keyspace.values import parse_i64

INTSET: Final = "intset"
HASHTABLE: Final = "hashtable"
DEFAULT_LIMITS: Final = (512, 128, 64)  # set-max-intset-entries, -listpack-entries, -value
Limits = tuple[int, int, int]
_random: Final = random.Random()


_CODES: Final = {2: "h", 4: "i", 8: "q"}  # an intset's width -> its array code (C short,
# int and long long: 2, 4 and 8 bytes on the platforms CPython builds for)
_U32: Final = struct.Struct("<I")
INT_AT: Final = 5  # an intset's integers start after its header (Rule 1)
RUN_AT: Final = 9  # a packed run's members start after its header and count
_STAMP_MAX: Final = 0xFFFFFFFF
_LITTLE: Final = sys.byteorder == "little"  # the intsets' integers are native (array)
EMPTY: Final = b"\x02\x00\x00\x00\x00"  # an empty intset of width 2, never accessed


def _width(n: int) -> int:
    """The narrowest intset width that holds `n` (Redis's _intsetValueEncoding)."""
    if -0x8000 <= n <= 0x7FFF:
        return 2
    return 4 if -0x80000000 <= n <= 0x7FFFFFFF else 8


def _ints(run: bytes, width: int) -> memoryview[int]:
    view = memoryview(run)[INT_AT:]
    return view.cast("h") if width == 2 else view.cast("i") if width == 4 else view.cast("q")


def _int_at(run: bytes, at: int, width: int) -> int:
    """The intset integer at byte `at` of `run`, read byte by byte (native code under mypyc:
    no memoryview to make for a look-up)."""
    v = 0
    if _LITTLE:
        for k in range(at + width - 1, at - 1, -1):
            v = (v << 8) | run[k]
    else:
        for k in range(at, at + width):
            v = (v << 8) | run[k]
    return v - (1 << (8 * width)) if v >> (8 * width - 1) else v


def _int_index(run: bytes, width: int, member: bytes) -> int:
    """The position of `member` in an intset's run (a binary search), -1 if absent."""
    n = parse_i64(member)
    if n is None:
        return -1
    lo, hi = 0, (len(run) - INT_AT) // width
    while lo < hi:
        mid = (lo + hi) >> 1
        v = _int_at(run, INT_AT + mid * width, width)
        if v == n:
            return mid
        if v < n:
            lo = mid + 1
        else:
            hi = mid
    return -1


def _u32_at(data: bytes | Table, at: int) -> int:
    """A run's header field at `at`: its access stamp (1) or a packed run's count (Rule 1),
    little-endian."""
    assert type(data) is bytes
    return data[at] | data[at + 1] << 8 | data[at + 2] << 16 | data[at + 3] << 24


def _stamp(data: bytes) -> bytes:
    """A run's access stamp, as its header's bytes 1-4 (Rule 1)."""
    return data[1:INT_AT]


def _stamp_of(second: int) -> bytes:
    """An access stamp as a run's header bytes 1-4: whole seconds in [0, 2^32 - 1], little-endian."""
    return min(max(second, 0), _STAMP_MAX).to_bytes(4, "little")


def _packed_head(stamp: bytes, count: int) -> bytes:
    return b"\x00" + stamp + _U32.pack(count)


@mypyc_attr(acyclic=True)  # data only, never in a cycle: outside the cyclic GC (docs/decisions.md)
class SetValue:
    __slots__ = ("data",)
    KIND: Final = "set"

    def __init__(self) -> None:
        self.data: bytes | Table = EMPTY  # Rule 1

    # ---- reads -----------------------------------------------------------------------------

    @property
    def table(self) -> Table | None:
        data = self.data
        return data if type(data) is Table else None

    @property
    def encoding(self) -> str:
        data = self.data
        return INTSET if type(data) is bytes and data[0] else HASHTABLE

    @property
    def intset(self) -> bool:
        data = self.data
        return type(data) is bytes and data[0] != 0

    @property
    def nbytes(self) -> int:
        data = self.data
        if type(data) is Table:
            return data.nbytes
        assert type(data) is bytes
        return len(data) - (INT_AT if data[0] else RUN_AT)

    @property
    def second(self) -> int:
        """The last access, in whole seconds (OBJECT IDLETIME; 0: none since loaded)."""
        data = self.data
        return data.second if type(data) is Table else _u32_at(data, 1)

    @second.setter
    def second(self, second: int) -> None:
        data = self.data
        if type(data) is Table:
            data.second = second
            return
        assert type(data) is bytes
        second = min(max(second, 0), _STAMP_MAX)
        if _u32_at(data, 1) != second:  # Rule 4: a new second replaces the run (compared as
            self.data = data[:1] + _stamp_of(second) + data[INT_AT:]  # an int: no bytes made)

    def __len__(self) -> int:
        data = self.data
        if type(data) is Table:
            return len(data)
        assert type(data) is bytes
        width = data[0]
        return (len(data) - INT_AT) // width if width else _u32_at(data, INT_AT)

    def __contains__(self, member: bytes) -> bool:
        data = self.data
        if type(data) is Table:
            return member in data
        assert type(data) is bytes
        width = data[0]
        if width:
            return _int_index(data, width, member) >= 0
        return self._find(member) >= 0

    def __iter__(self) -> Iterator[bytes]:
        data = self.data
        if type(data) is Table:
            return iter(data)
        assert type(data) is bytes
        width = data[0]
        if width:
            return (str(n).encode() for n in _ints(data, width).tolist())
        return packed.values(data, RUN_AT)

    def members(self) -> list[bytes]:
        return list(self)

    def _find(self, member: bytes) -> int:
        """The offset of `member` in the packed run, -1 if absent: its packed bytes searched
        for at C speed (absent there: not a member), a hit accepted once a walk of the run
        lands on it (a match may straddle elements)."""
        run = self.data
        assert type(run) is bytes
        needle = packed.encode(member)
        at = run.find(needle, RUN_AT)
        pos = RUN_AT
        while at >= 0:
            while pos < at:
                pos = packed.skip(run, pos)
            if pos == at:
                return at
            at = run.find(needle, at + 1)
        return -1

    # ---- changes (Rule 2) -----------------------------------------------------------------

    def add_many(self, members: Iterable[bytes], limits: Limits = DEFAULT_LIMITS,
                 second: int = -1, fresh: bool = False) -> int:
        """Add each member (Rule 2); how many were new. `second` >= 0: the access stamp the
        new run carries (an access and a write in one rebuild: runs.sadd); `fresh`: the caller
        knows every member is new and appears once (no membership test here)."""
        data = self.data
        if type(data) is Table:
            if second >= 0:
                data.second = second
            before = len(data)
            pool, gone = data.pool, data.gone
            for m in members:
                if m not in data:
                    data.add(m)
                    data.nbytes += len(m)
                    if data.index is not None:
                        data.index.add(m)
                    if pool is not None:  # Rule 5: one entry per member
                        if m in gone:
                            gone.discard(m)
                        else:
                            pool.append(m)
            return len(data) - before
        assert type(data) is bytes
        new = list(members) if fresh else [m for m in dict.fromkeys(members) if m not in self]
        if not new:
            return 0
        max_ints, max_entries, max_value = limits
        total = len(self) + len(new)
        width = data[0]
        stamp = _stamp(data) if second < 0 else _stamp_of(second)
        if width:
            parsed = [parse_i64(m) for m in new]
            ints = [n for n in parsed if n is not None]
            if total <= max_ints and len(ints) == len(parsed):
                wide = width
                for n in ints:
                    wide = max(wide, _width(n))
                merged = sorted(chain(_ints(data, width).tolist(), ints))
                self.data = bytes((wide,)) + stamp + array(_CODES[wide], merged).tobytes()
                return len(new)
        if total <= max_entries and all(len(m) <= max_value for m in new) and \
                (not width or all(len(m) <= max_value for m in self)):
            if width:
                self.data = _packed_head(stamp, total) + packed.encode_many(chain(self, new))
            else:
                self.data = _packed_head(stamp, total) + data[RUN_AT:] + \
                    packed.encode_many(new)
            return len(new)
        table = Table(chain(self, new))
        table.second = _u32_at(data, 1) if second < 0 else second
        self.data = table
        return len(new)

    def add(self, member: bytes, limits: Limits = DEFAULT_LIMITS) -> bool:
        return self.add_many((member,), limits) == 1

    def remove(self, member: bytes) -> bool:
        data = self.data
        if type(data) is Table:
            if member not in data:
                return False
            data.remove(member)
            data.nbytes -= len(member)
            if data.index is not None:
                data.index.remove(member)
            if data.pool is not None:
                data.gone.add(member)  # its entry is stale (Rule 5)
            return True
        assert type(data) is bytes
        width = data[0]
        if width:
            i = _int_index(data, width, member)
            if i < 0:
                return False
            at = INT_AT + width * i
            self.data = data[:at] + data[at + width:]
            return True
        pos = self._find(member)
        if pos < 0:
            return False
        self.data = _packed_head(_stamp(data), len(self) - 1) + data[RUN_AT:pos] + \
            data[packed.skip(data, pos):]
        return True

    def remove_many(self, members: Iterable[bytes]) -> int:
        return sum(1 for m in members if self.remove(m))

    # ---- random members (Rule 5) ----------------------------------------------------------

    def _pool(self, table: Table) -> list[bytes]:
        pool = table.pool
        if pool is None or len(pool) > 2 * len(table) + 16:
            pool = table.pool = list(table)
            table.gone = set()
        return pool

    def pick(self) -> bytes:
        """One member, uniformly at random (the set is not empty)."""
        data = self.data
        if type(data) is Table:
            pool = self._pool(data)
            while True:
                m = pool[_random.randrange(len(pool))]
                if m in data:
                    return m
        return _random.choice(self.members())

    def picks(self, count: int) -> list[bytes]:
        """`count` members drawn independently (repeats allowed: a negative SRANDMEMBER)."""
        if type(self.data) is Table:
            return [self.pick() for _ in range(count)]
        return _random.choices(self.members(), k=count)

    def sample(self, count: int) -> list[bytes]:
        """`count` distinct members (count < len(self)), uniformly at random."""
        data = self.data
        if type(data) is Table and count * 4 < len(data):
            out: dict[bytes, None] = {}
            while len(out) < count:
                out[self.pick()] = None
            return list(out)
        return _random.sample(self.members(), count)

    # ---- SSCAN ---------------------------------------------------------------------------

    def scan_index(self) -> SortedKeyList:
        """The members of a Table in SCAN order, built on first use and kept in step after."""
        table = self.data
        assert type(table) is Table
        index = table.index
        if index is None:
            index = table.index = SortedKeyList(table, key=field_hash)
        return index

    def copy(self) -> SetValue:
        """A copy that later changes of this set leave alone (the checkpoint's image, never
        changed itself). A Table's copy keeps its source's order (Rule 6)."""
        out = SetValue()
        data = self.data
        if type(data) is Table:
            table = Table(data)
            table.order = tuple(data)
            table.second = data.second
            out.data = table
        else:
            out.data = data  # runs are immutable bytes
        return out

    def iter_from(self, start: int) -> Iterator[bytes]:
        """The members from the `start`-th on, in the set's order (the checkpoint writes a
        big set in pieces, resuming on a copy: Rule 6)."""
        data = self.data
        if type(data) is Table and data.order is not None:
            return islice(data.order, start, None)
        return islice(iter(self), start, None)

    @classmethod
    def of(cls, members: Iterable[bytes], limits: Limits = DEFAULT_LIMITS) -> SetValue:
        sv = cls()
        sv.add_many(members, limits)
        return sv


def limits_of(value: SetValue) -> Limits:
    """The limits a whole copy of `value` is made with (COPY, RENAME, the checkpoint): the
    copy keeps the encoding, as Redis's COPY and RENAME do (as colls.hash_limits)."""
    cap = (1 << 31) - 1
    if value.intset:
        return (cap, cap, cap)
    if value.table is not None:
        return (0, 0, 0)
    return (0, cap, cap)
