"""Checkpoints: seal every slot into segment files, write checkpoint.json, trim the WAL.

Rule 1: the cut is one instant: every shard switches WAL generation together and the
snapshot is taken in the same loop step, so checkpoint.json plus the WAL generations after
the cut hold everything.
Rule 2: segment files are appended (never rewritten); stale and dropped ones are unlinked
only after the checkpoint naming their replacement is durable.
Rule 3: a topic's gaps with no record (Runs) are listed in its entry, never written slot by
slot.
Rule 4: one topic whose segments cannot be written never stops the others: it keeps its
previous entry (or just its config) with `replay_from`, the first WAL generation that entry
does not include; WAL generations from there are kept and replayed for it only, until a
checkpoint succeeds for it. Logged at ERROR each time.
Rule 5 (a full disk): checkpoint.json and the keyspace snapshot are written whole or not at
all (fsops.py Rule 3); when either fails the checkpoint raises with nothing changed: the old
checkpoint.json and the files it names stay, the new snapshot is removed, `entries` and
`ckpt_gen` are the old ones and no WAL generation is trimmed (the caller logs and retries).
"""

from __future__ import annotations

import logging
import shutil
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import trio

from topicsrv.engine import groups, restore
from topicsrv.engine.log import failover
from topicsrv.engine.log.segments import SEGMENT_RECORDS, Run, Segment
from topicsrv.engine.log.topic import Topic
from topicsrv.engine.queues import leases
from topicsrv.storage import (
    codec,
    forksave,
    images,
    keyspacelog,
    keyspacesave,
    routerlog,
    segfiles,
    thp,
)
from topicsrv.storage.fsops import OsOps
from topicsrv.storage.policy import policy_of
from topicsrv.storage.state import TState, state_of
from topicsrv.storage.wal import Shard, wal_path
from topicsrv.storage.walread import wal_files

if TYPE_CHECKING:
    from topicsrv.engine.core import Engine

log = logging.getLogger("topicsrv.storage")

Snap = list[tuple[Topic, TState, dict[str, Any], list[tuple[Any, int]]]]


