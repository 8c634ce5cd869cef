"""Recovery: checkpoint + segment files + WAL replay -> topics (runs in a worker thread).

What it starts from (checkpoint.json read and checked, the WAL frames gathered per topic as
`Image`s, WAL damage applied) is storage/images.py; this module builds each topic from its
image (`Builder`) and drives the whole recovery (`recover`). Order per topic: the
checkpointed state, then the slots of its segment files (only as many per file as the
checkpoint recorded) and its Runs (gaps with no record), then its WAL frames after its
replay point, in order.

Rule 1: a torn or checksum-failing WAL frame ends replay of that shard at the last good
frame (walread.py). Never a crash, never a skipped good frame before the damage.
Rule 2: a damaged segment frame makes its slot LOST and is reported; good records are kept.
A missing .idx (or a stale one) is rebuilt from the .data frames.
Rule 3: `next_seq = max(recovered head, checkpointed head, HeadWatermark ceiling) + 1` for
fsync/disk/ephemeral topics; seqs in (recovered head, ceiling] come back as LOST slots (one
Run whatever their number: memory is O(records), never O(seq range)).
Rule 4: memory-class topics are installed as empty placeholders first (config, epoch, seqs
above anything seen) and rebuilt afterwards, so they never block readiness.
Rule 5: a topic of a shard whose WAL was damaged continues above everything the cut-off
bytes still show, plus a margin for what they no longer show (walread.Cut), for every
class; the skipped seqs are LOST (readers crossing them get a `lost` tombstone), and the
damage is logged at ERROR naming the file, the offset and the topics affected.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from topicsrv.engine import groups, restore
from topicsrv.engine.config import SEQ_MAX
from topicsrv.engine.groups import groupops
from topicsrv.engine.log import deletes, failover
from topicsrv.engine.log import idempotency as idem
from topicsrv.engine.log import xids as xmod
from topicsrv.engine.log.segments import DELETED, LIVE, LOST, SEGMENT_RECORDS
from topicsrv.engine.log.topic import Topic
from topicsrv.engine.queues import leases
from topicsrv.engine.routing import gaphops
from topicsrv.storage import codec, frames, segfiles
from topicsrv.storage.fsops import OsOps
from topicsrv.storage.images import Image, apply_cuts, build_images, read_checkpoint, replay_from
from topicsrv.storage.policy import policy_of
from topicsrv.storage.progress import Progress
from topicsrv.storage.state import EXT_KEY, TState, shard_of
from topicsrv.storage.walread import read_wal

log = logging.getLogger("topicsrv.storage")


@dataclass
class Recovered:
    topics: list[Topic] = field(default_factory=list)
    pending: list[Image] = field(default_factory=list)
    epochs: dict[str, int] = field(default_factory=dict)
    entries: dict[str, dict[str, Any]] = field(default_factory=dict)  # the checkpoint's, by name
    ckpt_gen: int = 0  # the checkpoint's wal_gen
    next_gen: int = 1
    damage: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    records: int = 0
    seconds: float = 0.0
    routers: list[Any] = field(default_factory=list)  # engine.routers.Router, linked to `topics`
    rederived: int = 0  # router copies re-derived (rederive.py)
    voids: list[tuple[str, int, int]] = field(default_factory=list)  # (topic, first, count): rederive Rule 3
    # the keyspace (storage/keyspacelog.py replays it): the checkpoint's file, the WAL's frames
    keyspace_file: str | None = None
    keyspace: list[memoryview] = field(default_factory=list)



class Builder:
    def __init__(self, data_dir: Path, cold_dir: Path | None, ops: OsOps, shards: int, now: int,
                 repair: bool, progress: Progress | None = None) -> None:
        self.data_dir = data_dir
        self.cold_dir = cold_dir
        self.ops = ops
        self.shards = shards
        self.now = now
        self.repair = repair
        self.damage: list[str] = []
        self.progress = progress or Progress()
        # replays a source's DELETE/TRIM frame that carries `oc` (rederive.py keeps aside the
        # records it removes: storage/removed.py); None: apply it as any other frame
        self.on_remove: Callable[[Topic, int, dict[str, Any], Callable[[], None]], None] | None = None
        # (id(topic), first seq) -> an idempotency key waiting for its APPEND (T_IDMP)
        self.idmp_pending: dict[tuple[int, int], dict[str, Any]] = {}
        # a replica's leases are its primary's, alive in the primary's process: they are not
        # released at its start as this process's own non-durable leases are (tasks/replica.py)
        self.keep_leases = False

    @property
    def records(self) -> int:
        return self.progress.records

    def _file(self, rel: str, base: int, cold: bool) -> tuple[Path, Path] | None:
        roots = [self.data_dir] + ([self.cold_dir] if self.cold_dir is not None else [])
        for root in roots:
            d = root / rel
            if segfiles.data_path(d, base).exists():
                return segfiles.data_path(d, base), segfiles.idx_path(d, base)
        return None

    def placeholder(self, img: Image) -> Topic:
        ck = img.ckpt or {}
        start = max(img.seq_base, ck.get("next_seq", 0), img.max_seq + 1, img.skip_to)
        topic = restore.new_topic(img.name, img.epoch, img.type, restore.config_from_dict(img.config),
                                  img.seq_base, img.created_ts, start=start)
        topic.ext[EXT_KEY] = TState(shard_of(img.name, self.shards), img.dir)
        return topic

    def build(self, img: Image) -> Topic:
        topic, st, done = self.load(img)
        if not done:
            for ftype, body in img.ops:
                self._apply(topic, st, ftype, body)
            self.finalize(img, topic, st)
        return topic

    def load(self, img: Image) -> tuple[Topic, TState, bool]:
        """The checkpointed state of `img` with its segment files and Runs, before its WAL
        frames; True when that is all there is to it (a config-only class)."""
        ck = img.ckpt or {}
        cfg = restore.config_from_dict(img.config)
        pol = policy_of(cfg)
        st = TState(shard_of(img.name, self.shards), img.dir)
        ceiling = max(img.ceiling, ck.get("ceiling", 0))
        if pol.recovery == "config_only":
            nxt = max(img.seq_base, ck.get("next_seq", 0), ceiling + 1, img.skip_to)
            topic = restore.new_topic(img.name, img.epoch, img.type, cfg, img.seq_base, img.created_ts, start=nxt)
            # readers below the old head get a `lost` tombstone
            lost = {"lost": nxt - 1} if nxt - 1 >= img.seq_base else {}
            restore.finish(topic, next_seq=nxt, front=0, floors=lost, delete_below=0,
                           last_ts=ck.get("last_ts", 0), now=self.now)
            st.ceil_durable = st.ceil_head = nxt - 1
            topic.ext[EXT_KEY] = st
            groups.restore(topic, ck.get("groups"))
            if ck.get("xid_since") is not None:  # new IDs stay above the old ones
                topic.xid_since = int(ck["xid_since"])
                topic.last_id = (int(ck["last_id"][0]), int(ck["last_id"][1]))
            topic.idempotency.restore(ck.get("idmp"), with_hits=False)
            for ftype, body in img.ops:  # records are gone by design; group definitions are not
                if ftype in (frames.T_GROUPS, frames.T_GROUPOP, frames.T_XSETID, frames.T_IDMP):
                    self._apply(topic, st, ftype, body)
            if img.type == "queue":
                leases.restore(topic, None)
            return topic, st, True
        files = ck.get("files", [])
        dropped = set()
        for ftype, body in img.ops:
            if ftype == frames.T_SEGDROP:
                dropped.add(int(codec.decode_json(body)["base"]))
        # segment files and Runs (gaps without records), in seq order
        parts = sorted([(f[0], 0, f) for f in files] + [(r[0], 1, r) for r in ck.get("runs", [])])
        start = parts[0][0] if parts else ck.get("next_seq", img.seq_base)
        topic = restore.new_topic(img.name, img.epoch, img.type, cfg, img.seq_base, img.created_ts, start=start,
                                  front=ck.get("front", 0))
        groups.restore(topic, ck.get("groups"))
        topic.idempotency.restore(ck.get("idmp"))
        if ck.get("xid_since") is not None:  # an ID-mapped topic (engine/log/xids.py)
            topic.xid_since = int(ck["xid_since"])
        if img.type == "queue":
            leases.restore(topic, ck.get("queue"))
        if ck.get("hops"):  # hop counts of a router source's copies above its cursors
            topic.ext["hops"] = {int(seq): int(hop) for seq, hop in ck["hops"]}
        if ck.get("failover"):  # the gaps promotions left (engine/log/failover.py Rule 2)
            topic.ext[failover.KEY] = [[int(a), int(b)] for a, b in ck["failover"]]
        if ck.get("ghops"):  # and of its gaps (engine/routing/gaphops.py)
            topic.ext[gaphops.KEY] = [[int(a), int(b), int(h)] for a, b, h in ck["ghops"]]
        for _, kind, part in parts:
            if kind:
                base, n, flag, ts = part
                restore.put_run(topic, int(base), int(n), int(flag), int(ts))
            else:
                base, count, cold, dead = part
                self._load_file(topic, st, base, count, cold, dead or base in dropped)
        for first, last in ck.get("dels", []):  # a router source's deletes not flipped on disk
            restore.mark_lost(topic, int(first), int(last) - int(first) + 1, DELETED)
        if ck.get("last_id") is not None:  # XSETID may have set it above (or below) the slots
            xmod.set_last_id(topic, (int(ck["last_id"][0]), int(ck["last_id"][1])))
        return topic, st, False

    @staticmethod
    def final_next(img: Image, topic: Topic) -> int:
        """The next_seq `finalize` gives `topic` (Rule 3): above everything known."""
        ck = img.ckpt or {}
        nxt = max(topic.next_seq, ck.get("next_seq", 0), img.skip_to)
        if policy_of(topic.config).ceiling:
            nxt = max(nxt, img.ceiling + 1, ck.get("ceiling", 0) + 1)
        return min(nxt, SEQ_MAX + 1)

    def finalize(self, img: Image, topic: Topic, st: TState) -> None:
        """After every WAL frame: next_seq above everything known, watermarks, the gap."""
        ck = img.ckpt or {}
        cfg = topic.config
        pol = policy_of(cfg)
        nxt = self.final_next(img, topic)
        # a class whose readers only ever saw durable seqs (Topic Rule 6; `crash_gap` None):
        # when the WAL ended cleanly, the unused part of the reserved ceiling hides nothing
        # anyone read or was acknowledged, so it is skipped silently. For the other classes,
        # or after WAL damage (frames cut off there may have been acknowledged), it is LOST.
        silent = pol.crash_gap is None and not img.damaged
        restore.finish(topic, next_seq=nxt, front=ck.get("front", 0), floors=ck.get("floors", {}),
                       delete_below=ck.get("delete_below", 0), last_ts=ck.get("last_ts", 0), now=self.now,
                       gap_flag=DELETED if silent else LOST, lost_total=ck.get("lost_total", 0))
        st.ceil_durable = st.ceil_head = topic.next_seq - 1
        topic.ext[EXT_KEY] = st
        if img.type == "queue" and not cfg.leases_durable and not self.keep_leases:
            # non-durable leases end with the process: their jobs are claimable at once
            # (seeds 10.6; docs/decisions.md), delivery counts are kept
            leases.release_all(leases.state_of(topic), self.now)

    def _load_file(self, topic: Topic, st: TState, base: int, count: int, cold: bool, dead: bool) -> None:
        key = base // SEGMENT_RECORDS
        if dead:
            for seq in range(base, base + count):
                restore.put_slot(topic, seq, topic.last_ts, None, 0, None, None, DELETED)
            st.dead.add(key)
            return
        paths = self._file(st.dir, base, cold)
        if paths is None:
            self.damage.append(f"{st.dir}: segment {base} ({count} slots) is missing; its seqs are LOST")
            restore.fill_lost(topic, base + count, topic.last_ts)
            return
        data, idx = paths
        loaded = segfiles.load(data, idx, base)
        for msg in loaded.damage:
            self.damage.append(f"{st.dir}/{msg}")
        slots = loaded.slots[:count]
        for seq, ts, blob, size, node, tag, flag, xid in slots:
            restore.put_slot(topic, seq, ts, blob, size, node, tag, flag, xid)
        self.progress.records += len(slots)
        if len(slots) < count:
            restore.fill_lost(topic, base + count, topic.last_ts)
        sf = loaded.sf
        end = sf.offsets[count] if sf.count > count else sf.size
        del sf.offsets[count:]
        del sf.dead[count:]
        sf.size = end
        sf.cold = data.parent != self.data_dir / st.dir
        st.files[key] = sf
        if self.repair:
            if data.stat().st_size != end:
                fd = self.ops.open_rw(data)
                try:
                    self.ops.ftruncate(fd, end)
                    self.ops.fsync(fd)
                finally:
                    self.ops.close(fd)
            if loaded.idx_problem is not None or loaded.truncate_at is not None or sf.count != len(loaded.slots):
                if loaded.idx_problem:
                    log.warning("%s/%s: rebuilt from the .data frames", st.dir, loaded.idx_problem)
                self.ops.write_file(idx, segfiles.encode_idx(base, sf.offsets))
        self.progress.tick()

    def _apply(self, topic: Topic, st: TState, ftype: int, body: memoryview) -> None:
        self.progress.frames_done += 1
        if ftype in frames.RECORD_FRAMES:
            _, _, first, ts, n, pos = codec.append_header(body)
            xids = codec.append_xids(body, pos, n, ftype == frames.T_APPEND_RC)
            for i, (blob, size, node, tag) in enumerate(codec.append_items(body, pos, n)):
                restore.put_slot(topic, first + i, ts, blob, size, node, tag, LIVE,
                                 None if xids is None else xids[i])
            add = self.idmp_pending.pop((id(topic), first), None)
            if add is not None:  # its key, journaled just before (engine/log/idempotency.py Rule 6)
                pid, iid, hit = idem.hit_from_json(add)
                topic.idempotency.add(pid, iid, replace(hit, ts=ts, earliest=topic.earliest_seq), self.now)
            self.progress.records += n
            self.progress.tick()
            return
        d = codec.decode_json(body)
        if ftype in (frames.T_DELETE, frames.T_TRIM):
            if self.on_remove is not None and "oc" in d:
                self.on_remove(topic, ftype, d, lambda: remove(topic, ftype, d, self.now))
            else:
                remove(topic, ftype, d, self.now)
        elif ftype == frames.T_IDMP and "add" in d:  # an idempotency key waits for its APPEND
            self.idmp_pending[(id(topic), int(d["add"]["seq"]))] = d["add"]
        elif ftype == frames.T_LOSTRANGE and d.get("void"):  # a crash gap routers skip (rederive Rule 3)
            first, count = int(d["first"]), int(d["count"])
            if topic.next_seq < first + count:
                restore.fill_lost(topic, first + count, topic.last_ts)
            gaphops.add(topic, first, count, gaphops.VOID)
        elif ftype == frames.T_SEGDROP:
            base = int(d["base"])
            restore.drop_segment(topic, base)
            st.dead.add(base // SEGMENT_RECORDS)
            st.files.pop(base // SEGMENT_RECORDS, None)
        else:
            redo(topic, ftype, d, self.now)


def remove(topic: Topic, ftype: int, d: dict[str, Any], now: int) -> None:
    """A DELETE or TRIM frame's effect."""
    if ftype == frames.T_TRIM:
        topic.drop_front(int(d["front"]), "cap")
        return
    sel, bound = d["selector"], int(d["bound"])
    if "seqs" in sel:
        deletes.delete_seqs(topic, now, [s for s in sel["seqs"] if s < bound])
    else:
        before = sel.get("before_seq")
        hi = bound if before is None else min(int(before), bound)
        match = deletes.parse_match(sel["match"]) if "match" in sel else None
        deletes.delete(topic, now, hi, match)


