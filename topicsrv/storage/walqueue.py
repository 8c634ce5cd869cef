"""The loop side of a WAL shard (storage/wal.py): the batch a shard is gathering, and how a
frame or a body joins it (wal.py Rules 4, 8-10). Sans-IO: no file, no thread, no task here.

Rule 1 (compiled, buildinfo.HOT_MODULES): every durable write enqueues here once (a SET at P1,
a run of LPUSHes, an XADD batch, a script's commit group), and interpreted, the enqueue path
was ~1 us of a SET at P1 (docs/performance.md, "The journal's enqueue compiled"). `Shard`
(wal.py), with its writer task, files and I/O thread, is this class's interpreted subclass;
Commit, Token, OpenFrame and Batch are re-exported there.
Rule 2: what the writer reads of a batch (frames, ranges, control, followers, nbytes, since)
and of a shard (batch, open_frame, group, tee, wake, unwritable) are plain fields of these
classes, so the interpreted writer reads them as it did.
Rule 3 (`JournalFront`): the two calls every keyspace write makes of the journal, Storage's
`check_writable` (store.py Rule 1) and `keyspace_changed` (storage/keyspacelog.py Rules 1-2),
compiled: Storage binds them on each instance once its shards are open (store.py Rule 6).
Interpreted, with their loop over the shards, they were ~0.8 us of a SET at P1.
Rule 4 (commit groups, txgroup.py): a group's capture (`Group`) and its opening and closing
(`open_group`, `close_group`, the bodies of GroupJournal's begin_group and end_group) are
here, compiled: every script and MULTI/EXEC opens and closes one, and interpreted they were
~10% of an EVALSHA at P16 (docs/performance.md). The chunk codec, read at recovery too,
stays in txgroup.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

import trio
from mypy_extensions import mypyc_attr

from topicsrv.engine.keyspace import ops as ks_ops
from topicsrv.errors import TopicsError
from topicsrv.storage import frames

BODIES_MAX: Final = 256 << 10  # txgroup.py Rule 9
Rng = tuple[Any, int, int, int, int | None]
# a captured frame: owning shard, type, the whole frame (or the bodies it joins: txgroup.py
# Rule 9), range
Captured = tuple[int, int, bytes | list[bytes], Rng | None]

LINGER_BYTES: Final = 256 * 1024  # wal.py Rule 4
OPEN_BODY_MAX: Final = 16 * 1024  # a bigger body is a frame of its own (wal.py Rule 9)
OPEN_FRAME_MAX: Final = 256 * 1024  # an open frame holding this much takes no more bodies
SHUTTING_DOWN: Final = "the server is shutting down; retry on the next instance"


def storage_error(reason: str) -> TopicsError:
    return TopicsError(
        "insufficient_storage",
        f"the write could not be made durable ({reason}); nothing was acknowledged. "
        "Reads keep working; writes are accepted again once the disk has room.",
        {"reason": reason},
    )


class Commit:
    """One group-commit batch; every write in it waits on the same event."""

    __slots__ = ("event", "ms", "error", "urgent", "hurry", "leader", "tokens")

    def __init__(self) -> None:
        self.event = trio.Event()
        self.ms = 0.0
        self.error: TopicsError | None = None
        self.urgent = False  # someone waits on this batch: do not linger (wal.py Rule 4)
        self.hurry = trio.Event()  # set when the batch turns urgent or big
        # a commit group's own commit, once its frame is in a batch: that batch (wal.py Rule 8)
        self.leader: Commit | None = None
        self.tokens: list[Token | None] = [None, None]  # one per `report` flag, made once

    def token(self, report: bool) -> Token:
        """The batch's token (one object per `report` flag, shared by every write in the
        batch, so a front that waits for many writes awaits each batch once)."""
        t = self.tokens[report]
        if t is None:
            t = self.tokens[report] = Token(self, report)
        return t

    def wanted(self) -> None:
        if not self.urgent:
            self.urgent = True
            self.hurry.set()
        if self.leader is not None:
            self.leader.wanted()

    def release(self, error: TopicsError | None, ms: float) -> None:
        self.error, self.ms = error, ms
        self.event.set()


class Token:
    """A CommitToken: `wait()` returns the batch's fsync ms (or 0 when not fsync-gated)."""

    __slots__ = ("commit", "report")

    def __init__(self, commit: Commit, report: bool) -> None:
        self.commit = commit
        self.report = report
        commit.wanted()

    async def wait(self) -> float:
        await self.commit.event.wait()
        if self.commit.error is not None:
            raise self.commit.error
        return self.commit.ms if self.report else 0.0


