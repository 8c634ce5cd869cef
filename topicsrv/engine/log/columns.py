"""Column types of a segment: read-only sequences that answer what the read paths ask of a list
or array, in less memory.

Rule 1: `Packed` holds the blobs of a sealed segment in ONE bytes buffer plus an offsets
array: slot k is `buf[offs[k]:offs[k + 1] - len(sep)]`, an empty span being a slot without a
payload (reads as None). `sep` is b"," after every JSON blob (a run of JSON records is then one
comma-joined slice, the HTTP diff's separator) and b"" for entries (a run is one slice, the
RESP array body). So a run of live slots is read as ONE slice, never a join.
Rule 2: a dead slot's bytes stay in the buffer until the owner repacks (`dead` counts them);
its reader must look at the slot's flag first, as for any segment.
Rule 3: `Deltas` is a non-decreasing ts column as a base plus the narrowest unsigned array that
holds the deltas; `narrow` picks that typecode; `Const` is a column of one repeated value.
Rule 4: every type here is immutable once built (no appends): a sealed segment is replaced
column by column, so a reader on another thread sees either the old or the new column, both
right.
Rule 5: `Tails` holds the entry blobs of a bare segment without their `*2 $L <ts>-<seq>` ID
prefix (31 of a 100-byte record's 150 bytes), which the ts column and the slot's seq rebuild
byte for byte; `strip` makes one from a `Packed`, reading it back gives the same blobs.
"""

from __future__ import annotations

import sys
from array import array
from collections.abc import Iterable, Sequence
from itertools import accumulate, repeat
from operator import add
from typing import Any

from topicsrv.engine.log.entries import cut_tails, rebuild, with_id

_CODES = (("B", 1 << 8), ("H", 1 << 16), ("I", 1 << 32), ("Q", 1 << 64))


def narrow(values: Sequence[int], top: int) -> array[int]:
    """`values` (all in [0, top]) in the narrowest unsigned array that holds `top`."""
    for code, limit in _CODES:
        if top < limit:
            return array(code, values)
    raise OverflowError(top)


def _span(n: int, i: int, j: int | None) -> tuple[int, int]:
    """Normalise [i, j) like the bytes methods do."""
    lo, hi, _ = slice(i, j).indices(n)
    return lo, max(lo, hi)


class Const:
    """A read-only sequence of `n` copies of one value (a Run's ts, sizes, blobs and flags; a
    sealed segment's sizes when all are equal), answering the bytearray searches the read
    paths use in O(1)."""

    __slots__ = ("value", "n")

    def __init__(self, value: Any, n: int) -> None:
        self.value = value
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self.value] * len(range(*i.indices(self.n)))
        if not -self.n <= i < self.n:
            raise IndexError(i)
        return self.value

    def __iter__(self) -> Any:
        return iter([self.value] * self.n)

    def count(self, x: Any, i: int = 0, j: int | None = None) -> int:
        lo, hi = _span(self.n, i, j)
        return hi - lo if x == self.value else 0

    def find(self, x: Any, i: int = 0, j: int | None = None) -> int:
        lo, hi = _span(self.n, i, j)
        return lo if x == self.value and lo < hi else -1

    def rfind(self, x: Any, i: int = 0, j: int | None = None) -> int:
        lo, hi = _span(self.n, i, j)
        return hi - 1 if x == self.value and lo < hi else -1

    def total(self, i: int, j: int) -> int:
        """sum(self[i:j]) without building the slice."""
        lo, hi = _span(self.n, i, j)
        return (hi - lo) * self.value


class Deltas:
    """A ts column: `base + d[k]` (Rule 3)."""

    __slots__ = ("base", "d")

    def __init__(self, values: array[int]) -> None:
        low = _low_bytes(values) if values.typecode == "Q" and sys.byteorder == "little" else None
        if low is not None:
            self.base, self.d = low
            return
        base = min(values, default=0)
        self.base = base
        self.d = narrow(list(map(base.__rsub__, values)), max(values, default=0) - base)

    def __len__(self) -> int:
        return len(self.d)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return list(map(self.base.__add__, self.d[i]))
        return self.base + self.d[i]

    def __iter__(self) -> Any:
        return map(self.base.__add__, self.d)