def redo(topic: Topic, ftype: int, d: dict[str, Any], now: int) -> bool:
    """The effect of one control frame on `topic`, for recovery and for a replica applying its
    primary's frames live (storage/replapply.py); False for a type this does not apply."""
    if ftype in (frames.T_DELETE, frames.T_TRIM):
        remove(topic, ftype, d, now)
    elif ftype == frames.T_GROUPS:  # a whole snapshot (written by older versions)
        groups.restore(topic, d.get("groups"))
    elif ftype == frames.T_XSETID:  # a client set the stream's last ID (engine/log/xids.py)
        xmod.set_last_id(topic, (int(d["last_id"][0]), int(d["last_id"][1])))
    elif ftype == frames.T_IDMP and "cfg" in d:  # XCFGSET
        topic.idempotency.configure(int(d["cfg"]["duration"]), int(d["cfg"]["maxsize"]))
    elif ftype == frames.T_GROUPOP:  # one definition change (XGROUP CREATE, SETID, ...)
        groupops.apply(topic, d["op"])
    elif ftype == frames.T_LEASES:  # a queue's leases-log events, in order
        qs = leases.state_of(topic)
        for ev in d["ev"]:
            if ev[0] == "A":  # an ack: its jobs' delete first (engine/queues/leases.py Rule 1)
                deletes.delete_seqs(topic, now, ev[2])
            leases.apply(qs, ev)
    elif ftype == frames.T_LOSTRANGE and d.get("failover"):  # engine/log/failover.py Rule 2
        restore.open_failover_gap(topic, int(d["first"]), int(d["count"]))
    elif ftype == frames.T_LOSTRANGE and not d.get("void"):
        if topic.next_seq < int(d["first"]):  # a dest whose copies before it are gone
            restore.fill_lost(topic, int(d["first"]), topic.last_ts)
        if d.get("silent"):
            restore.mark_silent(topic, int(d["first"]), int(d["count"]), topic.last_ts)
        else:
            restore.mark_lost(topic, int(d["first"]), int(d["count"]))
    else:
        return False
    return True