class OpenFrame:
    """wal.py Rule 9: a frame still taking bodies, in its place in the batch until sealed."""

    __slots__ = ("batch", "ftype", "bodies", "size")

    def __init__(self, batch: Batch, ftype: int) -> None:
        self.batch = batch
        self.ftype = ftype
        self.bodies: list[bytes] = []
        self.size = 0  # bytes of the bodies

    def seal(self) -> bytes:
        return frames.encode(self.ftype, b"".join(self.bodies))


@dataclass
class Batch:
    frames: list[Any] = field(default_factory=list)  # bytes, or an OpenFrame until sealed
    # (topic object, epoch, first_seq, count, rc) of the record frames in this batch; rc: the
    # inbound router's cursor when the write ran (a router dest), else None
    ranges: list[tuple[Any, int, int, int, int | None]] = field(default_factory=list)
    control: list[Any] = field(default_factory=list)  # non-record frames (retried on failure)
    commit: Commit = field(default_factory=Commit)
    # commit groups' own commits released with this batch (txgroup.py Rule 7)
    followers: list[Commit] = field(default_factory=list)
    nbytes: int = 0
    since: float = 0.0  # trio time of the first frame
    opened: bool = False  # holds an OpenFrame (wal.py Rule 9)

    def seal(self) -> None:
        """wal.py Rule 9: every open frame becomes its bytes, in place."""
        if self.opened:
            self.opened = False
            # an open frame is in both lists (Shard.enqueue_body): sealed once, shared
            sealed = {id(f): f.seal() for f in self.frames if type(f) is OpenFrame}
            self.frames = [sealed[id(f)] if type(f) is OpenFrame else f for f in self.frames]
            self.control = [sealed[id(f)] if type(f) is OpenFrame else f for f in self.control]


