"""Packed runs of byte strings (Redis's listpack idea, in one bytearray): the compact form of
the keyspace's collections (lists, small hashes). Sans-IO, typed for the compiled build.

Layout of one element: a length prefix, the bytes, then a back-length (so that a run can be
walked from either end without an index):

    prefix  n < 0x80: one byte n;  else 0x80 then n as 4 bytes little-endian
    back    t = prefix + n bytes: t < 0x80: one byte t;  else t as 4 bytes LE, then 0x80

Rule 1: an element costs 2 bytes beside its own bytes while it is under 127 bytes (Redis's
listpack: 2 as well), 10 beyond.
Rule 2: every function takes and returns offsets at element boundaries; `first`/`last`
return the element and the boundary past it (toward the run's middle); walking is O(elements
walked), never a decode of the whole run.
Rule 3: the functions never keep a reference to a run: the caller owns the bytearray.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Final

SMALL: Final = 0x80
BIG: Final = 0x80
_BYTE: Final = [bytes((i,)) for i in range(256)]  # one byte as bytes, without a tuple per call


def encode(value: bytes) -> bytes:
    """One element as its packed bytes (Rule 1)."""
    n = len(value)
    if n < SMALL:
        total = n + 1
        if total < SMALL:
            return _BYTE[n] + value + _BYTE[total]
        return _BYTE[n] + value + total.to_bytes(4, "little") + b"\x80"
    total = n + 5
    return b"\x80" + n.to_bytes(4, "little") + value + total.to_bytes(4, "little") + b"\x80"


def encode_many(values: Iterable[bytes]) -> bytes:
    return b"".join([encode(v) for v in values])


def size(value: bytes) -> int:
    """The packed size of one element."""
    n = len(value)
    if n < SMALL:
        return n + 2 if n + 1 < SMALL else n + 6
    return n + 10


def read(run: bytes | bytearray, pos: int) -> tuple[bytes, int]:
    """The element starting at `pos` and the offset of the next one."""
    n = run[pos]
    if n < SMALL:
        start = pos + 1
    else:
        n = int.from_bytes(run[pos + 1:pos + 5], "little")
        start = pos + 5
    end = start + n
    return bytes(run[start:end]), end + (1 if n + (start - pos) < SMALL else 5)


def read_back(run: bytes | bytearray, end: int) -> tuple[bytes, int]:
    """The element ending at `end` (exclusive) and the offset where it starts."""
    t = run[end - 1]
    if t < SMALL:
        back = 1
    else:
        t = int.from_bytes(run[end - 5:end - 1], "little")
        back = 5
    start = end - back - t
    n = run[start]
    if n < SMALL:
        return bytes(run[start + 1:start + 1 + n]), start
    n = int.from_bytes(run[start + 1:start + 5], "little")
    return bytes(run[start + 5:start + 5 + n]), start


def skip(run: bytes | bytearray, pos: int) -> int:
    """The offset of the element after the one at `pos`."""
    n = run[pos]
    if n < SMALL:
        return pos + n + (2 if n + 1 < SMALL else 6)
    n = int.from_bytes(run[pos + 1:pos + 5], "little")
    return pos + n + 10


def skip_back(run: bytes | bytearray, end: int) -> int:
    """The offset where the element ending at `end` starts."""
    t = run[end - 1]
    if t < SMALL:
        return end - 1 - t
    return end - 5 - int.from_bytes(run[end - 5:end - 1], "little")


def values(run: bytes | bytearray, pos: int = 0, end: int = -1) -> Iterator[bytes]:
    """The elements from `pos` to `end` (-1: the run's end), in order."""
    stop = len(run) if end < 0 else end
    while pos < stop:
        v, pos = read(run, pos)
        yield v


def values_back(run: bytes | bytearray, end: int = -1, pos: int = 0) -> Iterator[bytes]:
    """The elements from `end` (-1: the run's end) back to `pos`, last first."""
    at = len(run) if end < 0 else end
    while at > pos:
        v, at = read_back(run, at)
        yield v


def offset(run: bytes | bytearray, count: int, index: int) -> int:
    """The offset of element `index` (0-based, 0 <= index <= count) of a run of `count`
    elements, walked from the nearer end (Rule 2)."""
    if index <= count - index:
        pos = 0
        for _ in range(index):
            pos = skip(run, pos)
        return pos
    pos = len(run)
    for _ in range(count - index):
        pos = skip_back(run, pos)
    return pos