def recover(data_dir: Path, cold_dir: Path | None, shards: int, ops: OsOps, now: int,
            repair: bool = True, progress: Progress | None = None,
            keep_leases: bool = False) -> Recovered:
    """Rebuild every topic; memory-class topics come back as placeholders + pending images.
    `progress` is updated as it goes (storage/progress.py). `keep_leases`: a replica's
    (`Builder.keep_leases`)."""
    t0 = time.monotonic()
    progress = progress or Progress()
    progress.phase = "reading_wal"
    out = Recovered()
    ck = read_checkpoint(data_dir)
    out.entries = {t["name"]: t for t in ck.get("topics", [])}
    gen0 = out.ckpt_gen = int(ck.get("wal_gen", 0))
    wal = read_wal(data_dir / "wal", min([gen0, *replay_from(ck).values()]), ops, repair)
    out.notes = wal.notes
    out.next_gen = max(wal.top_gen, gen0) + 1
    dropped: dict[tuple[str, int], Image] = {}
    out.keyspace_file = ck.get("keyspace")
    out.keyspace = [body for g, t, body in wal.frames if t == frames.T_KEYSPACE and g >= gen0]
    images, out.epochs = build_images(ck, [f for f in wal.frames if f[1] != frames.T_KEYSPACE], dropped)
    out.damage = apply_cuts(images, out.epochs, wal.cuts)
    progress.frames_total = sum(len(img.ops) for img in images.values()
                                if img.policy.recovery != "after_ready")
    progress.phase = "replaying"
    b = Builder(data_dir, cold_dir, ops, shards, now, repair, progress)
    b.keep_leases = keep_leases
    from topicsrv.storage.rederive import Rederiver  # it builds on this module

    rd = Rederiver(b, images, dropped, ck, now)
    involved = rd.involved()
    for img in images.values():
        if img.policy.recovery == "after_ready":
            out.topics.append(b.placeholder(img))
            out.pending.append(img)
        elif img.name not in involved:
            out.topics.append(b.build(img))
    rd.load(involved)  # routers: sources and dests, then the dests' copies re-derived
    rd.run()
    out.topics += rd.finalize()
    rd.static(list(images.values()))
    out.routers = rd.relink(out.topics)
    out.rederived = rd.copies
    out.voids = rd.voids
    out.damage += b.damage
    out.records = b.records
    out.seconds = time.monotonic() - t0
    progress.phase = "done"
    return out
