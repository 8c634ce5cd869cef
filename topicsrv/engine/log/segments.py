"""Segments: the resident store of a topic, a few thousand records each.

Rule 1: no per-record Python object besides the record's one bytes blob (and none at all
once sealed, Rule 5): ts, size and flags live in packed arrays, seqs are implicit
(`base + index`).
Rule 2: a segment covers an aligned seq range [k*SEGMENT_RECORDS, (k+1)*SEGMENT_RECORDS); only
the first segment of a topic may start inside its range. So the segment of a seq is found by
arithmetic, never by search.
Rule 3: flags per slot: LIVE, DELETED (voluntary, silent) or LOST (involuntary loss in the
middle of the log, e.g. an acked tail lost in a crash; crossing it is a tombstone). TRIMMED
reads like LOST (a router's dest: source records evicted before they were forwarded; the
tombstone's reason is `source_trim`). LOST and TRIMMED are the GAP_FLAGS.
Rule 4: a `Run` stands for any number of seqs that hold no record and share one flag (a gap
recovery skips: seqs reserved by a HeadWatermark, or a jump after WAL damage). It costs O(1)
memory whatever its length, so memory is O(records), never O(seq range). A run is always
"full" (nothing is appended to it); the segment after it starts where it ends, so that
segment (like a topic's first) may start inside its aligned range, and `Topic.locate` falls
back to a binary search when runs break the arithmetic.
Rule 5: a full segment is sealed (`seal`, called when the next one starts): its blobs become
one `Packed` buffer (one slice per run of live slots, engine/log/columns.py), its ts a `Deltas`
column, its sizes the narrowest array (a `Const` when all are equal); flags, nodes, tags and
xids stay as they are. Only the tail segment takes appends, so XADD never touches a sealed one.
Rule 6: killing slots of a sealed segment only flips flags; their bytes are freed by a repack
once dead bytes are most of its buffer (or at once when nothing live is left), so a delete
costs O(slots killed) amortised, never O(segment) each. `blobs[k]` of a slot that is not LIVE
is None or stale bytes: read the flag first (every reader does).
Rule 7: a sealed segment of entries (XADD records) may be bare: `to_bare` strips the ID
prefix of its blobs (`Tails`, rebuilt on read), `to_whole` puts them back. Reading a bare
segment is right but slow (~0.5 us a record), so readers make it whole first and `Topic`
decides which segments are bare (topic.py Rule 8). A segment made whole keeps its bare blobs
(`spare`, its dead bytes counted as the whole ones are), so going bare again costs nothing.
Only a segment whose stored IDs are its `(ts, seq)` column values (`ids_exact`) is ever
stripped: a rebuilt blob is the stored one, byte for byte.
"""

from __future__ import annotations

from array import array

from topicsrv.engine.log.columns import Const, Deltas, Packed, Tails, narrow, pack, strip
from topicsrv.engine.log.entries import tail_start, with_id
from topicsrv.engine.log.records import KIND_FIELDS, KIND_JSON

SEGMENT_RECORDS = 4096

LIVE = 0
DELETED = 1
LOST = 2
EVICTED = 3  # below the topic's front: cap/TTL took it (never read again)
TRIMMED = 4  # a router's dest: seqs standing for source records evicted unforwarded
GAP_FLAGS = (LOST, TRIMMED)  # flags a reader crossing them is told about (a tombstone)
_DEAD = bytes([0] + [1] * 255)  # flags.translate(_DEAD): 0 where LIVE, 1 elsewhere
_LIVE = bytes([1] + [0] * 255)  # and the other way round

MIXED = 1  # Segment.kinds when JSON and field/value records share a segment


