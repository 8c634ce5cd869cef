"""Recovery of source records removed after a router forwarded them (routerlog Rule 5).

A source's DELETE/TRIM frame carries `oc`, {router: [cursor, created_ts]} at that moment.
Re-deriving a dest from its checkpointed cursor must give every such record the dest seq
the live router gave it, or every later copy would come back one seq lower (a reader's
cursor past a record it never read).

Rule 1 (keep aside): when recovery replays such a frame of a source, the slots it removes
above `floor` (the lowest cursor any of the source's routers re-derives from) are kept as
they were: a LIVE record with its bytes (the APPEND frame replayed before the DELETE, or
the segment slot: routerlog Rule 5 keeps it live on disk until a checkpoint has passed it);
for a TRIM also its DELETED and gap slots (a Run slice as one entry).
Rule 2 (replay): router R re-deriving past a kept seq q whose frame's `oc` names R (same
created_ts) with cursor c: q <= c (R had handled q) -> the copy again, or the gap or skip
the live step made of that slot (`routerfwd.forward_removed`); q > c: a DELETE -> nothing
(deleted before it was forwarded: skipped silently, as live); a TRIM -> a one-seq gap if R
would have forwarded it (what the live drop hook counted). A frame not naming R leaves q
to `forward`. A copy the dest cannot take any more (it refused it) becomes a LOST slot.
Rule 3 (order): a dest never re-derives past the `oc` cursor of a removal frame of its
source that is not replayed yet (a source that is itself a dest, still being rebuilt).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from topicsrv.engine import restore
from topicsrv.engine.core import Engine
from topicsrv.engine.log.segments import LIVE, LOST, Run
from topicsrv.engine.log.topic import Topic
from topicsrv.engine.routing import routerfwd
from topicsrv.engine.routing.routers import Router
from topicsrv.storage import codec, frames, routerlog
from topicsrv.storage.images import Image

Slot = tuple[int, bytes, int, str | None, str | None]  # ts, blob, size, node, tag


@dataclass(slots=True)
class Kept:
    kind: int  # frames.T_DELETE or frames.T_TRIM
    oc: dict[str, Any]
    n: int
    flag: int
    slot: Slot | None


def _oc_cursor(oc: dict[str, Any], router: Router) -> int | None:
    got = oc.get(router.spec.name)
    if not isinstance(got, list) or len(got) != 2 or int(got[1]) != router.spec.created_ts:
        return None
    return int(got[0])


def pending_limit(frames_oc: list[dict[str, Any]], router: Router) -> int | None:
    """Rule 3: the lowest `oc` cursor of `router` among removal frames not replayed yet."""
    cs = [c for oc in frames_oc if (c := _oc_cursor(oc, router)) is not None]
    return min(cs) if cs else None


def floors(images: dict[str, Image], dropped: dict[tuple[str, int], Image],
           specs: dict[str, dict[str, Any]]) -> dict[str, int]:
    """Per source name, the lowest cursor a router of it may re-derive from."""
    out: dict[str, int] = {}

    def see(spec: dict[str, Any] | None, cursor: int) -> None:
        if spec is not None:
            out[spec["source"]] = min(out.get(spec["source"], cursor), cursor)

    for img in [*images.values(), *dropped.values()]:
        ri = (img.ckpt or {}).get("router_in")
        if ri:
            see(ri.get("spec") or specs.get(ri["name"]), int(ri["cursor"]))
        for ftype, body in img.ops:
            if ftype == frames.T_ROUTER:
                op = codec.decode_json(body)["op"]
                if op.get("op") == "put":
                    see(op["spec"], int(op["cursor"]))
    return out


def removal_ocs(ops: list[tuple[int, memoryview]]) -> list[tuple[int, dict[str, Any]]]:
    """(index, `oc`) of every DELETE/TRIM frame of `ops` that carries one (Rule 3)."""
    out = []
    for k, (ftype, body) in enumerate(ops):
        if ftype in (frames.T_DELETE, frames.T_TRIM):
            oc = codec.decode_json(body).get("oc")
            if oc and routerlog.valid_oc(oc):
                out.append((k, oc))
    return out


class Removed:
    """The kept slots of every source (name, epoch) being recovered (Rule 1)."""

    def __init__(self, floors: dict[str, int]) -> None:
        self.floors = floors
        self.kept: dict[tuple[str, int], dict[int, Kept]] = {}
        self.keys: dict[tuple[str, int], list[int]] = {}

    def capture(self, topic: Topic, ftype: int, d: dict[str, Any], apply: Callable[[], None]) -> None:
        floor = self.floors.get(topic.name)
        oc = d.get("oc")
        if floor is None or not oc or not routerlog.valid_oc(oc):
            apply()
            return
        lo = max(topic.front, floor + 1)
        before: dict[int, Kept] = {}
        if ftype == frames.T_DELETE:
            hi = min(int(d["bound"]) - 1, topic.next_seq - 1, max(int(v[0]) for v in oc.values()))
            s = lo
            while s <= hi:
                seg, i = topic.locate(s)
                j = min(hi + 1, seg.next_seq) - seg.base
                if not isinstance(seg, Run) and seg.live:
                    for k in range(i, j):
                        blob = seg.blobs[k]
                        if seg.flags[k] == LIVE and blob is not None:
                            slot = (int(seg.ts[k]), blob, int(seg.sizes[k]), seg.node(k), seg.tag(k))
                            before[seg.base + k] = Kept(ftype, oc, 1, LIVE, slot)
                s = seg.base + j
            apply()
            gone = {}
            for q, kept in before.items():
                seg, i = topic.locate(q)
                if isinstance(seg, Run) or seg.flags[i] != LIVE:
                    gone[q] = kept
        else:
            hi = min(int(d["front"]), topic.next_seq) - 1
            s = lo
            while s <= hi:
                seg, i = topic.locate(s)
                j = min(hi + 1, seg.next_seq) - seg.base
                if isinstance(seg, Run):
                    before[s] = Kept(ftype, oc, j - i, seg.flag, None)
                else:
                    for k in range(i, j):
                        blob, flag = seg.blobs[k], seg.flags[k]
                        slot = None
                        if flag == LIVE and blob is not None:
                            slot = (int(seg.ts[k]), blob, int(seg.sizes[k]), seg.node(k), seg.tag(k))
                        before[seg.base + k] = Kept(ftype, oc, 1, flag, slot)
                s = seg.base + j
            apply()
            gone = before
        if gone:
            key = (topic.name, topic.epoch)
            kept_map = self.kept.setdefault(key, {})
            keys = self.keys.setdefault(key, [])
            for q, kept in gone.items():
                if q not in kept_map:  # a slot is removed once (a DELETE before a TRIM wins)
                    kept_map[q] = kept
                    bisect.insort(keys, q)

    def next_for(self, src: Topic, router: Router) -> tuple[int, Kept, int] | None:
        """The first kept entry after the router's cursor that Rule 2 hands to it, with the
        router's `oc` cursor in its frame."""
        key = (src.name, src.epoch)
        keys = self.keys.get(key)
        if not keys:
            return None
        kept_map = self.kept[key]
        at = bisect.bisect_left(keys, router.cursor + 1)
        while at < len(keys):
            q = keys[at]
            kept = kept_map[q]
            c = _oc_cursor(kept.oc, router)
            if c is not None and (kept.kind == frames.T_TRIM or q <= c):
                return q, kept, c
            at += 1
        return None

    def replay(self, engine: Engine, router: Router, src: Topic, dest: Topic, q: int, kept: Kept,
               c: int, m: int) -> routerfwd.Step:
        """Rule 2 for the first `m` seqs of the entry at q (q == cursor + 1)."""
        m = max(1, min(m, kept.n))
        forwarded = q <= c  # (a Run slice holds no record: the same either way)
        step = routerfwd.forward_removed(engine, router, q, m, kept.flag, kept.slot, forwarded)
        if step.blocked is not None and forwarded:  # the live router made a copy here
            restore.fill_lost(dest, dest.next_seq + 1, dest.last_ts, LOST)
        router.cursor = max(router.cursor, q + m - 1)
        if m < kept.n:  # split a Run slice: the rest is kept under its next seq
            key = (src.name, src.epoch)
            kept_map = self.kept[key]
            del kept_map[q]
            kept_map[q + m] = Kept(kept.kind, kept.oc, kept.n - m, kept.flag, None)
            keys = self.keys[key]
            keys[bisect.bisect_left(keys, q)] = q + m
        return step