class Checkpoints:
    """The checkpoint half of `Storage` (a mixin: it shares the storage's state)."""

    engine: Engine
    data_dir: Path
    cold_dir: Path | None
    nshards: int
    ops: OsOps
    shards: list[Shard]
    gen: int
    seg_lock: trio.Lock
    ckpt_lock: trio.Lock
    writers_running: bool
    checkpoints: int
    last_checkpoint_error: str | None
    entries: dict[str, tuple[dict[str, Any], int]]
    ckpt_gen: int
    keyspace_class: str
    saves: keyspacesave.Saves
    groups_closed: Callable[[], Awaitable[None]]  # txgroup.py Rule 12

    def _dir(self, st: TState, sf: segfiles.SegFile) -> Path:
        root = self.cold_dir if sf.cold and self.cold_dir is not None else self.data_dir
        return root / st.dir

    def _unlink_seg(self, st: TState, sf: segfiles.SegFile) -> None:
        d = self._dir(st, sf)
        self.ops.unlink(segfiles.data_path(d, sf.base))
        self.ops.unlink(segfiles.idx_path(d, sf.base))

    checkpoint_interval_s: float
    ckpt_wake: trio.Event

    # ---- checkpoint -----------------------------------------------------------------------------

    async def _checkpointer(self) -> None:
        """Every `checkpoint_interval_s`, or at once when `request` asks (BGSAVE)."""
        while True:
            with trio.move_on_after(self.checkpoint_interval_s):
                await self.ckpt_wake.wait()
            self.ckpt_wake = trio.Event()
            try:
                await self.checkpoint()
            except OSError as exc:
                self.last_checkpoint_error = str(exc)
                log.error("checkpoint failed (the WAL keeps everything; retrying later): %s", exc)

    def request(self, schedule: bool = False) -> bool:
        """A checkpoint now (BGSAVE), or once the running one ends (`schedule`: BGSAVE
        SCHEDULE); False, asking nothing, when one runs and `schedule` is not given."""
        if self.ckpt_lock.locked() and not schedule:
            return False
        self.ckpt_wake.set()
        return True

    async def checkpoint(self, final: bool = False,
                         capture: Callable[[], Any] | None = None) -> tuple[int, Any]:
        """Seal (persist every slot), write checkpoint.json, trim the WAL. `capture` (a full
        sync, storage/replsync.py Rule 1) runs in a worker thread once the checkpoint is
        written, still under the locks; returns the replication offset of the cut (the
        backlog's, wal.py Rule 10: the checkpoint holds exactly what was fed before it) and
        what `capture` returned."""
        async with self.ckpt_lock:
            fork = self.saves.fork and not final and forksave.available() \
                and (self.keyspace_class != "memory" or capture is not None)
            if fork:  # rdb_bgsave_in_progress from here: the collapse is part of the save
                self.saves.begun()
                try:
                    await trio.to_thread.run_sync(thp.collapse)  # thp.py: a shorter fork
                except BaseException:
                    self.saves.done(False)
                    raise
            try:
                async with self.seg_lock:
                    return await self._checkpoint(final, capture, fork)
            except BaseException:
                if self.saves.in_progress:  # stopped before the cut
                    self.saves.done(False)
                raise

    async def _checkpoint(self, final: bool, capture: Callable[[], Any] | None,
                          fork: bool) -> tuple[int, Any]:
        """`checkpoint`, under both locks; `fork`: the keyspace by a forked child."""
        await self.groups_closed()  # never a cut inside a script (txgroup.py Rule 12)
        gen = self.gen + 1
        for sh in self.shards:
            sh.target_gen = gen - 1
            sh.rotate()
        self.gen = gen
        snap = self._snapshot(final)
        tee = self.shards[0].tee if self.shards else None
        cut = tee.offset if tee is not None else 0  # same step as the snapshot and the rotation
        self.saves.begun()
        # keyspacesave.py Rules 0-1: the keyspace as it is now, by a forked child or read in
        # parts from here on; a `memory` keyspace is written only for a full sync
        # (storage/replsync.py Rule 5)
        snap_ks = None if self.keyspace_class == "memory" and capture is None \
            else keyspacesave.begin(self.engine.keyspace, self.data_dir, self.ops, gen,
                                    self.saves, fork)
        router_specs = routerlog.specs(self.engine)
        try:
            await self._finish(snap, gen, router_specs, snap_ks, final)
        except BaseException:
            self.saves.done(False)
            if isinstance(snap_ks, forksave.Child):  # never waited on: no zombie, no file
                await forksave.abandon(snap_ks, self.ops)
            raise
        finally:
            self.engine.keyspace.saving = None
        self.saves.done(True)
        self.checkpoints += 1
        captured = None if capture is None else await trio.to_thread.run_sync(capture)
        return cut, captured

    async def _finish(self, snap: Snap, gen: int, router_specs: list[dict[str, Any]],
                      snap_ks: keyspacesave.Pending | None, final: bool) -> None:
        for sh in self.shards:
            if self.writers_running and not final:
                await sh.rotated.wait()
            else:
                while sh.target_gen != sh.gen or sh.before_cut:
                    await sh.step()
                    if sh.unwritable:
                        break
                sh.rotated.set()
        if any(sh.unwritable or sh.gen != gen for sh in self.shards):
            raise OSError("the WAL is not writable; checkpoint postponed")
        for _topic, st, meta, _segs in snap:  # ceilings the old generation made durable
            if not final and policy_of(restore.config_from_dict(meta["config"])).ceiling:
                meta["ceiling"] = max(meta["ceiling"], st.ceil_durable)
        ks_file = "" if snap_ks is None else await keyspacesave.write(
            snap_ks, self.data_dir, self.ops, gen, self.saves)
        try:
            await trio.to_thread.run_sync(self._write_checkpoint, snap, gen, router_specs, ks_file)
        except BaseException:
            if ks_file:  # Rule 5: named by no checkpoint
                self.ops.unlink(self.data_dir / ks_file)
            raise

    def _snapshot(self, final: bool) -> Snap:
        out = []
        for topic in list(self.engine.topics.values()):
            st = state_of(topic, self.nshards)
            pol = policy_of(topic.config)
            head = topic.next_seq - 1
            meta: dict[str, Any] = {
                "name": topic.name, "epoch": topic.epoch, "type": topic.type, "seq_base": topic.seq_base,
                "created_ts": topic.created_ts, "config": restore.config_to_dict(topic.config),
                "next_seq": topic.next_seq, "front": topic.front, "floors": dict(topic.floors),
                "delete_below": topic.delete_below, "last_ts": topic.last_ts,
                "lost_total": topic.lost_total,
                "ceiling": head,
            }
            if topic.xid_since is not None:  # an ID-mapped topic (engine/log/xids.py)
                meta["xid_since"] = topic.xid_since
                meta["last_id"] = list(topic.last_id)
            if not topic.idempotency.is_default():  # hits only where records persist
                idem = topic.idempotency.snapshot()
                if not pol.wal:
                    del idem["hits"]
                meta["idmp"] = idem
            snap_groups = groups.snapshot(topic)
            if snap_groups:
                meta["groups"] = snap_groups
            if topic.type == "queue" and leases.EXT_KEY in topic.ext:
                meta["queue"] = leases.snapshot(topic.ext[leases.EXT_KEY])
            if failover.KEY in topic.ext:  # engine/log/failover.py Rule 2
                meta["failover"] = [list(g) for g in topic.ext[failover.KEY]]
            # a dest's cursor in the same step as its slots: they always match (routerlog Rule 4)
            meta.update(routerlog.entry_fields(topic))
            segs: list[tuple[Any, int]] = []
            if pol.wal:
                segs = [(seg, len(seg)) for seg in topic.segs if isinstance(seg, Segment)]
                runs = [[r.base, len(r), r.flag, r.ts.value] for r in topic.segs if isinstance(r, Run)]
                if runs:
                    meta["runs"] = runs
            out.append((topic, st, meta, segs))
        return out

    def _persist(self, st: TState, segs: list[tuple[Any, int]],
                 stale: list[tuple[TState, segfiles.SegFile]], limit: int | None = None) -> list[list[Any]]:
        """Append a topic's new slots to its segment files; its checkpoint `files` list.
        `limit`: deleted slots above it stay live on disk (a router source: routerlog Rule 5)."""
        live_keys = set()
        for seg, upto in segs:
            key = seg.base // SEGMENT_RECORDS
            live_keys.add(key)
            if key in st.dead:
                continue
            sf = st.files.get(key)
            if sf is not None and sf.base != seg.base:
                stale.append((st, sf))
                sf = None
            if sf is None or sf.count < upto:
                d = self._dir(st, sf) if sf is not None else self.data_dir / st.dir
                sf = segfiles.append_slots(self.ops, d, sf, seg, upto)
                st.files[key] = sf
            segfiles.flip(self.ops, self._dir(st, sf), sf, segfiles.to_flip(seg, sf, limit))
        files = []
        for key in sorted(live_keys | st.dead):
            if key in st.dead and key in live_keys:
                files.append([self._dead_base(segs, key), self._dead_count(segs, key), False, True])
            elif key in st.files and key in live_keys:
                sf = st.files[key]
                files.append([sf.base, min(sf.count, self._upto(segs, key)), sf.cold, False])
        for key in [k for k in st.files if k not in live_keys]:
            stale.append((st, st.files.pop(key)))
        st.dead &= live_keys
        return files

    def _fallback(self, meta: dict[str, Any], exc: OSError) -> tuple[dict[str, Any], int]:
        """The entry of a topic whose segments could not be written (Rule 4): its entry from the
        last checkpoint (or just its config, for a topic created since), replayed from the WAL
        generation that entry was cut at; the WAL is kept from there."""
        name = meta["name"]
        prev = self.entries.get(name)
        if prev is not None and prev[0]["epoch"] == meta["epoch"]:
            entry, start = prev
        else:
            keep = ("name", "epoch", "type", "seq_base", "created_ts", "config")
            entry = {**{k: meta[k] for k in keep}, "next_seq": meta["seq_base"], "ceiling": 0,
                     "files": [], "dir": meta["dir"]}
            start = self.ckpt_gen
        log.error("checkpoint: topic %s could not be checkpointed (%s); its records stay in the WAL "
                  "(replayed from generation %d, kept until it succeeds); every other topic was "
                  "checkpointed", name, exc, start)
        return {**entry, "replay_from": start}, start

    def _write_checkpoint(self, snap: Snap, gen: int, router_specs: list[dict[str, Any]] | None = None,
                          ks_file: str = "") -> None:
        """Rule 4: one topic's failure (its segment files cannot be written) never stops the
        checkpoint of the others."""
        stale: list[tuple[TState, segfiles.SegFile]] = []
        done: dict[str, tuple[dict[str, Any], int]] = {}
        failed = []
        for _topic, st, meta, segs in snap:
            mine: list[tuple[TState, segfiles.SegFile]] = []
            try:
                files = self._persist(st, segs, mine, meta.get("dfloor"))
            except OSError as exc:
                done[meta["name"]] = self._fallback({**meta, "dir": st.dir}, exc)
                failed.append(f"{meta['name']}: {exc}")
                continue
            stale += mine
            done[meta["name"]] = ({**meta, "files": files, "dir": st.dir}, gen)
        entries = [e for e, _ in done.values()]
        epochs = dict(self.engine.epochs)
        ck = {"version": 1, "wal_gen": gen, "written_at": time.time(), "topics": entries, "epochs": epochs,
              "routers": router_specs or []}
        if ks_file:  # keyspacelog.py Rule 3: the file first, then its name
            ck["keyspace" if self.keyspace_class != "memory" else "keyspace_for_replicas"] = ks_file
        self.ops.write_file(self.data_dir / images.CHECKPOINT, codec.encode_json(ck))
        keyspacelog.remove_old(self.data_dir, self.ops, ks_file)
        self.entries = done
        self.ckpt_gen = gen
        for _topic, st, meta, _segs in snap:
            if done[meta["name"]][1] == gen:  # written: its cut now bounds the flips
                st.rcut = st.rcut_next
        self.last_checkpoint_error = "; ".join(failed) if failed else None
        for st, sf in stale:
            self._unlink_seg(st, sf)
        self._remove_unreferenced_dirs({e["dir"] for e in entries})
        keep_from = min([gen, *(start for _, start in done.values())])
        for g, shard, path in wal_files(self.data_dir / "wal"):
            if g < keep_from and path != wal_path(self.data_dir / "wal", shard, gen):
                self.ops.unlink(path)

    @staticmethod
    def _upto(segs: list[tuple[Any, int]], key: int) -> int:
        for seg, upto in segs:
            if seg.base // SEGMENT_RECORDS == key:
                return upto
        return 0

    @staticmethod
    def _dead_base(segs: list[tuple[Any, int]], key: int) -> int:
        for seg, _ in segs:
            if seg.base // SEGMENT_RECORDS == key:
                return int(seg.base)
        return key * SEGMENT_RECORDS

    @staticmethod
    def _dead_count(segs: list[tuple[Any, int]], key: int) -> int:
        for seg, upto in segs:
            if seg.base // SEGMENT_RECORDS == key:
                return upto
        return SEGMENT_RECORDS

    def _remove_unreferenced_dirs(self, keep: set[str]) -> None:
        for root in [self.data_dir] + ([self.cold_dir] if self.cold_dir is not None else []):
            tdir = root / "topics"
            if not tdir.exists():
                continue
            for d in tdir.iterdir():
                if f"topics/{d.name}" not in keep:
                    shutil.rmtree(d, ignore_errors=True)
