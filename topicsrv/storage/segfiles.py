"""Segment files: `<base>.data` (file header + one frame per slot) and `<base>.idx` offsets.

Rule 1: slot i of a file is seq `base + i`; the .data frame carries the seq too, so a file
can be read back without its .idx (which is then rebuilt).
Rule 2: .data is appended (checkpoints persist the slots that arrived since the last one)
and fdatasynced before the .idx is replaced whole (fsops.py Rule 3); a `SegFile` takes the
new slots only once both are on disk, so a failed append changes nothing in memory.
Rule 3: a sealed record is deleted on disk by flipping its flag byte to 0xD5 in place
(`flip`) and fsyncing; the frame and its checksum are never rewritten.
Rule 4: reading never raises on bad bytes: a damaged frame makes its slot LOST and is
reported; every good frame around it is kept.
"""

from __future__ import annotations

import struct
from array import array
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import xxhash

from topicsrv.engine.log.segments import DELETED, LIVE, LOST, TRIMMED, Segment
from topicsrv.storage import codec, frames
from topicsrv.storage.fsops import OsOps

IDX_MAGIC = b"TIDX"
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")

# seq ts blob size node tag flag xid (the stream ID of an ID-mapped slot, engine/log/xids.py)
Slot = tuple[int, int, bytes | None, int, str | None, str | None, int, tuple[int, int] | None]


@dataclass
class SegFile:
    base: int
    offsets: array = field(default_factory=lambda: array("Q"))
    dead: bytearray = field(default_factory=bytearray)  # 1 = deleted/lost on disk
    size: int = 0
    cold: bool = False

    @property
    def count(self) -> int:
        return len(self.offsets)


def stem(base: int) -> str:
    return f"{base:020d}"


def data_path(d: Path, base: int) -> Path:
    return d / f"{stem(base)}.data"


def idx_path(d: Path, base: int) -> Path:
    return d / f"{stem(base)}.idx"


def encode_idx(base: int, offsets: array) -> bytes:
    body = frames.file_header(IDX_MAGIC, 0, base) + _U32.pack(len(offsets)) + offsets.tobytes()
    return body + _U64.pack(xxhash.xxh3_64_intdigest(body))


def decode_idx(raw: bytes, base: int) -> array | str:
    """The offsets, or why the index is unusable."""
    head = frames.FILE_HEADER_SIZE + 4
    if len(raw) < head + 8:
        return "index too short"
    if xxhash.xxh3_64_intdigest(raw[:-8]) != _U64.unpack_from(raw, len(raw) - 8)[0]:
        return "index checksum mismatch"
    hdr = frames.parse_file_header(raw, IDX_MAGIC)
    if hdr is None or hdr[1] != base:
        return "index header does not match its segment"
    (n,) = _U32.unpack_from(raw, frames.FILE_HEADER_SIZE)
    if head + 8 * n + 8 != len(raw):
        return "index length does not match its count"
    out = array("Q")
    out.frombytes(raw[head:head + 8 * n])
    return out


def slot_frame(seg: Segment, i: int) -> tuple[bytes, int]:
    """(frame, dead) for slot i of an in-memory segment (read from another thread: a slot
    freed concurrently reads as deleted, which the WAL's Delete frame agrees with)."""
    seq = seg.base + i
    ts = int(seg.ts[i])
    flag = seg.flags[i]
    blob = seg.blobs[i]
    if flag == LOST:
        return frames.encode(frames.T_SLOT_LOST, codec.encode_lost(seq, ts)), 1
    if flag == TRIMMED:  # a router dest's `source_trim` gap keeps its reason on disk
        return frames.encode(frames.T_SLOT_TRIMMED, codec.encode_lost(seq, ts)), 1
    xs = seg.xids
    xid = None if xs is None else (xs[2 * i], xs[2 * i + 1])
    if flag == LIVE and blob is not None:
        body = codec.encode_slot(seq, ts, blob, int(seg.sizes[i]), seg.node(i), seg.tag(i), xid)
        return frames.encode(frames.T_REC, body), 0
    body = codec.encode_slot(seq, ts, b"", 0, None, None, xid)
    return frames.encode(frames.T_REC, body, frames.DELETED_FLAG), 1


def append_slots(ops: OsOps, d: Path, sf: SegFile | None, seg: Segment, upto: int) -> SegFile:
    """Persist slots [sf.count, upto) of `seg`: append .data, fdatasync, replace .idx."""
    fresh = sf is None
    if sf is None:
        sf = SegFile(seg.base)
    start = sf.count
    bufs: list[bytes] = []
    pos = sf.size
    if fresh:
        d.mkdir(parents=True, exist_ok=True)
        hdr = frames.file_header(frames.SEG_MAGIC, 0, seg.base)
        bufs.append(hdr)
        pos = len(hdr)
    offsets = array("Q")
    dead = bytearray()
    for i in range(start, upto):
        frame, is_dead = slot_frame(seg, i)
        offsets.append(pos)
        dead.append(is_dead)
        bufs.append(frame)
        pos += len(frame)
    path = data_path(d, seg.base)
    fd = ops.open_append(path)
    try:
        if fresh:
            ops.ftruncate(fd, 0)
        elif sf.size and path.stat().st_size != sf.size:
            ops.ftruncate(fd, sf.size)  # drop a torn tail a failed append left
        ops.writev(fd, bufs)
        ops.fdatasync(fd)
    finally:
        ops.close(fd)
    if fresh:
        ops.fsync_dir(d)
    # the .idx first: when it cannot be written `sf` still says what the last good .idx says,
    # and the next append cuts the .data bytes past sf.size (fsops.py Rule 3)
    ops.write_file(idx_path(d, seg.base), encode_idx(seg.base, sf.offsets + offsets))
    sf.offsets.extend(offsets)
    sf.dead.extend(dead)
    sf.size = pos
    return sf


