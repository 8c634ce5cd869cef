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
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import trio

from topicsrv.engine import restore
from topicsrv.engine.config import SEQ_MAX
from topicsrv.engine.groups import groupops
from topicsrv.engine.journal import NullJournal
from topicsrv.engine.keyspace import ops as ks_ops
from topicsrv.engine.log import xids as xmod
from topicsrv.engine.log.segments import DELETED, LOST
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
from topicsrv.storage.segtasks import SegTasks
from topicsrv.storage.startup import Startup
from topicsrv.storage.state import HEADROOM, TState, near_ceiling, state_of
from topicsrv.storage.wal import Batch, Shard, Token, storage_error
from topicsrv.storage.walread import RESERVE_MAX

if TYPE_CHECKING:
    from topicsrv.engine.core import Engine
    from topicsrv.engine.log.records import PreparedRecord

log = logging.getLogger("topicsrv.storage")

class Storage(Startup, txgroup.GroupJournal, routerlog.RouterJournal, SegTasks):
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
        if self.closed:
            raise TopicsError("shutting_down", "the server is shutting down; retry on the next instance")
        for sh in self.shards:
            if sh.unwritable is not None:
                raise storage_error(sh.unwritable)

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
                xids = None if topic.xid_since is None else \
                    [xmod.xid_of(topic, s) for s in range(first_seq, last + 1)]
                sh.tee.body(frames.T_APPEND, codec.encode_append_of(
                    topic.name, topic.epoch, first_seq, ts, blobs, records, xids))
            return None
        if pol.readable == "durable":
            topic.hide_from(first_seq)  # readable once durable (Topic Rule 6)
        rc = routerlog.rc_of(topic)
        xids = None
        if topic.xid_since is not None:  # an ID-mapped topic: the IDs ride along (codec)
            xids = [xmod.xid_of(topic, s) for s in range(first_seq, last + 1)]
        body = codec.encode_append_of(topic.name, topic.epoch, first_seq, ts, blobs, records, xids)
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
        """One keyspace operation under the keyspace's class (keyspacelog.py Rules 1-2)."""
        if self.keyspace_class == "memory":
            tee = self.shards[keyspacelog.SHARD].tee
            if tee is not None:  # replicated all the same (repl/backlog.py)
                tee.body(frames.T_KEYSPACE, ks_ops.encode(op))
            return None
        commit = self.shards[keyspacelog.SHARD].enqueue_body(frames.T_KEYSPACE, ks_ops.encode(op))
        return Token(commit, True) if self.keyspace_class == "fsync" else None

    def _control(self, topic: Topic, ftype: int, obj: dict[str, Any], gated: bool) -> Token | None:
        _, sh = self._shard(topic)
        obj = {"name": topic.name, "epoch": topic.epoch, **obj}
        rc = routerlog.rc_of(topic)
        if rc is not None and "rc" not in obj:
            obj["rc"] = rc  # a router's dest: the frame's place among the re-derived copies
        commit = sh.enqueue(frames.encode(ftype, codec.encode_json(obj)))
        return commit.token(False) if gated else None

    def _tee_only(self, topic: Topic, ftype: int, obj: dict[str, Any]) -> Token | None:
        """A change of a class that writes no WAL: the frame it would be, for the replicas only."""
        tee = self.shards[0].tee if self.shards else None
        if tee is not None:
            tee.body(ftype, codec.encode_json({"name": topic.name, "epoch": topic.epoch, **obj}))
        return None

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

    # ---- a replica's copy of its primary's frames (storage/replapply.py) ---------------------

    def replicated_append(self, topic: Topic, body: bytes, first: int, n: int) -> None:
        """The primary's APPEND, written to this replica's WAL as `appended` writes its own."""
        st, sh = self._shard(topic)
        pol = policy_of(topic.config)
        last = first + n - 1
        near = near_ceiling(st, last)
        if pol.wal:
            if pol.readable == "durable":
                topic.hide_from(first)  # readable once durable here too (Topic Rule 6)
            sh.enqueue(frames.encode(frames.T_APPEND, body), (topic, topic.epoch, first, n, None))
        if near and (pol.ceiling or not pol.wal):
            sh.want_ceiling(topic)

    def replicated(self, topic: Topic, ftype: int, body: bytes, d: dict[str, Any]) -> None:
        """The primary's control frame, written as this replica's own journal would write it:
        config-like frames always, the others where the class keeps a WAL."""
        config_like = ftype in (frames.T_GROUPOP, frames.T_GROUPS, frames.T_XSETID) or \
            (ftype == frames.T_IDMP and "cfg" in d)
        if not config_like and not policy_of(topic.config).wal:
            return
        _, sh = self._shard(topic)
        sh.enqueue(frames.encode(ftype, body))
        if ftype == frames.T_DELETE:
            self.flip_topics[id(topic)] = topic
            self.flip_wake.set()
        elif ftype == frames.T_LEASES:
            seqs = [s for ev in d["ev"] if ev[0] == "A" for s in ev[2]]
            if seqs:
                self.flip_later(topic, seqs)

    # ---- writer callbacks --------------------------------------------------------------------

    def _ceilings(self, sh: Shard) -> list[tuple[bytes, Any]]:
        out: list[tuple[bytes, Any]] = []
        for topic in sh.ceil_topics.values():
            if not self._current(topic) or not policy_of(topic.config).ceiling:
                continue
            st = state_of(topic, self.nshards)
            head = topic.next_seq - 1
            if not near_ceiling(st, head):
                continue
            # the reservation follows the write rate, within [HEADROOM, RESERVE_MAX] (a bound
            # recovery relies on after WAL damage: walread.Cut), and never passes SEQ_MAX
            new = min(SEQ_MAX, head + min(max(HEADROOM, head - st.ceil_head), RESERVE_MAX))
            if new <= st.ceil_durable:
                continue
            body = codec.encode_json({"name": topic.name, "epoch": topic.epoch, "ceiling": new})

            def done(st: TState = st, new: int = new, head: int = head) -> None:
                st.ceil_durable = max(st.ceil_durable, new)
                st.ceil_head = head

            out.append((frames.encode(frames.T_CEIL, body), done))
        sh.ceil_topics.clear()
        return out

    def groups_changed(self, topic: Topic, change: dict[str, Any]) -> Token | None:
        """Consumer-group definitions are config-like: written at once and fsync-gated. The
        frame carries the change only (engine/groups/groupops.py), never the group's pending list."""
        return self._control(topic, frames.T_GROUPOP, {"op": change}, True)

    def stream_id_set(self, topic: Topic) -> Token | None:
        """XSETID: a T_XSETID frame, written at once and fsync-gated like a group change
        (config-like state, even for classes that log no records)."""
        return self._control(topic, frames.T_XSETID, {"last_id": list(topic.last_id)}, True)

    def failover_gap(self, topic: Topic, first: int, count: int) -> None:
        """A T_LOSTRANGE marked `failover`, for every class: the gap outlives a crash of the
        new primary, and its replicas open the same gap (engine/log/failover.py Rule 2)."""
        obj = {"first": first, "count": count, "failover": True}
        if policy_of(topic.config).wal:
            self._control(topic, frames.T_LOSTRANGE, obj, False)
        else:
            self._tee_only(topic, frames.T_LOSTRANGE, obj)

    def group_progress(self, topic: Topic, group: Any, consumers: Iterable[str],
                       seqs: Iterable[int]) -> None:
        """For replicas only (engine/groups/groupops.py Rule 3): built only when one listens."""
        tee = self.shards[0].tee if self.shards else None
        if tee is not None:
            tee.body(frames.T_GROUPPROG, codec.encode_json({
                "name": topic.name, "epoch": topic.epoch,
                "op": groupops.progress(group, consumers, seqs)}))

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

    def _wake(self, name: str) -> None:
        for listener in self.engine.all_listeners():
            listener(name)

    def _reveal(self, topic: Topic, upto: int) -> None:
        # a topic whose class stopped hiding records meanwhile has nothing left to hide;
        # router copies appended behind a hidden write are revealed with it (routerlog.py)
        upto = routerlog.reveal_upto(topic, upto)
        if topic.reveal(upto if policy_of(topic.config).readable == "durable" else topic.next_seq):
            self.engine.notify(topic.name)  # held while a script runs (engine/core.py Rule 3)

    def _durable(self, batch: Batch) -> None:
        """A batch is durable: its hidden (fsync-class) records become readable."""
        for topic, epoch, first, count, _rc in batch.ranges:
            if routerlog.release(topic, first + count):
                self._wake(topic.name)
            if topic.visible_next is not None and topic.epoch == epoch and self._current(topic):
                self._reveal(topic, first + count)

    def _failed(self, batch: Batch) -> None:
        """A batch could not be made durable. Records readers could already see (disk and
        memory classes, acknowledged on enqueue) become LOST: a reader crossing them gets a
        `lost` tombstone. Hidden fsync-class records were never readable nor acknowledged
        (their writers get 507), so their seqs are skipped silently. Seqs are never reused."""
        for topic, epoch, first, count, rc in batch.ranges:
            if routerlog.release(topic, first + count):
                self._wake(topic.name)
            if topic.epoch != epoch or not self._current(topic):
                continue
            hidden = topic.visible_next is not None and first >= topic.visible_next
            n = restore.mark_lost(topic, first, count, DELETED if hidden else LOST)
            sh = self.shards[state_of(topic, self.nshards).shard]
            lost: dict[str, Any] = {"name": topic.name, "epoch": epoch, "first": first, "count": count,
                                    "silent": hidden}
            if rc is not None:
                lost["rc"] = rc
            sh.retry.append(frames.encode(frames.T_LOSTRANGE, codec.encode_json(lost)))
            if hidden:
                log.error("topic %s: seqs %d..%d could not be made durable; their writes failed "
                          "(507) and the seqs are skipped", topic.name, first, first + count - 1)
                self._reveal(topic, first + count)
                continue
            log.error("topic %s: seqs %d..%d could not be made durable; %d records marked lost",
                      topic.name, first, first + count - 1, n)
            self.engine.notify(topic.name)

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

    async def stop_for_resync(self) -> None:
        """A replica is about to replace its files with its primary's (tasks/replica.py Rule 2):
        every write is refused from now on, what is queued is written, the files are closed;
        no checkpoint (the process restarts on the primary's)."""
        self.closed = True
        async with self.ckpt_lock, self.seg_lock:
            for sh in self.shards:
                await sh.drain()
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



class _NotReady(NullJournal):
    """The journal while recovery runs: every mutation is refused with 503 (nothing else is
    ever reached: check_writable runs before any mutation, journal Rule 2)."""

    def check_writable(self, topic: Topic | None) -> None:
        raise TopicsError("not_ready", "the server is still recovering; retry shortly")
