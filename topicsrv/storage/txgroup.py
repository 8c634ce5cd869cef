"""Commit groups: the WAL frames of one atomic unit (a MULTI/EXEC, a Lua script, a string write
replacing a topic, a DEL of several keys) written so that recovery applies all of them or none
of them, although they belong to several WAL shards (a topic's frames live in its shard, every
keyspace frame in shard 0).

Rule 1 (capture): while a group is open (`begin_group` .. `end_group`, inside one synchronous
engine step) every shard's `enqueue` is captured instead of batched: the frame, its owning
shard, its record range. The Commit handed back is the owning shard's open batch's, which is
the batch the group's frames join at `end_group`: no writer runs and no checkpoint rotates a
shard inside one synchronous step.
Rule 2 (one copy per owning shard): a group of one frame is enqueued as it is. Otherwise every
shard owning some of its frames gets one COPY carrying ALL the group's frames (each tagged with
its owning shard) and the group's random 64-bit id: the T_GROUP_CHUNK frames of Rule 8,
enqueued back to back in one batch.
Rule 3 (recovery, `Splicer`): a group is applied when ANY copy survived whole. In each owning
shard its own frames replay in place of that shard's copy or, where that copy is missing, at
the end of what that shard kept of the generation. A copy is missing only because its
shard's writer stopped before it (a crash, a torn tail), so nothing after it in that shard
survived either: the position is exact. With no copy left, nothing of the group is applied,
and nothing written after it in an owning shard survived (each copy precedes those frames in
its shard), so no surviving frame depends on a group that recovery dropped.
Rule 4 (acknowledgement): each captured write's token is its owning shard's batch, so a group
acknowledged whole had every copy durable; fsync-class records become readable when their
own shard's copy is durable, which alone already brings the whole group back.
Rule 5 (write failure): a copy is made of control frames: a batch that fails (ENOSPC, EIO)
retries them first, in order, once the disk accepts writes (no mutation is accepted meanwhile,
store.py Rule 1), so they land where they belonged; its records are also marked LOST
(T_LOSTRANGE after it), as in memory.
Rule 6 (damage): a shard whose WAL was cut by damage other than a torn tail receives no
spliced frames (what lay between the damage and the group is unknown): the group then
applies in its other shards only, and recovery says so.
Rule 7 (spanning turns: a Lua script past busy-reply-threshold, scripting/runner.py Rule 2):
writers may run while such a group is open, so a captured write cannot wait on its shard's
open batch (that batch may be written before the group's frames). The group then hands out
its OWN Commit per shard (`commit_for`); at `flush` each is attached to the batch the group's
copy joins and released with it (wal.py Rule 8). A script's group is opened as one step (a
script that ends inside its EVAL step, the usual case, makes no Commit of its own) and told
`span_turns` when it goes past the threshold, before the loop gets a turn: its writes from
then on get own commits, and the writes captured before, handed their shards' open batches,
are acknowledged with the group through the tokens `span_turns` returns (one own commit per
shard the group owns so far), which the script's reply waits for as well. What Rules 2-5 say
holds unchanged: only the moment the frames are enqueued moves to the group's end.
Checkpoints wait (Rule 12).
Rule 8 (no limit but memory): a copy is a run of T_GROUP_CHUNK frames, `index` of `count`,
each holding whole frames of the group up to CHUNK_BYTES (a bigger frame is a chunk of its
own): no field bounds the number of frames or the group's bytes (a frame is still bounded by
frames.MAX_FRAME, a copy is not). Recovery counts a copy only once it read all its chunks in
order; a copy cut short is a torn tail, i.e. a missing copy (Rule 3). The T_GROUP frame of
earlier versions (one frame per copy, a 16-bit frame count) is still read, never written.
Rule 9 (bodies): the keyspace operations a group captures for one shard in a row (wal.py
`enqueue_body`) share one frame of the group, up to BODIES_MAX bytes, as they share the open
frame of a batch outside groups (wal.py Rule 9): a million SETs are a few hundred frames.
Rule 10 (never seen unless journaled): the group's writes are applied in memory before
`end_group` writes it. Nothing in `flush` depends on the group's size (Rule 8); should it
still raise (MemoryError), memory would be ahead of the WAL for good: the process stops at
once (`fail_stop`), inside the same synchronous step, so no client of either front reads a
write that recovery will not bring back (as redis-server exits when it cannot write its AOF).
Rule 11 (discarded at a stop): a group still open when the server stops (a script past the
threshold at SHUTDOWN NOSAVE, or still running when SIGTERM's grace ends: scripting/service.py
Rule 6) is discarded whole: none of its frames is enqueued, its own commits fail, and the
engine's journal becomes `Stopped` (every later mutation refused: memory holds writes the WAL
never will), so no later write derived from them and no final checkpoint is written.
Rule 12 (no snapshot inside a group): checkpoints and delete flips write memory's state
outside the WAL; they wait (`groups_closed`) while a group spanning turns is open, so a crash
in the middle of a script never finds part of it in a checkpoint or a segment file.
Where: the capture of Rules 1, 7 and 9 (`Group`, and the bodies of `begin_group`/`end_group`)
runs for every script and MULTI/EXEC, so it is compiled, in walqueue.py (its Rule 4); the chunk
codec, the Splicer, Rule 10's stop and `GroupJournal` are here.
"""