def flip(ops: OsOps, d: Path, sf: SegFile, indices: list[int]) -> None:
    """Mark slots deleted on disk: one flag byte each, in place, then fdatasync."""
    if not indices:
        return
    fd = ops.open_rw(data_path(d, sf.base))
    try:
        for i in indices:
            ops.pwrite(fd, bytes((frames.DELETED_FLAG,)), sf.offsets[i] + frames.FLAG_OFFSET)
        ops.fdatasync(fd)
    finally:
        ops.close(fd)
    for i in indices:
        sf.dead[i] = 1


def to_flip(seg: Segment, sf: SegFile, limit: int | None = None) -> list[int]:
    """Slots dead in memory but live on disk (at seqs up to `limit`, when given)."""
    flags, dead = seg.flags, sf.dead
    n = min(len(flags), sf.count)
    if limit is not None:
        n = max(0, min(n, limit + 1 - seg.base))
    if flags.count(LIVE, 0, n) == n - sum(dead[:n]):
        return []
    return [i for i in range(n) if flags[i] != LIVE and not dead[i]]


@dataclass
class Loaded:
    base: int
    slots: list[Slot]
    sf: SegFile
    damage: list[str]
    idx_problem: str | None = None
    truncate_at: int | None = None


def _slot(fr: frames.Frame) -> Slot | None:
    try:
        if fr.ftype == frames.T_REC:
            seq, ts, blob, size, node, tag, xid = codec.decode_slot(fr.body)
            if fr.deleted:
                return seq, ts, None, 0, None, None, DELETED, xid
            return seq, ts, blob, size, node, tag, LIVE, xid
        if fr.ftype == frames.T_SLOT_LOST:
            seq, ts = codec.decode_lost(fr.body)
            return seq, ts, None, 0, None, None, LOST, None
        if fr.ftype == frames.T_SLOT_TRIMMED:
            seq, ts = codec.decode_lost(fr.body)
            return seq, ts, None, 0, None, None, TRIMMED, None
    except (struct.error, UnicodeDecodeError):
        return None
    return None


def load(data: Path, idx: Path, base: int) -> Loaded:
    """Read a segment back. Damage is reported, never raised."""
    out = Loaded(base, [], SegFile(base), [])
    raw = data.read_bytes()
    buf = memoryview(raw)
    hdr = frames.parse_file_header(buf, frames.SEG_MAGIC)
    if hdr is None or hdr[1] != base:
        out.damage.append(f"{data.name}: bad file header")
        return out
    offsets: array | None = None
    if idx.exists():
        got = decode_idx(idx.read_bytes(), base)
        if isinstance(got, str):
            out.idx_problem = f"{idx.name}: {got}"
        else:
            offsets = got
    else:
        out.idx_problem = f"{idx.name}: missing"
    sf = out.sf
    pos = frames.FILE_HEADER_SIZE
    expect = base
    if offsets is not None:
        for i, off in enumerate(offsets):
            got_fr = frames.read_at(buf, off) if off < len(buf) else frames.Damage(off, "offset past end of file")
            slot = _slot(got_fr) if isinstance(got_fr, frames.Frame) else None
            if slot is None or slot[0] != base + i:
                why = got_fr.reason if isinstance(got_fr, frames.Damage) else "unexpected frame"
                out.damage.append(f"{data.name}: slot {base + i} at offset {off}: {why}")
                slot = (base + i, 0, None, 0, None, None, LOST, None)
            out.slots.append(slot)
            sf.offsets.append(off)
            sf.dead.append(0 if slot[6] == LIVE else 1)
            if isinstance(got_fr, frames.Frame):
                pos = max(pos, got_fr.end)
        expect = base + len(offsets)
        if offsets and not isinstance(frames.read_at(buf, offsets[-1]), frames.Frame):
            sf.size = len(raw)
            return out
    # frames past the index (or every frame, without one)
    for got_fr in frames.scan(buf, pos):
        if isinstance(got_fr, frames.Damage):
            out.damage.append(f"{data.name}: offset {got_fr.offset}: {got_fr.reason} (tail cut)")
            out.truncate_at = got_fr.offset
            break
        slot = _slot(got_fr)
        if slot is None or slot[0] != expect:
            out.damage.append(f"{data.name}: offset {got_fr.offset}: unexpected frame (tail cut)")
            out.truncate_at = got_fr.offset
            break
        out.slots.append(slot)
        sf.offsets.append(got_fr.offset)
        sf.dead.append(0 if slot[6] == LIVE else 1)
        expect += 1
        pos = got_fr.end
    sf.size = pos if out.truncate_at is None else out.truncate_at
    if out.truncate_at is None and pos != len(raw):
        sf.size = len(raw)
    return out


def info(loaded: Loaded) -> dict[str, Any]:
    return {"base": loaded.base, "slots": len(loaded.slots), "damage": loaded.damage}
