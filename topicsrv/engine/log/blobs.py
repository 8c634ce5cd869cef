"""The records a read returns: one blob per record, built from runs of packed slots without
cutting them apart.

Rule 1: `Blobs` is a Sequence[bytes] with one blob per record, in seq order: it has the length,
items, iteration and equality of the list it stands for, so any consumer may treat it as one.
Rule 2: a run of live slots of a sealed segment is held as ONE bytes, its slice of the packed
buffer (engine/log/columns.py Rule 1), whose blobs are joined by `sep` (b"" for entries, b"," for
JSON). So `sep.join(parts)` equals `sep.join(self)`: a front that writes `parts` (`joined`,
`nbytes`) sends a run as it is stored and never splits it.
Rule 3: the blobs of a run are cut apart only when a consumer indexes or iterates, once per
`Blobs`. The `Packed` a run came from is immutable (columns Rule 4), so this stays right
after the segment is repacked or dropped.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import overload

from topicsrv.engine.log.columns import Packed


class Blobs(Sequence[bytes]):
    __slots__ = ("parts", "sep", "n", "runs", "_flat")

    def __init__(self, sep: bytes = b"", parts: list[bytes] | None = None,
                 runs: dict[int, tuple[Packed, int, int]] | None = None, n: int = 0) -> None:
        self.parts: list[bytes] = [] if parts is None else parts
        self.sep = sep
        self.n = n  # records in all: parts that are not runs are one each
        # index in `parts` of each run -> (packed, i, j): its slots, for cutting it apart
        self.runs: dict[int, tuple[Packed, int, int]] = {} if runs is None else runs
        self._flat: list[bytes] | None = None

    def append(self, blob: bytes) -> None:
        self.parts.append(blob)
        self.n += 1
        self._flat = None

    def extend(self, blobs: Sequence[bytes]) -> None:
        if isinstance(blobs, Blobs):
            assert blobs.sep == self.sep
            at = len(self.parts)
            for k, run in blobs.runs.items():
                self.runs[at + k] = run
            self.parts.extend(blobs.parts)
        else:
            self.parts.extend(blobs)
        self.n += len(blobs)
        self._flat = None

    def add_run(self, packed: Packed, i: int, j: int) -> None:
        """Slots [i, j) of `packed`, all live, as one part (Rule 2)."""
        self.runs[len(self.parts)] = (packed, i, j)
        self.parts.append(packed.joined(i, j))
        self.n += j - i
        self._flat = None

    def joined(self) -> bytes:
        """`sep.join(self)`, from the parts."""
        return self.sep.join(self.parts)

    def nbytes(self) -> int:
        """sum(map(len, self)), from the parts."""
        total = sum(map(len, self.parts))
        if self.sep:
            total -= len(self.sep) * sum(j - i - 1 for _, i, j in self.runs.values())
        return total

    def flat(self) -> list[bytes]:
        """One blob per record (Rule 3)."""
        flat = self._flat
        if flat is None:
            if not self.runs:
                flat = list(self.parts)
            else:
                flat = []
                runs = self.runs
                for k, part in enumerate(self.parts):
                    run = runs.get(k)
                    if run is None:
                        flat.append(part)
                    else:
                        packed, i, j = run
                        flat.extend(packed[i:j])
            self._flat = flat
        return flat

    def __len__(self) -> int:
        return self.n

    @overload
    def __getitem__(self, i: int) -> bytes: ...

    @overload
    def __getitem__(self, i: slice) -> list[bytes]: ...

    def __getitem__(self, i: int | slice) -> bytes | list[bytes]:
        return self.flat()[i]

    def __iter__(self) -> Iterator[bytes]:
        return iter(self.flat())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (list, tuple, Blobs)):
            return self.flat() == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Blobs({self.flat()!r})"


def joined(blobs: Sequence[bytes], sep: bytes = b"") -> bytes:
    """`sep.join(blobs)`, a run of a `Blobs` as stored (Rule 2)."""
    if isinstance(blobs, Blobs) and blobs.sep == sep:
        return blobs.joined()
    return sep.join(blobs)


def nbytes(blobs: Sequence[bytes]) -> int:
    """The total length of `blobs`, without cutting runs apart."""
    if isinstance(blobs, Blobs):
        return blobs.nbytes()
    return sum(map(len, blobs))


def pieces(blobs: Sequence[bytes], sep: bytes) -> Sequence[bytes]:
    """Items whose `sep.join` is `sep.join(blobs)`: a Blobs' parts when its runs are joined by
    `sep`, else the blobs."""
    if isinstance(blobs, Blobs) and blobs.sep == sep:
        return blobs.parts
    return blobs