from __future__ import annotations

import logging
import os
import random
import struct
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, NoReturn

from topicsrv.engine.journal import NullJournal
from topicsrv.errors import TopicsError
from topicsrv.storage import frames
from topicsrv.storage.walqueue import BODIES_MAX as BODIES_MAX
from topicsrv.storage.walqueue import SHUTTING_DOWN, close_group, open_group
from topicsrv.storage.walqueue import Captured as Captured
from topicsrv.storage.walqueue import Group as Group
from topicsrv.storage.walqueue import Rng as Rng

if TYPE_CHECKING:
    from topicsrv.engine.core import Engine
    from topicsrv.engine.log.topic import Topic
    from topicsrv.storage.wal import Shard

log = logging.getLogger("topicsrv.storage")
_ids = random.Random()  # group ids (Rule 2); not the module's own generator, which callers seed

_HEAD = struct.Struct("<QH")  # T_GROUP (earlier versions, read only): group id, number of frames
_CHUNK = struct.Struct("<QII")  # T_GROUP_CHUNK: group id, chunk index, number of chunks
_ITEM = struct.Struct("<HBI")  # owning shard, frame type, body length
CHUNK_BYTES = 16 << 20  # Rule 8
TYPES = (frames.T_GROUP, frames.T_GROUP_CHUNK)
STOPPED = ("the server is shutting down and discarded a script that was still running; "
           "none of its writes were kept")

Part = tuple[int, int, memoryview]  # owning shard, frame type, body


def _body_size(data: bytes | list[bytes]) -> int:
    return len(data) - frames.HEADER_SIZE if isinstance(data, bytes) else sum(map(len, data))


def encode_chunks(gid: int, parts: list[Captured]) -> list[bytes]:
    """Rule 8: a copy's T_GROUP_CHUNK frames, whole captured frames up to CHUNK_BYTES each."""
    bounds: list[tuple[int, int]] = []
    start = size = 0
    for i, part in enumerate(parts):
        n = _ITEM.size + _body_size(part[2])
        if i > start and size + n > CHUNK_BYTES:
            bounds.append((start, i))
            start, size = i, 0
        size += n
    bounds.append((start, len(parts)))
    out = []
    for k, (a, b) in enumerate(bounds):
        pieces: list[bytes | memoryview] = [_CHUNK.pack(gid, k, len(bounds))]
        for shard, ftype, data, _ in parts[a:b]:
            pieces.append(_ITEM.pack(shard, ftype, _body_size(data)))
            if isinstance(data, bytes):
                pieces.append(memoryview(data)[frames.HEADER_SIZE:])
            else:
                pieces += data
        out.append(frames.encode(frames.T_GROUP_CHUNK, b"".join(pieces)))
    return out


