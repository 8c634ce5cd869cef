"""Storage: the engine's Journal, plus the tasks that keep the data dir true.

What each durability class means (seeds 2.2; docs/storage.md) is the table in policy.py:
this module asks the topic's row (`policy_of`), never compares class names. Topic
create/update/drop frames are always fsync-gated (a topic's config always survives).

Rule 1: `check_writable` refuses every mutation with 507 while a shard cannot write; the
writers probe and accept writes again once the disk does.
Rule 2: a batch that fails marks its record ranges LOST in memory (readers get a `lost`
tombstone, seqs are never reused) and its waiters get 507; see docs/decisions.md.
Rule 3: segment-file I/O (checkpoint, delete flips, whole-segment unlinks, cold relocation)
runs in worker threads, one at a time under `seg_lock`. Checkpoints: checkpoint.py; delete
flips and the cold tier: segtasks.py.
Rule 4: a data dir that cannot be opened or read (a corrupt checkpoint.json or keyspace
snapshot, a full disk) makes `open` raise StartupError, one message for the operator naming
the file; nothing is changed.
Rule 5: a damaged file the server can run without (functions.json: storage/functions.py
Rule 3) is named in one ERROR line at `open` and kept in `damaged` (/v0/ready, the FUNCTION
commands) until the command that replaces it ran.
Rule 6 (the per-write calls compiled): once the shards are open, the instance's
`check_writable` and `keyspace_changed` are those of a compiled walqueue.JournalFront over
them (walqueue.py Rule 3), which every keyspace write and every XADD call; the methods below
say the same for a Storage not open yet.
"""

from __future__ import annotations

import logging
import struct
from pathlib import Path
from typing import TYPE_CHECKING, Any

import trio

from topicsrv.engine import restore
from topicsrv.engine.journal import NullJournal
from topicsrv.engine.log import xids as xmod
from topicsrv.engine.log.topic import Topic
from topicsrv.engine.queues import queues
from topicsrv.errors import StartupError, TopicsError
from topicsrv.storage import (
    codec,
    frames,
    images,
    keyspacelog,
    keyspacesave,
    recovery,
    routerlog,
    txgroup,
)
from topicsrv.storage.fsops import OsOps
from topicsrv.storage.policy import DISK, policy_of
from topicsrv.storage.progress import Progress
from topicsrv.storage.replstore import ReplJournal
from topicsrv.storage.segtasks import SegTasks
from topicsrv.storage.startup import Startup
from topicsrv.storage.state import TState, near_ceiling, state_of
from topicsrv.storage.wal import Shard, Token
from topicsrv.storage.walqueue import SHUTTING_DOWN, JournalFront
from topicsrv.storage.writerhooks import WriterHooks

if TYPE_CHECKING:
    from topicsrv.engine.core import Engine
    from topicsrv.engine.log.records import PreparedRecord

log = logging.getLogger("topicsrv.storage")

