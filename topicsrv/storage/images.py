"""What recovery starts from: checkpoint.json and the WAL frames, gathered per topic.

An `Image` is one topic as recovery will rebuild it (storage/recovery.py `Builder`): its
checkpointed entry (config, watermarks, segment files, runs) and the WAL frames written after
its replay point, in order. The replay point is the checkpoint's cut, or for a topic whose
last checkpoint failed, the cut of the one its entry comes from (`replay_from`).

Rule 1: a checkpoint that cannot be read or does not have the shape this version writes is
a `CheckpointError` naming the file and the field; never a partial start.
Rule 2: a frame whose body cannot be read is logged and skipped; a topic's frames of an older
epoch than its image are ignored; a DROP removes the image (kept aside in `dropped` for the
routers whose source it was: rederive.py).
Rule 3 (WAL damage, recovery Rule 5): a topic of a shard whose WAL was cut continues above
everything the cut-off bytes still show, plus a margin for what they no longer show
(walread.Cut): `skip_to`, and `damaged` (no gap may be skipped silently).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from topicsrv.engine import restore
from topicsrv.engine.config import SEQ_MAX
from topicsrv.storage import codec, frames, routerlog
from topicsrv.storage.policy import Durability, policy
from topicsrv.storage.state import topic_dir
from topicsrv.storage.walread import Cut

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