def _low_bytes(values: array[int]) -> tuple[int, array[int]] | None:
    """(base, low bytes) of little-endian u64s that differ only in their 1, 2 or 4 lowest
    bytes: whole byte columns compared and copied by slicing, no per-value Python work
    (a seal runs this on 4096 values, on the write path)."""
    n = len(values)
    if not n:
        return None
    raw = values.tobytes()
    top = 0  # how many low bytes differ
    for k in range(7, -1, -1):
        col = raw[k::8]
        if col.count(col[0]) != n:
            top = k + 1
            break
    width = 1 if top <= 1 else 2 if top == 2 else 4 if top <= 4 else 0
    if not width:
        return None
    low = bytearray(width * n)
    for k in range(width):
        low[k::width] = raw[k::8]
    shift = 8 * width
    return values[0] >> shift << shift, array("BHxI"[width - 1], bytes(low))


class Packed:
    """The blobs of a sealed segment (Rule 1). Build one with `pack`."""

    __slots__ = ("buf", "offs", "sep", "dead")

    def __init__(self, buf: bytes, offs: array[int], sep: bytes) -> None:
        self.buf = buf
        self.offs = offs
        self.sep = sep
        self.dead = 0  # bytes of dead slots still in buf (Rule 2)

    def __len__(self) -> int:
        return len(self.offs) - 1

    def __getitem__(self, i: Any) -> Any:
        offs = self.offs
        if isinstance(i, slice):
            lo, hi, step = i.indices(len(offs) - 1)
            if step != 1:
                return [self[k] for k in range(lo, hi, step)]
            if hi <= lo:
                return []
            buf, s = self.buf, len(self.sep)
            edges = offs[lo:hi + 1]
            return [buf[a:b - s] if b > a else None for a, b in zip(edges, edges[1:], strict=False)]
        if i < 0:
            i += len(offs) - 1
        a = offs[i]
        b = offs[i + 1]
        if b == a:
            return None
        return self.buf[a:b - len(self.sep)]

    def __iter__(self) -> Any:
        return iter(self[:])

    def size(self, i: int) -> int:
        """Bytes slot i holds in the buffer (its blob and separator)."""
        return self.offs[i + 1] - self.offs[i]

    def joined(self, i: int, j: int) -> bytes:
        """Slots [i, j), all holding a blob, as one slice: back to back, or comma-joined."""
        return self.buf[self.offs[i]:self.offs[j] - len(self.sep)]

    def fit(self, i: int, j: int, room: int) -> tuple[int, int]:
        """(k, bytes): the longest run of slots [i, i + k) within [i, j) whose blobs total at
        most `room` bytes, and that total (a binary search over the offsets)."""
        offs, s = self.offs, len(self.sep)
        first = offs[i]
        total = offs[j] - first - s * (j - i)
        if total <= room:
            return j - i, total
        lo, hi = 0, j - i  # cum(lo) <= room < cum(hi)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if offs[i + mid] - first - s * mid <= room:
                lo = mid
            else:
                hi = mid
        return lo, offs[i + lo] - first - s * lo

    def forget(self, i: int, j: int) -> None:
        """Slots [i, j) died (Rule 2): their bytes count as dead until the next repack."""
        self.dead += self.offs[j] - self.offs[i]

    def wasteful(self) -> bool:
        """True when dead bytes are most of the buffer: time to repack."""
        return self.dead * 2 > len(self.buf)

    def keep(self, runs: list[tuple[int, int]]) -> Packed:
        """A copy holding only the slots of `runs` (sorted, disjoint [a, b) ranges), every
        other slot empty: one slice per run and C-level offset arithmetic, so a repack costs
        O(slots) with a small constant."""
        offs, buf = self.offs, self.buf
        n = len(offs) - 1
        pieces: list[bytes] = []
        new: list[int] = []
        pos = k = 0
        for a, b in runs:
            new.extend(repeat(pos, a - k))
            new.extend(map((pos - offs[a]).__add__, offs[a:b]))
            pieces.append(buf[offs[a]:offs[b]])
            pos += offs[b] - offs[a]
            k = b
        new.extend(repeat(pos, n - k + 1))
        return Packed(b"".join(pieces), narrow(new, pos), self.sep)


