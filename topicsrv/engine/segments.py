"""Segments: the resident store of a topic, a few thousand records each.

Rule 1: no per-record Python object besides the record's one bytes blob: ts, size and flags
live in packed arrays, seqs are implicit (`base + index`).
Rule 2: a segment covers an aligned seq range [k*SEGMENT_RECORDS, (k+1)*SEGMENT_RECORDS); only
the first segment of a topic may start inside its range. So the segment of a seq is found by
arithmetic, never by search.
Rule 3: flags per slot: LIVE, DELETED (voluntary, silent) or LOST (involuntary loss in the
middle of the log, e.g. an acked tail lost in a crash; crossing it is a tombstone).
"""

from __future__ import annotations

from array import array

SEGMENT_RECORDS = 4096

LIVE = 0
DELETED = 1
LOST = 2
EVICTED = 3  # below the topic's front: cap/TTL took it (never read again)

MIXED = 1  # Segment.kinds when JSON and field/value records share a segment


class Segment:
    __slots__ = ("base", "end", "ts", "blobs", "sizes", "flags", "nodes", "tags", "live", "live_bytes", "kinds")

    def __init__(self, base: int) -> None:
        self.base = base
        self.end = (base // SEGMENT_RECORDS + 1) * SEGMENT_RECORDS
        self.ts = array("Q")
        self.blobs: list[bytes | None] = []
        self.sizes = array("I")
        self.flags = bytearray()
        # Allocated on the first record that has a node / tag: most segments never pay.
        self.nodes: list[str | None] | None = None
        self.tags: list[str | None] | None = None
        self.live = 0
        self.live_bytes = 0
        # The record form(s) stored here: the blob kind byte when uniform, MIXED otherwise.
        self.kinds = 0

    @property
    def next_seq(self) -> int:
        return self.base + len(self.blobs)

    @property
    def full(self) -> bool:
        return self.base + len(self.blobs) >= self.end

    def append(self, blob: bytes, ts: int, size: int, node: str | None, tag: str | None) -> None:
        n = len(self.blobs)
        kind = blob[0]
        if kind != self.kinds:
            self.kinds = kind if not n else MIXED
        self.blobs.append(blob)
        self.ts.append(ts)
        self.sizes.append(size)
        self.flags.append(LIVE)
        if node is not None:
            if self.nodes is None:
                self.nodes = [None] * n
            self.nodes.append(node)
        elif self.nodes is not None:
            self.nodes.append(None)
        if tag is not None:
            if self.tags is None:
                self.tags = [None] * n
            self.tags.append(tag)
        elif self.tags is not None:
            self.tags.append(None)
        self.live += 1
        self.live_bytes += size

    def append_lost(self, count: int, ts: int) -> None:
        """Slots for seqs that were assigned and then lost (recovery of a crashed tail)."""
        self.blobs.extend([None] * count)
        self.ts.extend([ts] * count)
        self.sizes.extend([0] * count)
        self.flags.extend(bytes([LOST]) * count)
        if self.nodes is not None:
            self.nodes.extend([None] * count)
        if self.tags is not None:
            self.tags.extend([None] * count)

    def node(self, i: int) -> str | None:
        return None if self.nodes is None else self.nodes[i]

    def tag(self, i: int) -> str | None:
        return None if self.tags is None else self.tags[i]

    def live_in(self, i: int, j: int) -> tuple[int, int]:
        """(records, bytes) of the LIVE slots in [i, j)."""
        if self.flags.count(LIVE, i, j) == j - i:
            return j - i, sum(self.sizes[i:j])
        n = b = 0
        flags, sizes = self.flags, self.sizes
        for k in range(i, j):
            if flags[k] == LIVE:
                n += 1
                b += sizes[k]
        return n, b

    def kill(self, i: int, j: int, flag: int) -> tuple[int, int]:
        """Mark LIVE slots of [i, j) with `flag`, free their payloads; returns what was live."""
        n, b = self.live_in(i, j)
        if n == j - i:
            self.flags[i:j] = bytes([flag]) * (j - i)
            self.blobs[i:j] = [None] * (j - i)
        elif n:
            flags, blobs = self.flags, self.blobs
            for k in range(i, j):
                if flags[k] == LIVE:
                    flags[k] = flag
                    blobs[k] = None
        self.live -= n
        self.live_bytes -= b
        return n, b

    def next_visible(self, i: int) -> int:
        """Index of the first LIVE or LOST slot at/after i, or len(self) when there is none."""
        flags = self.flags
        a = flags.find(LIVE, i)
        if a == i:
            return i
        c = flags.find(LOST, i)
        if a < 0:
            return len(self.blobs) if c < 0 else c
        return a if c < 0 or a < c else c

    def __len__(self) -> int:
        return len(self.blobs)