class Segment:
    __slots__ = ("base", "end", "ts", "blobs", "sizes", "flags", "nodes", "tags", "live", "live_bytes", "kinds",
                 "xids", "ids_exact", "spare")

    def __init__(self, base: int) -> None:
        self.base = base
        self.end = (base // SEGMENT_RECORDS + 1) * SEGMENT_RECORDS
        # Lists and arrays while the segment takes appends; packed columns once sealed (Rule 5).
        self.ts: array[int] | Deltas = array("Q")
        self.blobs: list[bytes | None] | Packed | Tails = []
        self.sizes: array[int] | Const = array("I")
        self.flags = bytearray()
        # Allocated on the first record that has a node / tag: most segments never pay.
        self.nodes: list[str | None] | None = None
        self.tags: list[str | None] | None = None
        self.live = 0
        self.live_bytes = 0
        # The record form(s) stored here: the blob kind byte when uniform, MIXED otherwise.
        self.kinds = 0
        # Client-chosen IDs: ms, n per slot, only in an ID-mapped topic (engine/log/xids.py).
        self.xids: array[int] | None = None
        # False once a blob was stored whose ID is not `(ts column, seq)` (Rule 7).
        self.ids_exact = True
        # The bare blobs of a segment made whole, kept so going bare again costs nothing.
        self.spare: Tails | None = None

    @property
    def next_seq(self) -> int:
        return self.base + len(self.blobs)

    @property
    def full(self) -> bool:
        return self.base + len(self.blobs) >= self.end

    @property
    def sealed(self) -> bool:
        return not isinstance(self.blobs, list)

    @property
    def bare(self) -> bool:
        return isinstance(self.blobs, Tails)

    def append(self, blob: bytes, ts: int, size: int, node: str | None, tag: str | None) -> None:
        n = len(self.blobs)
        kind = blob[0]
        if kind != self.kinds:
            self.kinds = kind if not n else MIXED
        self.blobs.append(blob)  # type: ignore[union-attr]  # only the tail takes appends (Rule 5)
        self.ts.append(ts)  # type: ignore[union-attr]
        self.sizes.append(size)  # type: ignore[union-attr]
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

    def extend(self, blobs: list[bytes], ts: int, sizes: list[int], total: int, kind: int,
               nodes: list[str | None] | None, tags: list[str | None] | None) -> None:
        """`append` of several records at once (the XADD path: one call per segment a write
        touches, not one per record). `kind` is the blobs' kind byte, MIXED when they differ;
        `nodes`/`tags` are None when no record has one."""
        n = len(self.blobs)
        k = len(blobs)
        if not n:
            self.kinds = kind
        elif kind != self.kinds:
            self.kinds = MIXED
        if k == 1:  # one record (every P1 XADD): no temporary array or bytes
            self.blobs.append(blobs[0])  # type: ignore[union-attr]  # only the tail (Rule 5)
            self.ts.append(ts)  # type: ignore[union-attr]
            self.sizes.append(sizes[0])  # type: ignore[union-attr]
            self.flags.append(LIVE)
        else:
            self.blobs.extend(blobs)  # type: ignore[union-attr]  # only the tail takes appends (Rule 5)
            self.ts.extend(array("Q", [ts]) * k)  # type: ignore[union-attr]
            self.sizes.extend(sizes)  # type: ignore[union-attr]
            self.flags.extend(bytes(k))  # LIVE == 0
        if nodes is not None or self.nodes is not None:
            self.nodes = _extend_labels(self.nodes, nodes, n, k)
        if tags is not None or self.tags is not None:
            self.tags = _extend_labels(self.tags, tags, n, k)
        self.live += k
        self.live_bytes += total

    def append_lost(self, count: int, ts: int) -> None:
        """Slots for seqs that were assigned and then lost (recovery of a crashed tail)."""
        self.blobs.extend([None] * count)  # type: ignore[union-attr]
        self.ts.extend([ts] * count)  # type: ignore[union-attr]
        self.sizes.extend([0] * count)  # type: ignore[union-attr]
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
            sizes = self.sizes
            return j - i, sizes.total(i, j) if isinstance(sizes, Const) else sum(sizes[i:j])
        n = b = 0
        flags, sizes = self.flags, self.sizes
        for k in range(i, j):
            if flags[k] == LIVE:
                n += 1
                b += sizes[k]
        return n, b

    def kill(self, i: int, j: int, flag: int) -> tuple[int, int]:
        """Mark LIVE slots of [i, j) with `flag`, free their payloads (Rule 6); returns what
        was live."""
        n, b = self.live_in(i, j)
        blobs, spare = self.blobs, self.spare
        if n == j - i:
            self.flags[i:j] = bytes([flag]) * (j - i)
            if not isinstance(blobs, list):
                blobs.forget(i, j)
                if spare is not None:
                    spare.forget(i, j)
            else:
                blobs[i:j] = [None] * (j - i)
        elif n:
            flags = self.flags
            for k in range(i, j):
                if flags[k] == LIVE:
                    flags[k] = flag
                    if not isinstance(blobs, list):
                        blobs.forget(k, k + 1)
                        if spare is not None:
                            spare.forget(k, k + 1)
                    else:
                        blobs[k] = None
        self.live -= n
        self.live_bytes -= b
        if n and not isinstance(blobs, list) and (not self.live or blobs.wasteful()):
            self.repack()
        return n, b

    def seal(self) -> None:
        """Pack the columns of this full segment (Rule 5); a no-op once sealed."""
        blobs = self.blobs
        if not isinstance(blobs, list):
            return
        ts, sizes = self.ts, self.sizes
        assert isinstance(ts, array) and isinstance(sizes, array)
        n = len(blobs)
        self.blobs = pack(blobs, b"," if self.kinds == KIND_JSON else b"")
        self.ts = Deltas(ts)
        if n and sizes.count(sizes[0]) == n:
            self.sizes = Const(sizes[0], n)
        else:
            self.sizes = narrow(sizes, max(sizes, default=0))

    def repack(self) -> None:
        """A sealed segment's buffer without the bytes of its dead slots (Rule 6)."""
        old = self.blobs
        assert not isinstance(old, list)
        dead = self.flags.translate(_DEAD)  # 0 for LIVE, 1 otherwise: each find stops at once
        n = len(dead)
        runs = []
        k = 0
        while k < n:
            a = dead.find(0, k)
            if a < 0:
                break
            b = dead.find(1, a)
            b = n if b < 0 else b
            runs.append((a, b))
            k = b
        self.blobs = old.keep(runs)
        if self.spare is not None:
            self.spare = self.spare.keep(runs)

    def to_bare(self) -> None:
        """Strip the ID prefix of a sealed segment of entries (Rule 7); a no-op for any other."""
        blobs = self.blobs
        if not isinstance(blobs, Packed) or self.kinds != KIND_FIELDS or not self.ids_exact:
            return
        spare = self.spare
        if spare is not None:  # made whole for its readers: the bare blobs are still here
            self.blobs, self.spare = spare, None
            return
        ts = self.ts
        assert isinstance(ts, Deltas)
        live = self.flags.translate(_LIVE)
        for k in (live.find(1), live.rfind(1)):  # a cheap check of ids_exact at both ends
            blob = blobs[k] if k >= 0 else None
            if blob is not None and blob[:tail_start(blob)] != with_id(ts[k], self.base + k, b""):
                self.ids_exact = False
                return
        self.blobs = strip(blobs, live, self.base, ts)

    def to_whole(self) -> None:
        """A bare segment's blobs whole again (Rule 7), its dead slots dropped."""
        blobs = self.blobs
        if not isinstance(blobs, Tails):
            return
        full = blobs[:]
        if self.live != len(full):
            full = [b if f == LIVE else None for b, f in zip(full, self.flags, strict=True)]
        self.blobs, self.spare = pack(full), blobs

    def next_visible(self, i: int) -> int:
        """Index of the first LIVE, LOST or TRIMMED slot at/after i, or len(self) when there
        is none."""
        flags = self.flags
        a = flags.find(LIVE, i)
        if a == i:
            return i
        n = len(self.blobs)
        best = n if a < 0 else a
        for flag in GAP_FLAGS:
            c = flags.find(flag, i, best)
            if c >= 0:
                best = c
        return best

    def lost_end(self, i: int, flag: int = LOST) -> int:
        """Index of the first slot at/after i that is not `flag` (len(self) when none)."""
        flags = self.flags
        n = len(flags)
        while i < n and flags[i] == flag:
            i += 1
        return i

    def has_gap(self) -> bool:
        """True if a slot is LOST or TRIMMED (the segment must not be reclaimed silently)."""
        flags = self.flags
        return any(flags.find(flag) >= 0 for flag in GAP_FLAGS)

    def __len__(self) -> int:
        return len(self.blobs)


def _extend_labels(column: list[str | None] | None, values: list[str | None] | None, n: int,
                   k: int) -> list[str | None] | None:
    """A node/tag column of n slots extended by k (`values`, None when all are None); the
    column stays None until a slot has a value."""
    if values is not None:
        if column is None:
            column = [None] * n
        column.extend(values)
    elif column is not None:
        column.extend([None] * k)
    return column


class Run:
    """Seqs [base, base + n) with no record, all flagged `flag` (DELETED, LOST or EVICTED),
    in O(1) memory (Rule 4). Quacks like a full Segment for every read and delete path."""

    __slots__ = ("base", "end", "flag", "ts", "blobs", "sizes", "flags", "xids")
    nodes = None
    tags = None
    live = 0
    live_bytes = 0
    kinds = 0
    full = True

    def __init__(self, base: int, n: int, flag: int, ts: int) -> None:
        assert n > 0 and flag != LIVE
        self.base = base
        self.end = base + n
        self.flag = flag
        self.ts = Const(ts, n)
        self.blobs = Const(None, n)
        self.sizes = Const(0, n)
        self.flags = Const(flag, n)
        self.xids: tuple[int, int] | None = None  # the ID of all its seqs (engine/log/xids.py Rule 2)

    @property
    def next_seq(self) -> int:
        return self.end

    def __len__(self) -> int:
        return self.end - self.base

    def node(self, i: int) -> str | None:
        return None

    def tag(self, i: int) -> str | None:
        return None

    def live_in(self, i: int, j: int) -> tuple[int, int]:
        return 0, 0

    def kill(self, i: int, j: int, flag: int) -> tuple[int, int]:
        return 0, 0  # nothing live to kill

    def next_visible(self, i: int) -> int:
        n = self.end - self.base
        return i if self.flag in GAP_FLAGS and i < n else n

    def lost_end(self, i: int, flag: int = LOST) -> int:
        return self.end - self.base if self.flag == flag else i

    def has_gap(self) -> bool:
        return self.flag in GAP_FLAGS

    def split(self, i: int, j: int, flag: int) -> list[Run]:
        """This run with its slots [i, j) re-flagged `flag`: one to three runs."""
        n = self.end - self.base
        ts = self.ts.value
        out = []
        if i > 0:
            out.append(Run(self.base, i, self.flag, ts))
        out.append(Run(self.base + i, j - i, flag, ts))
        if j < n:
            out.append(Run(self.base + j, n - j, self.flag, ts))
        for run in out:
            run.xids = self.xids
        return out


AnySegment = Segment | Run