class Storage(Startup, txgroup.GroupJournal, routerlog.RouterJournal, SegTasks, ReplJournal,
              WriterHooks):
    def __init__(
        self,
        engine: Engine,
        data_dir: Path,
        *,
        shards: int = 4,
        cold_dir: Path | None = None,
        checkpoint_interval_s: float = 60.0,
        relocate_interval_s: float = 5.0,
        ops: OsOps | None = None,
        keyspace_class: str = "disk",
    ) -> None:
        self.engine = engine
        self.keyspace_class = keyspace_class  # storage/keyspacelog.py Rule 1
        self.data_dir = Path(data_dir)
        self.cold_dir = Path(cold_dir) if cold_dir is not None else None
        self.nshards = shards
        self.checkpoint_interval_s = checkpoint_interval_s
        self.relocate_interval_s = relocate_interval_s
        self.ops = ops or OsOps()
        self.shards: list[Shard] = []
        self.gen = 0
        self.seg_lock = trio.Lock()
        self.ckpt_lock = trio.Lock()
        self.flip_wake = trio.Event()
        self.flip_topics: dict[int, Topic] = {}
        self.pending: list[images.Image] = []
        self.recovered: recovery.Recovered | None = None
        self.progress = Progress()  # how far recovery has come (/v0/ready, the log)
        self.writers_running = False
        self.settled = trio.Event()  # memory topics rebuilt and the startup checkpoint done
        self.closed = False
        self.opened = False
        self.checkpoints = 0
        self.saves = keyspacesave.Saves()  # INFO persistence, LASTSAVE
        self.ckpt_wake = trio.Event()  # BGSAVE: a checkpoint now (checkpoint.py `request`)
        self.last_checkpoint_error: str | None = None
        # per topic, the entry of the last checkpoint.json written and the first WAL generation
        # it does not include (a topic whose checkpoint fails keeps it: Rule 4)
        self.entries: dict[str, tuple[dict[str, Any], int]] = {}
        self.ckpt_gen = 0  # wal_gen of the last checkpoint.json written
        self.damaged: dict[str, str] = {}  # Rule 5: file name -> what is wrong with it
        self.replica = False  # opened as a replica: its queues' leases are its primary's

    # ---- opening and recovery ---------------------------------------------------------------

    async def _open(self) -> recovery.Recovered:
        self._check_files()
        (self.data_dir / "wal").mkdir(parents=True, exist_ok=True)
        (self.data_dir / "topics").mkdir(parents=True, exist_ok=True)
        if self.cold_dir is not None:
            self.cold_dir.mkdir(parents=True, exist_ok=True)
        now = self.engine.now()
        rec = await trio.to_thread.run_sync(
            recovery.recover, self.data_dir, self.cold_dir, self.nshards, self.ops, now, True,
            self.progress, self.replica)
        self.entries = {name: (e, int(e.get("replay_from", rec.ckpt_gen))) for name, e in rec.entries.items()}
        self.ckpt_gen = rec.ckpt_gen
        for topic in rec.topics:
            restore.install(self.engine, topic)
        for router in rec.routers:  # linked to their topics by recovery (rederive.py)
            self.engine.routers[router.name] = router
            state_of(self.engine.topics[router.spec.dest], self.nshards).router = router
        for name, epoch in rec.epochs.items():
            self.engine.epochs[name] = max(self.engine.epochs.get(name, 0), epoch)
        try:
            kept, expired = keyspacelog.restore(self.engine.keyspace, self.data_dir,
                                                {"keyspace": rec.keyspace_file}, rec.keyspace, now)
        except (ValueError, struct.error) as exc:
            raise StartupError(
                f"cannot start: the keyspace snapshot that {images.CHECKPOINT} names is damaged "
                f"({exc}). Its string keys cannot be rebuilt without it; restore "
                f"{self.data_dir / str(rec.keyspace_file)} from a backup (`python -m topicsrv check "
                f"--data-dir {self.data_dir}` reports it).") from exc
        log.info("recovered %d keys (%d expired: reaped as they are met)", kept, expired)
        self.pending = rec.pending
        self.recovered = rec
        for note in rec.notes:
            log.warning("recovery: %s", note)
        for msg in rec.damage:
            log.error("recovery: damaged: %s", msg)
        rate = rec.records / rec.seconds if rec.seconds > 0 else 0.0
        log.info("recovered %d topics, %d records, %d routers (%d copies re-derived) in %.3fs "
                 "(%.0f records/s)%s", len(rec.topics), rec.records, len(rec.routers), rec.rederived,
                 rec.seconds, rate,
                 f"; {len(rec.pending)} memory topics follow" if rec.pending else "")
        self.gen = rec.next_gen
        self.shards = [Shard(i, self.data_dir / "wal", self.gen, self.ops, self._ceilings, self._failed,
                             self._durable)
                       for i in range(self.nshards)]
        for sh in self.shards:
            await trio.to_thread.run_sync(sh.open)
        front = JournalFront(self, list(self.shards), keyspacelog.SHARD, self.keyspace_class)
        self.check_writable = front.check_writable  # type: ignore[method-assign]  # Rule 6
        self.keyspace_changed = front.keyspace_changed  # type: ignore[method-assign]
        self.engine.journal = self
        self.opened = True
        for name, first, count in rec.voids:  # before any new write of the topic (rederive Rule 3)
            self._control(self.engine.topics[name], frames.T_LOSTRANGE,
                          {"first": first, "count": count, "void": True}, False)
        self._resolve_moves({img.name for img in rec.pending})
        return rec

    def _resolve_moves(self, pending: set[str]) -> None:
        """Interrupted dead-letter moves, judged once both topics' records are back."""
        finished, returned = queues.resolve_moves(self.engine, pending)
        if finished or returned:
            log.warning("recovery: %d interrupted dead-letter moves finished, %d jobs whose copy was "
                        "lost are back in their queue", finished, returned)

    async def recover_memory_topics(self) -> int:
        """Phase 2: rebuild memory-class topics that nobody touched since startup."""
        done = 0
        rec = self.recovered
        b = recovery.Builder(self.data_dir, self.cold_dir, self.ops, self.nshards, self.engine.now(), True)
        b.keep_leases = self.replica
        for img in self.pending:
            placeholder = self.engine.topics.get(img.name)
            if placeholder is None or placeholder.epoch != img.epoch or placeholder.appended_total:
                continue
            async with self.seg_lock:
                topic = await trio.to_thread.run_sync(b.build, img)
            if self.engine.topics.get(img.name) is placeholder and not placeholder.appended_total:
                topic.config = placeholder.config
                routerlog.carry(placeholder, topic)
                restore.install(self.engine, topic)
                for listener in self.engine.all_listeners():
                    listener(img.name)
                done += 1
        self.pending = []
        if rec is not None:
            rec.pending = []
        self._resolve_moves(set())  # moves of or into the memory-class topics just rebuilt
        return done

    # ---- Journal -----------------------------------------------------------------------------

    def _shard(self, topic: Topic) -> tuple[TState, Shard]:
        st = state_of(topic, self.nshards)
        return st, self.shards[st.shard]

    def check_writable(self, topic: Topic | None) -> None:
        """Rule 1 before the shards are open (a closed storage refuses); once they are, the
        instance's own answers (Rule 6: walqueue.JournalFront, which also asks the shards)."""
        if self.closed:
            raise TopicsError("shutting_down", SHUTTING_DOWN)

    def topic_upserted(self, topic: Topic) -> Token:
        _, sh = self._shard(topic)
        body = codec.encode_json({
            "name": topic.name, "epoch": topic.epoch, "type": topic.type, "seq_base": topic.seq_base,
            "created_ts": topic.created_ts, "config": restore.config_to_dict(topic.config)})
        commit = sh.enqueue(frames.encode(frames.T_TOPIC, body))
        return commit.token(policy_of(topic.config).ack == "fdatasync")  # always gated: Rule 2

    def topic_dropped(self, name: str, epoch: int) -> Token:
        from topicsrv.storage.state import shard_of

        sh = self.shards[shard_of(name, self.nshards)]
        commit = sh.enqueue(frames.encode(frames.T_DROP, codec.encode_json({"name": name, "epoch": epoch})))
        return commit.token(False)

    def appended(self, topic: Topic, first_seq: int, ts: int, blobs: list[bytes],
                 records: list[PreparedRecord]) -> Token | None:
        st, sh = self._shard(topic)
        pol = policy_of(topic.config)
        last = first_seq + len(blobs) - 1
        # a write registers for the writer's ceiling check (_ceilings) only when that check
        # could pass: the ceiling only ever grows, so what is skipped here it would skip too
        near = near_ceiling(st, last)
        if not pol.wal:
            if near:
                sh.want_ceiling(topic)
            if sh.tee is not None:  # a class without a WAL still replicates (repl/backlog.py)
                sh.tee.body(frames.T_APPEND, _append_body(topic, first_seq, ts, blobs, records))
            return None
        if pol.readable == "durable":
            topic.hide_from(first_seq)  # readable once durable (Topic Rule 6)
        rc = routerlog.rc_of(topic)
        body = _append_body(topic, first_seq, ts, blobs, records)
        if rc is None:
            frame = frames.encode(frames.T_APPEND, body)
        else:  # a router's dest: recovery merges the re-derived copies up to `rc` first
            frame = frames.encode(frames.T_APPEND_RC, body + codec.rc_trailer(rc))
        commit = sh.enqueue(frame, (topic, topic.epoch, first_seq, len(blobs), rc))
        if pol is DISK:
            routerlog.hold(topic, first_seq)  # routers forward it once durable (routerlog Rule 6)
        if pol.ceiling and near:
            sh.want_ceiling(topic)
        if pol.ack == "fdatasync":
            return commit.token(True)
        if pol.ack == "enqueue" and last > st.ceil_durable:
            return commit.token(False)
        return None

    def keyspace_changed(self, op: list[tuple[Any, ...]]) -> Token | None:
        """Rule 6: the instance's own journals the keyspace once the shards are open
        (walqueue.JournalFront); the engine's journal is this storage only from then on."""
        raise RuntimeError("a keyspace change reached a storage whose shards are not open")

    def _control(self, topic: Topic, ftype: int, obj: dict[str, Any], gated: bool) -> Token | None:
        _, sh = self._shard(topic)
        obj = {"name": topic.name, "epoch": topic.epoch, **obj}
        rc = routerlog.rc_of(topic)
        if rc is not None and "rc" not in obj:
            obj["rc"] = rc  # a router's dest: the frame's place among the re-derived copies
        commit = sh.enqueue(frames.encode(ftype, codec.encode_json(obj)))
        return commit.token(False) if gated else None

    def deleted(self, topic: Topic, selector: dict[str, Any], bound: int, wait: bool = True) -> Token | None:
        pol = policy_of(topic.config)
        if not pol.wal:
            return self._tee_only(topic, frames.T_DELETE, {"selector": selector, "bound": bound})
        obj: dict[str, Any] = {"selector": selector, "bound": bound}
        oc = routerlog.oc_of(topic)
        if oc is not None:
            obj["oc"] = oc  # which removed records its routers had forwarded (routerlog Rule 5)
        token = self._control(topic, frames.T_DELETE, obj, pol.deletes_gated and wait)
        self.flip_topics[id(topic)] = topic
        self.flip_wake.set()
        return token

    def trimmed(self, topic: Topic, new_front: int) -> Token | None:
        pol = policy_of(topic.config)
        if not pol.wal:
            return self._tee_only(topic, frames.T_TRIM, {"front": new_front})
        obj: dict[str, Any] = {"front": new_front}
        oc = routerlog.oc_of(topic)
        if oc is not None:
            obj["oc"] = oc
        return self._control(topic, frames.T_TRIM, obj, pol.trims_gated)

    def groups_changed(self, topic: Topic, change: dict[str, Any]) -> Token | None:
        """Consumer-group definitions are config-like: written at once and fsync-gated. The
        frame carries the change only (engine/groups/groupops.py), never the group's pending list."""
        return self._control(topic, frames.T_GROUPOP, {"op": change}, True)

    def stream_id_set(self, topic: Topic) -> Token | None:
        """XSETID: a T_XSETID frame, written at once and fsync-gated like a group change
        (config-like state, even for classes that log no records)."""
        return self._control(topic, frames.T_XSETID, {"last_id": list(topic.last_id)}, True)

    def idempotent(self, topic: Topic, op: dict[str, Any]) -> Token | None:
        """A T_IDMP frame. An add rides with its records (only classes that log them; it is
        enqueued just before their APPEND, so a torn WAL tail never keeps the key without
        the records, and recovery drops a key whose APPEND is missing); XCFGSET is
        config-like: written for every class and fsync-gated, like XSETID."""
        if "add" in op and not policy_of(topic.config).wal:
            return self._tee_only(topic, frames.T_IDMP, op)
        return self._control(topic, frames.T_IDMP, op, "cfg" in op)

    def leases_logged(self, topic: Topic, events: list[list[Any]]) -> Token | None:
        """A queue's leases log shares the topic's WAL shard (so its events and the jobs'
        deletes replay in order); fsync-gated only with `leases_durable` (seeds 10.1)."""
        if not policy_of(topic.config).wal:
            return self._tee_only(topic, frames.T_LEASES, {"ev": events})
        return self._control(topic, frames.T_LEASES, {"ev": events}, topic.config.leases_durable)

    def acked(self, topic: Topic, seqs: list[int], bound: int, events: list[list[Any]],
              wait: bool) -> Token | None:
        """A queue ack as one leases frame: its "A" event is also the jobs' delete (recovery
        deletes them before applying it, engine/queues/leases.py Rule 1), so a torn WAL tail keeps
        the delete and the acked events together or neither. Gated as the delete would be
        (`wait` on a class whose deletes are gated) or as durable leases are."""
        pol = policy_of(topic.config)
        if not pol.wal:
            return self._tee_only(topic, frames.T_LEASES, {"ev": events})
        gated = (pol.deletes_gated and wait) or topic.config.leases_durable
        token = self._control(topic, frames.T_LEASES, {"ev": events}, gated)
        self.flip_later(topic, seqs)
        return token

    def barrier(self, topic: Topic) -> Token | None:
        """The commit of everything enqueued for `topic` so far (its shard's open batch)."""
        if not policy_of(topic.config).wal:
            return None
        _, sh = self._shard(topic)
        if sh.group is not None and sh.group.owns(sh.index):
            return Token(sh.group.commit_for(sh.index, sh.batch.commit), False)
        if not sh.batch.frames:
            return None
        return sh.batch.commit.token(False)

    # ---- background tasks ----------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Writers, delete flips, periodic checkpoints and the cold relocator."""
        async with trio.open_nursery() as nursery:
            self.writers_running = True
            try:
                for sh in self.shards:
                    nursery.start_soon(sh.run)
                nursery.start_soon(self._flipper)
                nursery.start_soon(self._checkpointer)
                if self.cold_dir is not None:
                    nursery.start_soon(self._relocator)
                task_status.started()
                if self.pending:
                    n = await self.recover_memory_topics()
                    log.info("recovered %d memory-class topics", n)
                try:  # the WAL of the previous run is folded into segments and trimmed
                    await self.checkpoint()
                except OSError as exc:
                    log.error("startup checkpoint postponed: %s", exc)
                self.settled.set()
                await trio.sleep_forever()
            finally:
                self.writers_running = False

    # ---- shutdown ----------------------------------------------------------------------------------

    async def close(self) -> None:
        """Flush and fsync everything queued, write a final checkpoint, close the files. A
        commit group still open (a script running past the shutdown grace) is discarded
        first, and then no checkpoint is written (txgroup.py Rule 11)."""
        if self.closed or not self.opened:
            self.closed = True
            return
        self.discard_group()
        for sh in self.shards:
            await sh.drain()
        if self.discarded:
            log.warning("no final checkpoint: a discarded script's writes are in memory only; "
                        "the WAL holds everything acknowledged and is replayed at the next start")
        else:
            try:
                await self.checkpoint(final=True)
            except OSError as exc:
                log.error("final checkpoint failed (the WAL keeps everything acked): %s", exc)
        self.closed = True
        for sh in self.shards:
            sh.close()

    # ---- introspection -------------------------------------------------------------------------------

    def stats(self) -> dict[str, Any]:
        syncs = sum(sh.syncs for sh in self.shards)
        recs = sum(sh.records for sh in self.shards)
        return {
            "wal_shards": self.nshards,
            "wal_syncs": syncs,
            "wal_records": recs,
            "records_per_sync": recs / syncs if syncs else 0.0,
            "sync_ms_avg": sum(sh.sync_ms_total for sh in self.shards) / syncs if syncs else 0.0,
            "checkpoints": self.checkpoints,
            "writable": all(sh.unwritable is None for sh in self.shards),
        }



def _append_body(topic: Topic, first_seq: int, ts: int, blobs: list[bytes],
                 records: list[PreparedRecord]) -> bytes:
    """An APPEND frame's body; an ID-mapped topic's IDs ride along (codec)."""
    xids = None if topic.xid_since is None else \
        [xmod.xid_of(topic, s) for s in range(first_seq, first_seq + len(blobs))]
    return codec.encode_append_of(topic.name, topic.epoch, first_seq, ts, blobs, records, xids)


class _NotReady(NullJournal):
    """The journal while recovery runs: every mutation is refused with 503 (nothing else is
    ever reached: check_writable runs before any mutation, journal Rule 2)."""

    def check_writable(self, topic: Topic | None) -> None:
        raise TopicsError("not_ready", "the server is still recovering; retry shortly")
