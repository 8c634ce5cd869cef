"""Reading the WAL back at recovery: the frames to replay, and what damage cut off.

Rule 1: a torn or checksum-failing frame ends the replay of its shard at the last good frame:
nothing after it is applied (its effect may depend on what was lost). The bytes from there on
are copied aside (`*.damaged-<offset>`) and cut off the file; so are later generations of
that shard.
Rule 2: what was cut off is still searched for good frames (a frame is trusted only when its
checksum holds; the search steps byte by byte over bad bytes), for the seqs, HeadWatermark
ceilings and epochs they show: a seq that may have been acknowledged is never handed out
again (`Cut`).
Rule 3: a torn tail (a frame running past the end of the last file, nothing after it) is an
unfinished write: no batch whose sync returned can be in it, so it hides nothing that was
acknowledged beyond the durable ceilings recovery already applies.
Rule 4: a commit group's copy (T_GROUP_CHUNK frames, or one T_GROUP frame of earlier
versions) is replaced by the parts its shard owns; a group with a whole copy in some shard but
not in another gets the missing shard's parts spliced in at the end of that shard's generation
(txgroup.py Rules 3, 8), so recovery sees plain frames.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from topicsrv.storage import codec, frames, txgroup
from topicsrv.storage.fsops import OsOps
from topicsrv.storage.state import shard_of

log = logging.getLogger("topicsrv.storage")

WAL_RE = re.compile(r"wal-(\d{3})-(\d{12})\.log$")
# A HeadWatermark never reserves more than this above the head (store.py), so one lost
# ceiling frame hides at most this many acknowledged seqs above what the good frames show.
RESERVE_MAX = 1 << 16
# An APPEND frame spends at least this many bytes per record (12-byte item header + blob), so
# N unreadable bytes can hide at most N // MIN_SEQ_BYTES seqs.
MIN_SEQ_BYTES = 13
# Frame header candidates: a known WAL type at +4 and a zero flag byte at +13.
_CANDIDATE = re.compile(rb"(?s)(?=.{4}[\x01-\x0f\x13-\x15].{8}\x00)")


def wal_files(wal_dir: Path) -> list[tuple[int, int, Path]]:
    """(gen, shard, path) sorted by generation then shard."""
    out = []
    if wal_dir.exists():
        for p in wal_dir.iterdir():
            m = WAL_RE.match(p.name)
            if m:
                out.append((int(m.group(2)), int(m.group(1)), p))
    return sorted(out)


@dataclass
class Cut:
    """Where damage ended the replay of one shard, and what the cut-off bytes still show."""

    path: Path
    shard: int
    nshards: int  # shards of the run that wrote the file (files in its generation)
    offset: int
    reason: str
    torn_tail: bool  # a frame runs past the end of the shard's last file (Rule 3)
    aside: str | None = None  # the file the cut bytes were copied to
    good_after: int = 0  # good frames found past the cut
    unreadable: int = 0  # bytes past the cut that no good frame covers
    hwm: dict[tuple[str, int], int] = field(default_factory=dict)  # (name, epoch) -> seq/ceiling
    epochs: dict[str, int] = field(default_factory=dict)  # name -> highest epoch past the cut
    names: set[str] = field(default_factory=set)  # topics with frames in the damaged shard

    def affects(self, name: str) -> bool:
        return name in self.names or shard_of(name, self.nshards) == self.shard

    @property
    def margin(self) -> int:
        """Seqs to skip above everything known for an affected topic: a lost ceiling frame
        reserved at most RESERVE_MAX, lost append frames at most one seq per MIN_SEQ_BYTES."""
        if self.torn_tail and not self.good_after:
            return 0
        return RESERVE_MAX + self.unreadable // MIN_SEQ_BYTES


@dataclass
class WalRead:
    frames: list[tuple[int, int, memoryview]] = field(default_factory=list)  # (gen, type, body)
    top_gen: int = 0
    cuts: list[Cut] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _good_frames(buf: memoryview, offset: int) -> Iterator[frames.Frame | int]:
    """Every good frame from `offset`, stepping over bad bytes (Rule 2); an int reports how
    many bytes were stepped over."""
    n = len(buf)
    raw = buf.obj if isinstance(buf.obj, bytes) else bytes(buf)
    while offset < n:
        got = frames.read_at(buf, offset)
        if isinstance(got, frames.Frame):
            yield got
            offset = got.end
            continue
        nxt = n
        for m in _CANDIDATE.finditer(raw, offset + 1):
            if isinstance(frames.read_at(buf, m.start()), frames.Frame):
                nxt = m.start()
                break
        yield nxt - offset
        offset = nxt


def _harvest(cut: Cut, buf: memoryview, offset: int) -> None:
    """Seqs, ceilings and epochs shown by the good frames in buf[offset:]."""
    for got in _good_frames(buf, offset):
        if isinstance(got, int):
            cut.unreadable += got
            continue
        cut.good_after += 1
        try:
            parts = list(txgroup.own(got.ftype, got.body, cut.shard)) if got.ftype in txgroup.TYPES \
                else [(got.ftype, got.body)]
        except ValueError:
            continue
        for ftype, body in parts:
            _harvest_one(cut, ftype, body)


def _harvest_one(cut: Cut, ftype: int, body: memoryview) -> None:
    try:
        if ftype in frames.RECORD_FRAMES:
            name, epoch, first, _, n, _ = codec.append_header(body)
            top = first + n - 1
        elif ftype == frames.T_KEYSPACE:
            return
        else:
            d = codec.decode_json(body)
            name, epoch = str(d["name"]), int(d["epoch"])
            top = int(d.get("ceiling", 0)) if ftype == frames.T_CEIL else 0
    except (ValueError, KeyError, TypeError, UnicodeDecodeError):
        return
    cut.names.add(name)
    cut.epochs[name] = max(cut.epochs.get(name, 0), epoch)
    if top:
        cut.hwm[(name, epoch)] = max(cut.hwm.get((name, epoch), 0), top)


def _set_aside(ops: OsOps, path: Path, raw: bytes, offset: int) -> str:
    aside = path.with_name(f"{path.name}.damaged-{offset}")
    ops.write_file(aside, raw[offset:])  # on disk whole before the WAL is cut (fsops Rule 3)
    fd = ops.open_rw(path)
    try:
        ops.ftruncate(fd, offset)
        ops.fsync(fd)
    finally:
        ops.close(fd)
    return aside.name


def read_wal(wal_dir: Path, from_gen: int, ops: OsOps, repair: bool) -> WalRead:
    """Frames to replay (generation >= from_gen), in order; where damage cut a shard."""
    out = WalRead(top_gen=from_gen)
    files = wal_files(wal_dir)
    per_gen: dict[int, int] = {}
    for gen, shard, _ in files:
        per_gen[gen] = max(per_gen.get(gen, 0), shard + 1)
    last_of_shard = {shard: path for gen, shard, path in files if gen >= from_gen}
    stopped: dict[int, Cut] = {}
    splice = txgroup.Splicer()  # Rule 4
    for gen, shard, path in files:
        out.top_gen = max(out.top_gen, gen)
        if gen < from_gen:
            continue
        raw = path.read_bytes()
        buf = memoryview(raw)
        cut = stopped.get(shard)
        if cut is not None:  # a later generation of a damaged shard: nothing of it is replayed
            if len(raw) > frames.FILE_HEADER_SIZE:
                _harvest(cut, buf, frames.FILE_HEADER_SIZE)
            if raw and repair:
                _set_aside(ops, path, raw, 0)
                out.notes.append(f"{path.name}: a later generation of damaged shard {shard}; "
                                 f"set aside whole ({len(raw)} bytes)")
            continue
        if len(raw) < frames.FILE_HEADER_SIZE:
            if raw and repair:
                _set_aside(ops, path, raw, 0)
                out.notes.append(f"{path.name}: torn file header ({len(raw)} bytes) set aside")
            continue
        if frames.parse_file_header(buf, frames.WAL_MAGIC) is None:
            cut = Cut(path, shard, per_gen[gen], 0, "bad file header", False)
            _harvest(cut, buf, frames.FILE_HEADER_SIZE)
            stopped[shard] = cut
        else:
            names: set[str] = set()
            for got in frames.scan(buf, frames.FILE_HEADER_SIZE):
                if isinstance(got, frames.Damage):
                    torn = got.reason.startswith("torn") and path == last_of_shard[shard]
                    cut = Cut(path, shard, per_gen[gen], got.offset, got.reason, torn, names=names)
                    _harvest(cut, buf, got.offset)
                    stopped[shard] = cut
                    break
                kept = splice.kept.setdefault((gen, shard), [])
                before = len(kept)
                try:
                    splice.add(gen, shard, got.ftype, got.body)
                except ValueError as exc:
                    log.error("%s: unreadable commit group at offset %d: %s; skipped",
                              path.name, got.offset, exc)
                    continue
                for ftype, body in kept[before:]:
                    try:
                        names.add(_owner(ftype, body))
                    except (ValueError, KeyError, TypeError, UnicodeDecodeError):
                        pass
            else:
                continue
        if repair:
            cut.aside = _set_aside(ops, path, raw, cut.offset)
        out.cuts.append(cut)
        log.error("%s: %s at offset %d: replay of WAL shard %d stops there (%d bytes after it%s; "
                  "%d good frames found past it)", path.name, cut.reason, cut.offset, shard,
                  len(raw) - cut.offset, f", kept in {cut.aside}" if cut.aside else "", cut.good_after)
    out.frames = splice.finish({c.shard for c in out.cuts if not (c.torn_tail and not c.good_after)})
    out.notes += splice.notes
    return out


def _owner(ftype: int, body: memoryview) -> str:
    if ftype in frames.RECORD_FRAMES:
        return codec.append_header(body)[0]
    return str(codec.decode_json(body)["name"])