def _items(body: memoryview, pos: int, n: int | None) -> list[Part]:
    """The (shard, type, body) items from `pos`: `n` of them, or up to the end (None)."""
    parts: list[Part] = []
    end = len(body)
    try:
        while (pos < end) if n is None else (len(parts) < n):
            shard, ftype, size = _ITEM.unpack_from(body, pos)
            pos += _ITEM.size
            if pos + size > end:
                raise ValueError("group frame: a part runs past the body")
            parts.append((shard, ftype, body[pos:pos + size]))
            pos += size
    except struct.error as exc:
        raise ValueError(f"group frame: {exc}") from exc
    if pos != end:
        raise ValueError("group frame: trailing bytes")
    return parts


def decode(body: memoryview) -> tuple[int, list[Part]]:
    """A T_GROUP body (earlier versions, Rule 8): (group id, [(owning shard, type, body)]);
    ValueError when malformed."""
    try:
        gid, n = _HEAD.unpack_from(body, 0)
    except struct.error as exc:
        raise ValueError(f"group frame: {exc}") from exc
    return gid, _items(body, _HEAD.size, n)


def decode_chunk(body: memoryview) -> tuple[int, int, int, list[Part]]:
    """A T_GROUP_CHUNK body: (group id, index, count, its parts); ValueError when malformed."""
    try:
        gid, index, count = _CHUNK.unpack_from(body, 0)
    except struct.error as exc:
        raise ValueError(f"group chunk: {exc}") from exc
    if index >= count:
        raise ValueError(f"group chunk {index} of {count}")
    return gid, index, count, _items(body, _CHUNK.size, None)


def parts_of(ftype: int, body: memoryview) -> list[Part]:
    """The parts a group frame (either type) carries."""
    return decode(body)[1] if ftype == frames.T_GROUP else decode_chunk(body)[3]


def own(ftype: int, body: memoryview, shard: int) -> Iterator[tuple[int, memoryview]]:
    """The (type, body) of the parts `shard` owns (the harvest of damaged bytes, fsck)."""
    for s, t, b in parts_of(ftype, body):
        if s == shard:
            yield t, b


class Splicer:
    """Rule 3 at recovery: the frames each shard replays, groups expanded."""

    def __init__(self) -> None:
        self.kept: dict[tuple[int, int], list[tuple[int, memoryview]]] = {}  # (gen, shard) -> frames
        self.groups: dict[int, tuple[int, list[Part]]] = {}  # gid -> (gen, parts)
        self.present: set[tuple[int, int]] = set()  # (gid, shard) copies read whole
        self.chunks: dict[tuple[int, int], list[list[Part]]] = {}  # (gid, shard) -> a copy so far
        self.notes: list[str] = []

    def add(self, gen: int, shard: int, ftype: int, body: memoryview) -> None:
        out = self.kept.setdefault((gen, shard), [])
        if ftype == frames.T_GROUP:
            gid, parts = decode(body)
        elif ftype == frames.T_GROUP_CHUNK:  # Rule 8: a copy counts once all its chunks are read
            gid, index, count, chunk = decode_chunk(body)
            got = self.chunks.pop((gid, shard), []) if index else []
            if index != len(got):
                raise ValueError(f"commit group {gid:016x}: chunk {index} of {count} follows "
                                 f"{len(got)} chunks")
            got.append(chunk)
            if index + 1 < count:
                self.chunks[(gid, shard)] = got
                return
            parts = [p for c in got for p in c]
        else:
            out.append((ftype, body))
            return
        self.groups.setdefault(gid, (gen, parts))
        self.present.add((gid, shard))
        out.extend((t, b) for s, t, b in parts if s == shard)

    def finish(self, damaged: set[int]) -> list[tuple[int, int, memoryview]]:
        """Missing copies spliced in (not into `damaged` shards: Rule 6); every frame as
        (gen, type, body) in (generation, shard) order."""
        for gid, (gen, parts) in self.groups.items():
            for shard in sorted({p[0] for p in parts}):
                if (gid, shard) in self.present:
                    continue
                if shard in damaged:
                    self.notes.append(f"WAL shard {shard} was damaged before the copy of commit group "
                                      f"{gid:016x}: its part there is not replayed, its other parts are")
                    continue
                self.kept.setdefault((gen, shard), []).extend((t, b) for s, t, b in parts if s == shard)
        return [(gen, t, b) for (gen, _), fs in sorted(self.kept.items(), key=lambda kv: kv[0])
                for t, b in fs]