@mypyc_attr(allow_interpreted_subclasses=True)
class ShardQueue:
    """A shard's batch being gathered and its enqueue side (Rule 1); wal.Shard adds the rest."""

    def __init__(self, index: int) -> None:
        self.index = index
        self.batch = Batch()
        self.group: Any = None  # an open txgroup.Group captures enqueues (wal.py Rule 8)
        self.tee: Any = None  # the replication backlog once a replica attached (wal.py Rule 10)
        self.open_frame: OpenFrame | None = None  # the batch's open frame (wal.py Rule 9)
        self.wake: Any = trio.Event()  # set when the batch gets a frame (the writer waits)
        self.unwritable: str | None = None  # why the last batch failed, until one succeeds

    def enqueue(self, frame: bytes, rng: tuple[Any, int, int, int, int | None] | None = None) -> Commit:
        tee = self.tee
        if tee is not None:  # wal.py Rule 10: a replica follows every frame (repl/backlog.py)
            tee.frame(frame)
        group = self.group
        if group is not None:  # wal.py Rule 8: the group's frames join this same batch
            group.add(self.index, frame, rng)
            return group.commit_for(self.index, self.batch.commit)
        return self.enqueue_held(frame, rng)

    def enqueue_held(self, frame: bytes,
                     rng: tuple[Any, int, int, int, int | None] | None = None) -> Commit:
        """`enqueue` of a frame the replication backlog already had (wal.py Rule 10): a commit
        group's one frame, whose parts the tee got as they were captured (txgroup.py Rule 2),
        or a body too big for the open frame, which the tee got as a body."""
        self.open_frame = None  # wal.py Rule 9: later bodies come after this frame
        b = self._add(frame)
        if rng is None:
            b.control.append(frame)
        else:
            b.ranges.append(rng)
        return b.commit

    def enqueue_body(self, ftype: int, body: bytes) -> Commit:
        """wal.py Rule 9: `body` joins the batch's open frame of `ftype` (begun here if there
        is none); inside a commit group it joins the group's bodies instead (wal.py Rule 8;
        txgroup.py Rule 9)."""
        tee = self.tee
        if tee is not None:  # wal.py Rule 10
            tee.body(ftype, body)
        group = self.group
        if group is not None:
            group.add_body(self.index, ftype, body)
            return group.commit_for(self.index, self.batch.commit)
        if len(body) >= OPEN_BODY_MAX:
            return self.enqueue_held(frames.encode(ftype, body))  # the tee had the body
        b = self.batch
        of = self.open_frame
        if of is None or of.batch is not b or of.ftype != ftype or of.size >= OPEN_FRAME_MAX:
            of = self.open_frame = OpenFrame(b, ftype)
            self._add(of, frames.HEADER_SIZE)
            b.control.append(of)
            b.opened = True
        of.bodies.append(body)
        of.size += len(body)
        b.nbytes += len(body)
        if b.nbytes >= LINGER_BYTES:
            b.commit.hurry.set()
        return b.commit

    def enqueue_group(self, chunks: list[bytes], ranges: list[tuple[Any, int, int, int, int | None]],
                      own: Commit | None = None) -> Commit:
        """A commit group's copy, its chunks back to back (wal.py Rule 8; txgroup.py Rules 5, 8);
        `own`: the group's own commit for this shard (txgroup.py Rule 7), released with this
        batch."""
        self.open_frame = None  # wal.py Rule 9
        b = self.batch
        for frame in chunks:
            self._add(frame)
            b.control.append(frame)
        b.ranges.extend(ranges)
        if own is not None:
            self.follow(b, own)
        return b.commit

    def follow(self, b: Batch, own: Commit) -> None:
        b.followers.append(own)
        own.leader = b.commit
        if own.urgent:
            b.commit.wanted()

    def _add(self, frame: Any, size: int = 0) -> Batch:
        b = self.batch
        if not b.frames:
            b.since = trio.current_time()
        b.frames.append(frame)
        b.nbytes += size if type(frame) is OpenFrame else len(frame)
        if b.nbytes >= LINGER_BYTES:
            b.commit.hurry.set()
        self.wake.set()
        return b


class JournalFront:
    """Rule 3: `check_writable` and `keyspace_changed` of one Storage (`storage`, read for
    `closed`), over its open shards (the keyspace shard's `tee` is every shard's)."""

    def __init__(self, storage: Any, shards: list[ShardQueue], keyspace_shard: int,
                 keyspace_class: str) -> None:
        self.storage = storage
        self.shards = shards
        self.keyspace = shards[keyspace_shard]
        self.memory = keyspace_class == "memory"
        self.fsync = keyspace_class == "fsync"

    def check_writable(self, topic: Any) -> None:
        """store.py Rule 1: 507 while a shard cannot write; refused once storage closed."""
        if self.storage.closed:
            raise TopicsError("shutting_down", SHUTTING_DOWN)
        for sh in self.shards:
            if sh.unwritable is not None:
                raise storage_error(sh.unwritable)

    def keyspace_changed(self, op: list[tuple[Any, ...]]) -> Token | None:
        """One keyspace operation under the keyspace's class (keyspacelog.py Rules 1-2)."""
        if self.memory:
            tee = self.keyspace.tee
            if tee is not None:  # replicated all the same (repl/backlog.py)
                tee.body(frames.T_KEYSPACE, ks_ops.encode(op))
            return None
        commit = self.keyspace.enqueue_body(frames.T_KEYSPACE, ks_ops.encode(op))
        return Token(commit, True) if self.fsync else None