def pack(blobs: Sequence[bytes | None], sep: bytes = b"") -> Packed:
    """`blobs` (None: a slot without a payload) in one buffer, each followed by `sep`."""
    s = len(sep)
    lens: Iterable[int]
    if None in blobs:
        live = [b for b in blobs if b is not None]
        lens = [0 if b is None else len(b) + s for b in blobs]
    else:  # C-level iterators only: this runs on the write path, at every seal
        live = blobs  # type: ignore[assignment]
        lens = map(len, live)
        if s:
            lens = map(add, lens, repeat(s))
    # one allocation: `sep.join(live) + sep` would copy the whole buffer a second time
    buf = sep.join([*live, b""]) if s and live else b"".join(live)
    return Packed(buf, narrow(list(accumulate(lens, initial=0)), len(buf)), sep)


class Tails:
    """The entry blobs of a bare sealed segment without their ID prefix (Rule 5): slot k is
    `with_id(ts[k], base + k, buf[offs[k]:offs[k + 1]])`, rebuilt when read (~0.5 us a
    record in pure Python, which is why only segments nobody reads are kept this way)."""

    __slots__ = ("buf", "offs", "dead", "base", "ts", "width")
    sep = b""

    def __init__(self, buf: bytes, offs: array[int], base: int, ts: Deltas, width: int) -> None:
        self.buf = buf
        self.offs = offs
        self.dead = 0
        self.base = base
        self.ts = ts
        self.width = width  # the length of every ID, 0 when they differ

    def __len__(self) -> int:
        return len(self.offs) - 1

    def __getitem__(self, i: Any) -> Any:
        n = len(self.offs) - 1
        if isinstance(i, slice):
            lo, hi, step = i.indices(n)
            if step != 1:
                return [self[k] for k in range(lo, hi, step)]
            if hi <= lo:
                return []
            edges = self.offs[lo:hi + 1]
            return rebuild(self.ts[lo:hi], range(self.base + lo, self.base + hi), edges[:-1],
                           edges[1:], self.buf, self.width)
        if i < 0:
            i += n
        a, b = self.offs[i], self.offs[i + 1]
        return rebuild((self.ts[i],), (self.base + i,), (a,), (b,), self.buf, self.width)[0]

    def __iter__(self) -> Any:
        return iter(self[:])

    def tails(self, i: int, j: int) -> list[bytes]:
        """The stored pairs arrays of slots [i, j) as they are (a router's copies)."""
        edges, buf = self.offs[i:j + 1], self.buf
        return [buf[a:b] for a, b in zip(edges, edges[1:], strict=False)]

    def forget(self, i: int, j: int) -> None:
        self.dead += self.offs[j] - self.offs[i]

    def wasteful(self) -> bool:
        return self.dead * 2 > len(self.buf)

    def keep(self, runs: list[tuple[int, int]]) -> Tails:
        kept = Packed(self.buf, self.offs, b"").keep(runs)
        return Tails(kept.buf, kept.offs, self.base, self.ts, self.width)


def strip(packed: Packed, live: bytes | bytearray, base: int, ts: Deltas) -> Tails:
    """The entries of `packed` without their ID prefix; a slot whose `live` byte is 0 keeps
    nothing. Every ID here has as many digits (the common case: a segment whose seqs and ts
    do not cross a power of ten) gives one prefix length for all: a slice a record."""
    offs, buf = packed.offs, packed.buf
    n = len(offs) - 1
    top = ts.base + max(ts.d, default=0)
    width = 0
    p = -1
    if len(str(ts.base)) == len(str(top)) and len(str(base)) == len(str(base + n - 1)):
        width = len(str(ts.base)) + 1 + len(str(base))
        p = len(with_id(ts.base, base, b""))
    tails = cut_tails(buf, list(offs), bytes(live), p)
    out = b"".join(tails)
    return Tails(out, narrow(list(accumulate(map(len, tails), initial=0)), len(out)), base, ts, width)