class Stopped(NullJournal):
    """The engine's journal once a group was discarded (Rule 11): every mutation is refused."""

    def check_writable(self, topic: Topic | None) -> None:
        raise TopicsError("shutting_down", SHUTTING_DOWN)


def fail_stop(exc: BaseException) -> NoReturn:
    """Rule 10: memory is ahead of the WAL; stop before anyone reads it."""
    log.critical("a commit group could not be journaled (%r): its writes are in memory only, so "
                 "the server stops now, before any client reads them; a restart recovers the "
                 "state before the group", exc, exc_info=exc)
    logging.shutdown()
    os._exit(70)


class GroupJournal:
    """The journal's commit groups: the half of `Storage` (a mixin) that opens, writes and
    discards them, and that checkpoints wait on (Rules 1, 7, 10-12)."""

    engine: Engine
    shards: list[Shard]
    discarded = False  # Rule 11: set once, the server is stopping

    def _open_group(self) -> Group | None:
        shards = self.shards
        return shards[0].group if shards else None

    def begin_group(self, spans_turns: bool = False) -> None:
        """Open a commit group (Rules 1, 7); nested calls join the open one (an inner
        `spans_turns` makes it span turns from then on: writes captured before it were made
        inside one synchronous step). Compiled: walqueue.open_group."""
        open_group(self.shards, spans_turns)

    def span_turns(self) -> list[Any]:
        """Rule 7: the open group spans turns from now on; a token per shard it owns so far
        (its own commits), for the writes it captured already to wait on."""
        group = self._open_group()
        if group is None:
            return []
        group.own_commits()
        shards = self.shards
        return [group.commit_for(i, shards[i].batch.commit).token(False)
                for i in sorted(group.owners)]

    def end_group(self) -> None:
        """Close the group opened by the matching `begin_group`; the outermost writes it
        (walqueue.close_group detaches it, compiled)."""
        group = close_group(self.shards)
        if group is None:
            return
        try:
            group.flush(self.shards)
        except Exception as exc:  # Rule 10
            fail_stop(exc)
        group.end()

    def discard_group(self) -> bool:
        """Rule 11: drop the open group, if any (the server is stopping)."""
        tee = self.shards[0].tee if self.shards else None
        if tee is not None:
            tee.discard_group()
        group = self._open_group()
        if group is None:
            return False
        for sh in self.shards:
            sh.group = None
        n = len(group.parts)
        group.discard(TopicsError("shutting_down", STOPPED))
        self.discarded = True
        self.engine.journal = Stopped()
        log.warning("shutdown: a script was still running; its commit group (%d captured frames) "
                    "was discarded, nothing of it is in the WAL, and no checkpoint follows", n)
        return True

    async def groups_closed(self) -> None:
        """Rule 12: return once no group is open; OSError once one was discarded (Rule 11)."""
        while True:
            if self.discarded:
                raise OSError("a running script's writes were discarded at shutdown: memory "
                              "holds writes the WAL does not, so nothing is checkpointed")
            group = self._open_group()
            if group is None:
                return
            await group.wait_ended()
