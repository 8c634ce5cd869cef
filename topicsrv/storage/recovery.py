"""Recovery: checkpoint + segment files + WAL replay -> topics (runs in a worker thread).

Order per topic: the checkpointed state, then the slots of its segment files (only as many
per file as the checkpoint recorded) and its Runs (gaps with no record), then its WAL frames
after its replay point, in order. The replay point is the checkpoint's cut, or for a topic
whose last checkpoint failed, the cut of the one its entry comes from (`replay_from`).

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

import orjson

from topicsrv.engine import deletes, groupops, groups, leases, restore
from topicsrv.engine import idempotency as idem
from topicsrv.engine import xids as xmod
from topicsrv.engine.config import SEQ_MAX
from topicsrv.engine.segments import DELETED, LIVE, LOST, SEGMENT_RECORDS
from topicsrv.engine.topic import Topic
from topicsrv.storage import codec, frames, routerlog, segfiles
from topicsrv.storage.fsops import OsOps
from topicsrv.storage.policy import Durability, policy, policy_of
from topicsrv.storage.progress import Progress
from topicsrv.storage.state import EXT_KEY, TState, shard_of, topic_dir
from topicsrv.storage.walread import Cut, read_wal

log = logging.getLogger("topicsrv.storage")

CHECKPOINT = "checkpoint.json"


class CheckpointError(ValueError):
    """checkpoint.json cannot be read or does not have the shape this version writes."""


@dataclass
class Image:
    name: str
    epoch: int
    type: str
    seq_base: int
    created_ts: int
    config: dict[str, Any]
    ckpt: dict[str, Any] | None = None
    ops: list[tuple[int, memoryview]] = field(default_factory=list)
    max_seq: int = 0
    ceiling: int = 0
    skip_to: int = 0  # next_seq is at least this (WAL damage: Rule 5)
    damaged: bool = False  # its shard's WAL was cut: no gap may be skipped silently

    @property
    def durability(self) -> str:
        return restore.config_from_dict(self.config).durability

    @property
    def policy(self) -> Durability:
        return policy(self.durability)

    @property
    def dir(self) -> str:
        ck = self.ckpt or {}
        return str(ck.get("dir") or topic_dir(self.name, self.epoch))


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
    # the keyspace (storage/keyspacelog.py replays it): the checkpoint's file, the WAL's frames
    keyspace_file: str | None = None
    keyspace: list[memoryview] = field(default_factory=list)


_TOPIC_KEYS = {"name": str, "epoch": int, "type": str, "seq_base": int, "created_ts": int,
               "config": dict, "next_seq": int}


def _validate(ck: Any) -> None:
    if not isinstance(ck, dict):
        raise CheckpointError("not a JSON object")
    if not isinstance(ck.get("wal_gen", 0), int) or not isinstance(ck.get("epochs", {}), dict):
        raise CheckpointError("'wal_gen' or 'epochs' has the wrong type")
    topics = ck.get("topics", [])
    if not isinstance(topics, list):
        raise CheckpointError("'topics' is not a list")
    for i, t in enumerate(topics):
        if not isinstance(t, dict):
            raise CheckpointError(f"topics[{i}] is not an object")
        for key, kind in _TOPIC_KEYS.items():
            if not isinstance(t.get(key), kind):
                raise CheckpointError(f"topics[{i}].{key} is missing or not a {kind.__name__}")
        if not isinstance(t.get("files", []), list) or not isinstance(t.get("runs", []), list):
            raise CheckpointError(f"topics[{i}]: 'files' or 'runs' is not a list")
        if not routerlog.valid_dels(t.get("dels", [])):
            raise CheckpointError(f"topics[{i}]: 'dels' is not a list of [first, last] seq pairs")


def read_checkpoint(data_dir: Path) -> dict[str, Any]:
    """The checkpoint (an empty one when there is none). CheckpointError when it is corrupt."""
    path = data_dir / CHECKPOINT
    if not path.exists():
        return {"version": 1, "wal_gen": 0, "topics": [], "epochs": {}}
    try:
        ck: dict[str, Any] = orjson.loads(path.read_bytes())
        _validate(ck)
    except orjson.JSONDecodeError as exc:
        raise CheckpointError(f"{path}: not valid JSON ({exc})") from exc
    except CheckpointError as exc:
        raise CheckpointError(f"{path}: {exc}") from exc
    return ck


def replay_from(ck: dict[str, Any]) -> dict[str, int]:
    """Per topic in the checkpoint, the first WAL generation its state does not include."""
    gen = int(ck.get("wal_gen", 0))
    return {t["name"]: int(t.get("replay_from", gen)) for t in ck.get("topics", [])}


def _frame_owner(ftype: int, body: memoryview) -> tuple[str, int, dict[str, Any] | None]:
    if ftype in frames.RECORD_FRAMES:
        name, epoch, _, _, _, _ = codec.append_header(body)
        return name, epoch, None
    d = codec.decode_json(body)
    return d["name"], int(d["epoch"]), d


def build_images(ck: dict[str, Any], wal: list[tuple[int, int, memoryview]],
                 dropped: dict[tuple[str, int], Image] | None = None
                 ) -> tuple[dict[str, Image], dict[str, int]]:
    """Per topic, its checkpointed state and its WAL frames to replay. `dropped` receives the
    images of topics dropped during the replayed WAL (a router's source: rederive.py)."""
    images: dict[str, Image] = {}
    epochs = {k: int(v) for k, v in ck.get("epochs", {}).items()}
    for t in ck.get("topics", []):
        base = Image(t["name"], t["epoch"], t["type"], t["seq_base"], t["created_ts"], t["config"], ckpt=t)
        base.max_seq = t["next_seq"] - 1
        base.ceiling = t.get("ceiling", 0)
        images[base.name] = base
    gen0 = int(ck.get("wal_gen", 0))
    starts = replay_from(ck)
    for gen, ftype, body in wal:
        try:
            name, epoch, d = _frame_owner(ftype, body)
        except (ValueError, KeyError, UnicodeDecodeError, orjson.JSONDecodeError) as exc:
            log.error("unreadable WAL frame body (type %d): %s; skipped", ftype, exc)
            continue
        if gen < starts.get(name, gen0):
            continue  # already in the checkpoint (kept only for a topic whose checkpoint failed)
        epochs[name] = max(epochs.get(name, 0), epoch)
        img = images.get(name)
        if ftype == frames.T_TOPIC:
            assert d is not None
            if img is not None and img.epoch == epoch:
                img.config = d["config"]
            elif img is None or epoch > img.epoch:
                images[name] = Image(name, epoch, d["type"], d["seq_base"], d["created_ts"], d["config"])
            continue
        if ftype == frames.T_DROP:
            if img is not None and img.epoch <= epoch:
                if dropped is not None:
                    dropped[(name, img.epoch)] = img
                del images[name]
            continue
        if img is None or img.epoch != epoch:
            continue
        img.ops.append((ftype, body))
        if ftype in frames.RECORD_FRAMES:
            _, _, first, _, n, _ = codec.append_header(body)
            img.max_seq = max(img.max_seq, first + n - 1)
        elif ftype == frames.T_CEIL:
            assert d is not None
            img.ceiling = max(img.ceiling, int(d["ceiling"]))
    return images, epochs


def apply_cuts(images: dict[str, Image], epochs: dict[str, int], cuts: list[Cut]) -> list[str]:
    """Rule 5: topics of a damaged shard continue above anything that may have been
    acknowledged. Returns one message per cut, naming the topics affected."""
    out = []
    for cut in cuts:
        for name, epoch in cut.epochs.items():
            epochs[name] = max(epochs.get(name, 0), epoch)
        hit = []
        for img in images.values():
            if not cut.affects(img.name):
                continue
            img.damaged = True
            ck = img.ckpt or {}
            known = max(img.max_seq, img.ceiling, ck.get("ceiling", 0), img.seq_base - 1,
                        cut.hwm.get((img.name, img.epoch), 0))
            skip = min(SEQ_MAX, known + cut.margin) + 1
            img.skip_to = max(img.skip_to, skip)
            hit.append(f"{img.name} (seqs continue at {img.skip_to}; readers below get a `lost` tombstone)")
        out.append(f"{cut.path.name}: {cut.reason} at offset {cut.offset}; replay of WAL shard "
                   f"{cut.shard} stopped there ({cut.good_after} good frames past it not replayed"
                   f"{', kept in ' + cut.aside if cut.aside else ''}); topics affected: "
                   + (", ".join(hit) if hit else "none"))
    return out


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
        if ck.get("xid_since") is not None:  # an ID-mapped topic (engine/xids.py)
            topic.xid_since = int(ck["xid_since"])
        if img.type == "queue":
            leases.restore(topic, ck.get("queue"))
        if ck.get("hops"):  # hop counts of a router source's copies above its cursors
            topic.ext["hops"] = {int(seq): int(hop) for seq, hop in ck["hops"]}
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

    def finalize(self, img: Image, topic: Topic, st: TState) -> None:
        """After every WAL frame: next_seq above everything known, watermarks, the gap."""
        ck = img.ckpt or {}
        cfg = topic.config
        pol = policy_of(cfg)
        ceiling = max(img.ceiling, ck.get("ceiling", 0))
        nxt = max(topic.next_seq, ck.get("next_seq", 0), img.skip_to)
        if pol.ceiling:
            nxt = max(nxt, ceiling + 1)
        nxt = min(nxt, SEQ_MAX + 1)
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
        if img.type == "queue" and not cfg.leases_durable:
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
            if add is not None:  # its key, journaled just before (engine/idempotency.py Rule 6)
                pid, iid, hit = idem.hit_from_json(add)
                topic.idempotency.add(pid, iid, replace(hit, ts=ts, earliest=topic.earliest_seq), self.now)
            self.progress.records += n
            self.progress.tick()
            return
        d = codec.decode_json(body)
        if ftype in (frames.T_DELETE, frames.T_TRIM):
            if self.on_remove is not None and "oc" in d:
                self.on_remove(topic, ftype, d, lambda: self._remove(topic, ftype, d))
            else:
                self._remove(topic, ftype, d)
        elif ftype == frames.T_GROUPS:  # a whole snapshot (written by older versions)
            groups.restore(topic, d.get("groups"))
        elif ftype == frames.T_XSETID:  # a client set the stream's last ID (engine/xids.py)
            xmod.set_last_id(topic, (int(d["last_id"][0]), int(d["last_id"][1])))
        elif ftype == frames.T_IDMP:  # an idempotency key waits for its APPEND; XCFGSET applies
            if "add" in d:
                self.idmp_pending[(id(topic), int(d["add"]["seq"]))] = d["add"]
            else:
                topic.idempotency.configure(int(d["cfg"]["duration"]), int(d["cfg"]["maxsize"]))
        elif ftype == frames.T_GROUPOP:  # one definition change (XGROUP CREATE, SETID, ...)
            groupops.apply(topic, d["op"])
        elif ftype == frames.T_LEASES:  # a queue's leases-log events, in order
            qs = leases.state_of(topic)
            for ev in d["ev"]:
                if ev[0] == "A":  # an ack: its jobs' delete first (engine/leases.py Rule 1)
                    deletes.delete_seqs(topic, self.now, ev[2])
                leases.apply(qs, ev)
        elif ftype == frames.T_LOSTRANGE:
            if topic.next_seq < int(d["first"]):  # a dest whose copies before it are gone
                restore.fill_lost(topic, int(d["first"]), topic.last_ts)
            if d.get("silent"):
                restore.mark_silent(topic, int(d["first"]), int(d["count"]), topic.last_ts)
            else:
                restore.mark_lost(topic, int(d["first"]), int(d["count"]))
        elif ftype == frames.T_SEGDROP:
            base = int(d["base"])
            restore.drop_segment(topic, base)
            st.dead.add(base // SEGMENT_RECORDS)
            st.files.pop(base // SEGMENT_RECORDS, None)

    def _remove(self, topic: Topic, ftype: int, d: dict[str, Any]) -> None:
        """A DELETE or TRIM frame."""
        if ftype == frames.T_TRIM:
            topic.drop_front(int(d["front"]), "cap")
            return
        sel, bound = d["selector"], int(d["bound"])
        if "seqs" in sel:
            deletes.delete_seqs(topic, self.now, [s for s in sel["seqs"] if s < bound])
        else:
            before = sel.get("before_seq")
            hi = bound if before is None else min(int(before), bound)
            match = deletes.parse_match(sel["match"]) if "match" in sel else None
            deletes.delete(topic, self.now, hi, match)


def recover(data_dir: Path, cold_dir: Path | None, shards: int, ops: OsOps, now: int,
            repair: bool = True, progress: Progress | None = None) -> Recovered:
    """Rebuild every topic; memory-class topics come back as placeholders + pending images.
    `progress` is updated as it goes (storage/progress.py)."""
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
    out.damage += b.damage
    out.records = b.records
    out.seconds = time.monotonic() - t0
    progress.phase = "done"
    return out