class Group:
    """The frames captured while a commit group is open (txgroup.py Rule 1; compiled: Rule 4)."""

    def __init__(self) -> None:
        self.parts: list[Captured] = []
        self.depth = 1
        self.commits: dict[int, Any] | None = None  # shard -> own Commit (Rule 7)
        self.owners: set[int] = set()
        self.bodies: list[bytes] | None = None  # the last part's bodies, still joinable (txgroup.py Rule 9)
        self.bodies_size = 0
        self.ended: trio.Event | None = None  # made by the first waiter (txgroup.py Rule 12)

    def own_commits(self) -> None:
        """txgroup.py Rule 7: from now on captured writes wait on the group's own commits."""
        if self.commits is None:
            self.commits = {}

    def commit_for(self, shard: int, batch_commit: Any) -> Any:
        """The commit a write captured for `shard` waits on (txgroup.py Rules 1, 7)."""
        commits = self.commits
        if commits is None:
            return batch_commit
        c = commits.get(shard)
        if c is None:
            c = commits[shard] = type(batch_commit)()
        return c

    def add(self, shard: int, frame: bytes, rng: Rng | None) -> None:
        self.parts.append((shard, frame[4], frame, rng))
        self.owners.add(shard)
        self.bodies = None

    def add_body(self, shard: int, ftype: int, body: bytes) -> None:
        """Rule 9: `body` joins the last part when that holds bodies of `ftype` for `shard`."""
        bodies = self.bodies
        if bodies is not None and self.bodies_size < BODIES_MAX:
            last = self.parts[-1]
            if last[0] == shard and last[1] == ftype:
                bodies.append(body)
                self.bodies_size += len(body)
                return
        self.bodies = [body]
        self.bodies_size = len(body)
        self.parts.append((shard, ftype, self.bodies, None))
        self.owners.add(shard)

    def owns(self, shard: int) -> bool:
        return shard in self.owners

    def flush(self, shards: list[Any]) -> None:
        """txgroup.py Rule 2: enqueue the captured frames, one copy per owning shard."""
        parts = self.parts
        if not parts:
            return
        own = self.commits or {}
        if len(parts) == 1:
            shard, ftype, data, rng = parts[0]
            sh = shards[shard]
            # the tee had its parts as they were captured: not this frame again (wal.py Rule 10)
            sh.enqueue_held(data if isinstance(data, bytes) else frames.encode(ftype, b"".join(data)),
                            rng)
            if shard in own:
                sh.follow(sh.batch, own[shard])
            return
        from topicsrv.storage import txgroup  # the chunk codec: read at recovery too, interpreted

        chunks = txgroup.encode_chunks(txgroup._ids.getrandbits(64), parts)
        for shard in sorted(self.owners):
            shards[shard].enqueue_group(chunks, [p[3] for p in parts if p[0] == shard and p[3] is not None],
                                        own.get(shard))

    def discard(self, error: TopicsError) -> None:
        """txgroup.py Rule 11: nothing is enqueued; whoever waits on the group's own commits gets `error`."""
        self.parts = []
        self.bodies = None
        for c in (self.commits or {}).values():
            c.release(error, 0.0)
        self.end()

    def end(self) -> None:
        if self.ended is not None:
            self.ended.set()

    async def wait_ended(self) -> None:
        if self.ended is None:
            self.ended = trio.Event()
        await self.ended.wait()


def open_group(shards: list[Any], spans_turns: bool) -> None:
    """txgroup.GroupJournal.begin_group's body (Rule 4): a new group captures every shard's
    enqueues, or the open one is joined (nested: the outermost writes it)."""
    tee = shards[0].tee if shards else None
    if tee is not None:  # the backlog holds the group's frames too (repl/backlog.py Rule 3)
        tee.begin_group()
    group: Group | None = shards[0].group if shards else None
    if group is not None:
        group.depth += 1
        if spans_turns:
            group.own_commits()
        return
    group = Group()
    if spans_turns:
        group.own_commits()
    for sh in shards:
        sh.group = group


def close_group(shards: list[Any]) -> Group | None:
    """txgroup.GroupJournal.end_group's first half (Rule 4): the outermost end detaches the
    group from the shards and returns it for the caller to write; a nested one returns None."""
    tee = shards[0].tee if shards else None
    if tee is not None:
        tee.end_group()
    group: Group | None = shards[0].group if shards else None
    if group is None:
        return None
    group.depth -= 1
    if group.depth:
        return None
    for sh in shards:
        sh.group = None
    return group
