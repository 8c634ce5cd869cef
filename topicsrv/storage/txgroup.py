"""Commit groups: the WAL frames of one atomic unit (a MULTI/EXEC, a string write replacing a
topic, a DEL of several keys) written so that recovery applies all of them or none of them,
although they belong to several WAL shards (a topic's frames live in its shard, every
keyspace frame in shard 0).

Rule 1 (capture): while a group is open (`Storage.begin_group` .. `end_group`, inside one
synchronous engine step) every shard's `enqueue` is captured instead of batched: the frame,
its owning shard, its record range. The Commit handed back is the owning shard's open
batch's, which is the batch the group's frame joins at `end_group`: no writer runs and no
checkpoint rotates a shard inside one synchronous step.
Rule 2 (one frame per owning shard): a group of one frame is enqueued as it is. Otherwise
every shard owning some of its frames gets ONE T_GROUP frame carrying ALL the group's frames
(each tagged with its owning shard) and the group's random 64-bit id. A frame is one
checksummed unit, so each copy is wholly present or wholly absent.
Rule 3 (recovery, `Splicer`): a group is applied when ANY copy survived. In each owning
shard its own frames replay in place of that shard's copy or, where that copy is missing, at
the end of what that shard kept of the generation. A copy is missing only because its
shard's writer stopped before it (a crash, a torn tail), so nothing after it in that shard
survived either: the position is exact. With no copy left, nothing of the group is applied,
and nothing written after it in an owning shard survived (each copy precedes those frames in
its shard), so no surviving frame depends on a group that recovery dropped.
Rule 4 (acknowledgement): each captured write's token is its owning shard's batch, so a group
acknowledged whole had every copy durable; fsync-class records become readable when their
own shard's copy is durable, which alone already brings the whole group back.
Rule 5 (write failure): a copy is a control frame: a batch that fails (ENOSPC, EIO) retries
it first once the disk accepts writes (no mutation is accepted meanwhile, store.py Rule 1),
so it lands where it belonged; its records are also marked LOST (T_LOSTRANGE after it), as
in memory.
Rule 6 (damage): a shard whose WAL was cut by damage other than a torn tail receives no
spliced frames (what lay between the damage and the group is unknown): the group then
applies in its other shards only, and recovery says so.
Rule 7 (spanning turns: a Lua script past busy-reply-threshold, scripting/runner.py Rule 2):
writers and checkpoints may run while such a group is open, so a captured write cannot wait
on its shard's open batch (that batch may be written before the group's frame). The group
then hands out its OWN Commit per shard (`commit_for`); at `flush` each is attached to the
batch the group's frame joins and released with it (wal.py Rule 8). What Rules 2-5 say holds
unchanged: only the moment the frames are enqueued moves to the group's end.
"""

from __future__ import annotations

import random
import struct
from collections.abc import Iterator
from typing import Any

from topicsrv.storage import frames

_HEAD = struct.Struct("<QH")  # group id, number of frames
_ITEM = struct.Struct("<HBI")  # owning shard, frame type, body length

Rng = tuple[Any, int, int, int, int | None]
Part = tuple[int, int, memoryview]  # owning shard, frame type, body


def encode(gid: int, parts: list[tuple[int, bytes]]) -> bytes:
    """A T_GROUP body: the id, then each (owning shard, whole encoded frame) as type + body."""
    out = [_HEAD.pack(gid, len(parts))]
    for shard, frame in parts:
        body = frame[frames.HEADER_SIZE:]
        out.append(_ITEM.pack(shard, frame[4], len(body)))
        out.append(body)
    return b"".join(out)


def decode(body: memoryview) -> tuple[int, list[Part]]:
    """(group id, [(owning shard, frame type, body)]); ValueError when malformed."""
    try:
        gid, n = _HEAD.unpack_from(body, 0)
        pos = _HEAD.size
        parts: list[Part] = []
        for _ in range(n):
            shard, ftype, size = _ITEM.unpack_from(body, pos)
            pos += _ITEM.size
            if pos + size > len(body):
                raise ValueError("group frame: a part runs past the body")
            parts.append((shard, ftype, body[pos:pos + size]))
            pos += size
    except struct.error as exc:
        raise ValueError(f"group frame: {exc}") from exc
    if pos != len(body):
        raise ValueError("group frame: trailing bytes")
    return gid, parts


def own(body: memoryview, shard: int) -> Iterator[tuple[int, memoryview]]:
    """The (type, body) of the parts `shard` owns (the harvest of damaged bytes, fsck)."""
    for s, ftype, b in decode(body)[1]:
        if s == shard:
            yield ftype, b


class Group:
    """The frames captured while a group is open (Rule 1)."""

    __slots__ = ("parts", "depth", "commits")

    def __init__(self) -> None:
        self.parts: list[tuple[int, bytes, Rng | None]] = []
        self.depth = 1
        self.commits: dict[int, Any] | None = None  # shard -> own Commit (Rule 7)

    def own_commits(self) -> None:
        """Rule 7: from now on captured writes wait on the group's own commits."""
        if self.commits is None:
            self.commits = {}

    def commit_for(self, shard: int, batch_commit: Any) -> Any:
        """The commit a write captured for `shard` waits on (Rules 1, 7)."""
        commits = self.commits
        if commits is None:
            return batch_commit
        c = commits.get(shard)
        if c is None:
            c = commits[shard] = type(batch_commit)()
        return c

    def owns(self, shard: int) -> bool:
        return any(p[0] == shard for p in self.parts)

    def flush(self, shards: list[Any]) -> None:
        """Rule 2: enqueue the captured frames, one frame per owning shard."""
        parts = self.parts
        if not parts:
            return
        own = self.commits or {}
        if len(parts) == 1:
            shard, frame, rng = parts[0]
            sh = shards[shard]
            sh.enqueue(frame, rng)
            if shard in own:
                sh.follow(sh.batch, own[shard])
            return
        body = encode(random.getrandbits(64), [(s, f) for s, f, _ in parts])
        frame = frames.encode(frames.T_GROUP, body)
        for shard in sorted({p[0] for p in parts}):
            shards[shard].enqueue_group(frame, [r for s, _, r in parts if s == shard and r is not None],
                                        own.get(shard))


class Splicer:
    """Rule 3 at recovery: the frames each shard replays, groups expanded."""

    def __init__(self) -> None:
        self.kept: dict[tuple[int, int], list[tuple[int, memoryview]]] = {}  # (gen, shard) -> frames
        self.groups: dict[int, tuple[int, list[Part]]] = {}  # gid -> (gen, parts)
        self.present: set[tuple[int, int]] = set()  # (gid, shard) copies read
        self.notes: list[str] = []

    def add(self, gen: int, shard: int, ftype: int, body: memoryview) -> None:
        out = self.kept.setdefault((gen, shard), [])
        if ftype != frames.T_GROUP:
            out.append((ftype, body))
            return
        gid, parts = decode(body)
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
