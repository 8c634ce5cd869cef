"""The write-ahead log: one shard = one file generation + one writer task (group commit).

Rule 1: `enqueue` is synchronous (the engine never awaits); the writer takes everything
queued, writes it with one writev and one fdatasync in the shard's I/O thread
(iothread.py), then releases the batch's waiters together.
Rule 2: the writer adds HeadWatermark (T_CEIL) frames to a batch for every topic whose head
came within half the headroom of its reserved ceiling, so seqs are never reused after a crash.
Rule 3: a batch that fails (ENOSPC, EIO) is cut off the file (ftruncate to the last good
offset); its waiters get 507, its record ranges are handed to `on_failed` (which marks them
LOST), its control frames are retried first once the disk accepts writes again.
Rule 4 (linger): a batch nobody waits on (only `disk`/`memory` appends: no Token was made for
it) may gather for up to LINGER_S or LINGER_BYTES before its writev + fdatasync, so high
write rates cost fewer thread hops and syncs; the first Token made for a batch (an fsync-class
write, a topic creation, a disk-class write past its ceiling, a gated control frame) ends the
wait at once, so fsync-class latency does not change.
Rule 6: once a batch is durable, `on_durable` hears its record ranges (fsync-class records
become readable only then: Topic Rule 6).
Rule 5: `rotate` is the checkpoint cut: frames queued before it go to the old generation,
frames after it to the next one; `rotated` fires when the old file is complete and closed.
Rule 7 (I/O path): the shard's blocking calls run on its own IoThread; env
TOPICS_WAL_IO=to_thread selects `trio.to_thread.run_sync` per call instead (the path before
issue 16, kept for A/B measurements: bench/walbench.py).
Rule 8 (commit groups, txgroup.py): while `group` is set, `enqueue` and `enqueue_body`
capture into it instead of the batch; `enqueue_group` takes a group's copy for this shard
(its chunk frames, back to back) as control frames (retried after a failed batch) that also
carry the shard's record ranges. A
group spanning turns (txgroup.py Rule 7) hands out its own Commit per shard, released with
the batch its frame joins (`Batch.followers`): same error, same ms.
Rule 9 (open frames): `enqueue_body` adds a body to the batch's *open* frame of that type,
begun in place the first time and sealed (header and checksum, one frame of all its bodies in
order) when the writer takes the batch; any other enqueue closes it, so the bodies keep their
place among the shard's frames. The keyspace uses it (storage/keyspacelog.py Rule 2): at P1
every SET is its own operation, and one frame per batch instead of one per SET saves the
frame's encoding, its place in the batch and its iovec (docs/performance.md). A body type
must be a concatenation of independent parts (keyspace operations are: engine/keyspace/ops.py
Rule 1), since the sealed frame replays as one. A body of OPEN_BODY_MAX bytes or more is a
frame of its own, as before, and an open frame takes no more once it holds OPEN_FRAME_MAX: a
frame is copied whole when it is sealed, and a batch of big values sealed as one frame would
hold three copies of all of them at once (the resident memory `--max-memory` samples).
Rule 10 (replication): once a replica attached, `tee` is the primary's backlog
(repl/backlog.py) and every enqueue hands it the frame (or body) first, inside or outside a
commit group (the backlog holds a group's frames itself), in the engine's order. A group's
frames reach the tee as they are captured, so its one frame enqueued at the group's end
(`enqueue_held`) is not handed over again: a replica would apply a script's LPUSH twice.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from operator import itemgetter
from pathlib import Path
from typing import Any

import trio

from topicsrv.errors import TopicsError
from topicsrv.latency import SYNC_BUCKETS_S, Histogram
from topicsrv.storage import frames
from topicsrv.storage.fsops import OsOps
from topicsrv.storage.iothread import IoThread
from topicsrv.storage.walqueue import LINGER_BYTES as LINGER_BYTES
from topicsrv.storage.walqueue import OPEN_BODY_MAX as OPEN_BODY_MAX
from topicsrv.storage.walqueue import OPEN_FRAME_MAX as OPEN_FRAME_MAX
from topicsrv.storage.walqueue import Batch as Batch
from topicsrv.storage.walqueue import Commit as Commit
from topicsrv.storage.walqueue import OpenFrame as OpenFrame
from topicsrv.storage.walqueue import ShardQueue
from topicsrv.storage.walqueue import Token as Token
from topicsrv.storage.walqueue import storage_error as storage_error

log = logging.getLogger("topicsrv.storage")

PROBE_INTERVAL_S = 0.25
LINGER_S = 0.002  # longest a batch without waiters gathers before its sync (Rule 4)
_COUNT = itemgetter(3)  # a range's record count (enqueue's `rng`)


def wal_path(wal_dir: Path, shard: int, gen: int) -> Path:
    return wal_dir / f"wal-{shard:03d}-{gen:012d}.log"


class Shard(ShardQueue):
    """A WAL shard: its files, writer task and I/O thread; the enqueue side is ShardQueue's
    (walqueue.py, compiled)."""

    def __init__(
        self,
        index: int,
        wal_dir: Path,
        gen: int,
        ops: OsOps,
        ceilings: Callable[[Shard], list[tuple[bytes, Callable[[], None]]]],
        on_failed: Callable[[Batch], None],
        on_durable: Callable[[Batch], None] | None = None,
        io_thread: bool | None = None,
    ) -> None:
        super().__init__(index)
        self.wal_dir = wal_dir
        self.gen = gen
        self.ops = ops
        self.ceilings = ceilings
        self.on_failed = on_failed
        self.on_durable = on_durable
        self.before_cut: list[Batch] = []
        self.target_gen = gen
        self.rotated = trio.Event()
        self.rotated.set()
        self.retry: list[bytes] = []
        self.ceil_topics: dict[int, Any] = {}  # id(topic) -> topic: ceilings to check
        self.closing = False
        self.fd = -1
        self.offset = 0
        self.batches = 0
        self.records = 0
        self.syncs = 0
        self.sync_ms_total = 0.0
        self.sync_latency = Histogram(SYNC_BUCKETS_S)  # writev + fdatasync of each batch (/metrics)
        self.linger = True
        if io_thread is None:
            io_thread = os.environ.get("TOPICS_WAL_IO", "thread") != "to_thread"
        self.io = IoThread(f"wal-io-{index}") if io_thread else None  # Rule 7

    # ---- loop side (synchronous) --------------------------------------------------------

    def open(self) -> None:
        path = wal_path(self.wal_dir, self.index, self.gen)
        fresh = not path.exists() or path.stat().st_size == 0
        fd = self.ops.open_append(path)
        if fresh:
            try:
                self.ops.writev(fd, [frames.file_header(frames.WAL_MAGIC, self.index, self.gen)])
                self.ops.fdatasync(fd)
                self.ops.fsync_dir(self.wal_dir)
            except OSError:
                self.ops.close(fd)
                self.ops.unlink(path)
                raise
        self.fd = fd
        self.offset = path.stat().st_size

    def want_ceiling(self, topic: Any) -> Commit:
        self.ceil_topics[id(topic)] = topic
        self.wake.set()
        return self.batch.commit

    def rotate(self) -> int:
        """The checkpoint cut; returns the new generation."""
        if self.batch.frames or self.ceil_topics:
            self.before_cut.append(self.batch)
            self.batch = Batch()
        self.target_gen += 1
        self.rotated = trio.Event()
        self.wake.set()
        return self.target_gen

    # ---- writer task ----------------------------------------------------------------------

    async def _blocking(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run a blocking call off the loop (Rule 7)."""
        if self.io is None:
            return await trio.to_thread.run_sync(fn, *args)
        return await self.io.call(fn, *args)

    def _write(self, bufs: list[bytes]) -> float:
        t0 = time.perf_counter()
        if bufs:
            self.ops.writev(self.fd, bufs)
        self.ops.fdatasync(self.fd)
        return (time.perf_counter() - t0) * 1000.0

    def _truncate(self) -> None:
        try:
            self.ops.ftruncate(self.fd, self.offset)
        except OSError as exc:  # the next successful batch retries from the same offset
            log.error("wal shard %d: cannot cut a failed batch off at %d: %s", self.index, self.offset, exc)

    async def _flush(self, batch: Batch) -> None:
        # shielded: once a batch is taken, its outcome is always recorded and released
        with trio.CancelScope(shield=True):
            await self._flush_batch(batch)

    async def _flush_batch(self, batch: Batch) -> None:
        batch.seal()  # Rule 9
        pending = self.ceilings(self)
        bufs = self.retry + batch.frames + [f for f, _ in pending]
        if not bufs and self.unwritable is None:
            self._release(batch, None, 0.0)
            return
        try:
            ms = await self._blocking(self._write, bufs)
        except OSError as exc:
            reason = f"{exc.strerror or exc} while writing the WAL"
            log.error("wal shard %d: batch of %d frames failed: %s", self.index, len(bufs), reason)
            await self._blocking(self._truncate)
            self.unwritable = reason
            self.retry = self.retry + batch.control
            self.on_failed(batch)
            self._release(batch, storage_error(reason), 0.0)
            return
        if self.unwritable is not None:
            log.warning("wal shard %d: writes are durable again", self.index)
        self.unwritable = None
        self.retry = []
        self.offset += sum(map(len, bufs))
        for _, done in pending:
            done()
        self.batches += 1
        self.syncs += 1
        self.records += sum(map(_COUNT, batch.ranges))
        self.sync_ms_total += ms
        self.sync_latency.observe(ms / 1000.0)
        self._release(batch, None, ms)
        if self.on_durable is not None and batch.ranges:
            self.on_durable(batch)

    @staticmethod
    def _release(batch: Batch, error: TopicsError | None, ms: float) -> None:
        batch.commit.release(error, ms)
        for c in batch.followers:
            c.release(error, ms)

    def _switch_sync(self) -> None:
        old_fd, old_gen, old_offset = self.fd, self.gen, self.offset
        self.gen = self.target_gen
        try:
            self.open()
        except OSError:
            self.fd, self.gen, self.offset = old_fd, old_gen, old_offset
            raise
        if old_fd >= 0:
            self.ops.close(old_fd)

    async def _switch_gen(self) -> None:
        """Start the next generation; on failure stay on the current one (the checkpoint
        that asked is postponed, nothing is trimmed)."""
        with trio.CancelScope(shield=True):
            try:
                await self._blocking(self._switch_sync)
            except OSError as exc:
                log.error("wal shard %d: cannot start generation %d: %s", self.index, self.target_gen, exc)
                self.target_gen = self.gen
                self.unwritable = f"{exc.strerror or exc} while starting a WAL file"
            self.rotated.set()

    async def step(self) -> bool:
        """One writer round; returns False when there was nothing to do."""
        did = False
        while self.before_cut:
            await self._flush(self.before_cut.pop(0))
            did = True
        if self.target_gen != self.gen:
            await self._switch_gen()
            did = True
        if self.batch.frames or self.ceil_topics or (self.unwritable and self.retry):
            batch, self.batch = self.batch, Batch()
            await self._flush(batch)
            did = True
        elif self.unwritable is not None:
            await self._flush(Batch())  # a probe: is the disk writable again?
            did = True
        return did

    async def _linger(self) -> None:
        """Let a batch nobody waits on gather a little (Rule 4)."""
        b = self.batch
        if (not b.frames or b.commit.urgent or b.nbytes >= LINGER_BYTES or self.before_cut
                or self.target_gen != self.gen or self.unwritable is not None or self.closing):
            return
        with trio.move_on_at(b.since + LINGER_S):
            await b.commit.hurry.wait()

    async def run(self) -> None:
        while True:
            if self.linger:
                await self._linger()
            did = await self.step()
            if did and self.unwritable is not None and not self.closing:
                # a failing disk: probe at PROBE_INTERVAL_S, do not spin (new frames wake us)
                self.wake = trio.Event()
                with trio.move_on_after(PROBE_INTERVAL_S):
                    await self.wake.wait()
                continue
            if not did:
                self.wake = trio.Event()
                if self.batch.frames or self.before_cut or self.target_gen != self.gen:
                    continue
                if self.unwritable is not None:
                    with trio.move_on_after(PROBE_INTERVAL_S):
                        await self.wake.wait()
                else:
                    await self.wake.wait()

    async def drain(self) -> None:
        """Write everything queued (shutdown); stops at the first failure."""
        self.closing = True
        for _ in range(4):
            await self.step()
            if not (self.batch.frames or self.before_cut or self.ceil_topics):
                break

    def close(self) -> None:
        if self.fd >= 0:
            self.ops.close(self.fd)
            self.fd = -1
        if self.io is not None:
            self.io.stop()
