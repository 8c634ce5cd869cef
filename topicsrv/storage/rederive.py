"""Recovery of routers: definitions back, and the dests' copies re-derived from their sources.

A router's copies are never WAL frames (routerlog.py Rule 1). A dest comes back as its
checkpointed slots plus `router_in.cursor` (taken in the same step), then this module replays
the router from that cursor with `routers.forward(..., until=...)`, merging the dest's own
WAL frames (direct writes, deletes, trims, router changes) at the places they were written:

Rule 1 (placing a dest frame): a frame written while the dest had a router carries `rc`, the
cursor at that moment, and an APPEND/DELETE/LOSTRANGE frame also names the dest's next seq
then (`first_seq`, `bound`, `first`). Re-derivation runs until the cursor reaches `rc` or the
dest reaches that seq, whichever comes first (each source seq yields at most one dest seq,
so stepping with `until = cursor + missing seqs` never overshoots); if it produced fewer
seqs than the frame names, the rest become LOST (tombstone `lost`); then the frame applies.
A frame without `rc` while a router is installed means the router was removed before it
(its source was dropped): the dest re-derives up to the frame's seq, then loses the router.
Rule 2 (order): forwarding is deterministic given the source's records, so re-deriving from
the cursor yields the same copies at the same dest seqs the live router made: a dest record
whose source record survives keeps its seq. Sources are rebuilt before dests (all of their
own frames; they are finalized, i.e. capped, expired and given their crash gap, only after
every dest is re-derived); dests are visited in topological order and passes repeat to a
fixed point (chains and cycles); when nothing moves and a frame still waits, it is forced
(LOST fill, Rule 1).
Rule 3 (a source that lost records): a router whose cursor reached the source's recovered
head moves over the source's crash gap (the seqs `finalize` continues above, computed before
the source is finalized, so the order inside a cycle does not matter; a cursor above the
source's final head is clamped). Silently when no record it forwarded can be in that gap:
the source's WAL ended cleanly and its records come back (a router forwards only durable
source records: routerfwd Rule 7). Otherwise (the source's WAL was damaged, or its class keeps
no records: ephemeral) records it forwarded, whose copies a reader may have seen, may be
gone: the dest skips as many seqs as a LOST run of gap hop 1 (a copy's least hop), so no seq
a reader saw is reused and the gap goes no further round a cycle than a copy would
(engine/routing/gaphops.py). The source's own crash gap is never forwarded: it is below the cursor.
Rule 4 (what is not re-derived): a dest of the memory or ephemeral class, or of a memory-class
source (rebuilt after readiness), comes back with its frames applied as they are and its
router at the newest cursor known (checkpoint, `put`, or any frame's `rc`); the worker
forwards from there.
Rule 5 (removed source records): source records a DELETE/TRIM frame removed after the
router forwarded them get their dest seqs again (storage/removed.py Rules 1-3).
"""

from __future__ import annotations

import logging
import time
from typing import Any

from topicsrv.clock import Clock
from topicsrv.engine import restore
from topicsrv.engine.core import Engine
from topicsrv.engine.log.segments import LOST
from topicsrv.engine.log.topic import Topic
from topicsrv.engine.routing import gaphops, routers
from topicsrv.storage import frames
from topicsrv.storage.images import Image
from topicsrv.storage.recovery import Builder
from topicsrv.storage.rederiveplan import PLACED, At, Loaded, Plan, has_router, sources, target
from topicsrv.storage.removed import Removed, floors, pending_limit, removal_ocs

log = logging.getLogger("topicsrv.storage")

BATCH = 4096  # source seqs per forward step while re-deriving


class Rederiver:
    def __init__(self, b: Builder, images: dict[str, Image], dropped: dict[tuple[str, int], Image],
                 ck: dict[str, Any], now: int, clock: Clock | None = None) -> None:
        self.b = b
        self.images = images
        self.dropped = dropped
        self.specs = {s["name"]: s for s in ck.get("routers", []) if isinstance(s, dict)}
        self.engine = Engine(clock=clock or At(now))
        self.loaded: dict[str, Loaded] = {}
        self.ghosts: dict[tuple[str, int], Loaded] = {}  # dropped sources, rebuilt for their dests
        self.plans: dict[str, Plan] = {}
        self.removed = Removed(floors(images, dropped, self.specs))
        b.on_remove = self.removed.capture
        self.copies = 0
        self.voids: list[tuple[str, int, int]] = []  # crash gaps marked VOID (Rule 3)
        self.t0 = time.monotonic()
        self.last_log = self.t0

    def _pending_oc(self, router: routers.Router, src: Topic) -> int | None:
        """removed.py Rule 3: the source's removal frames not replayed yet bound the cursor."""
        sp = self.plans.get(src.name)
        if sp is None or sp.topic is not src or sp.i >= len(sp.ops):
            return None
        if sp.removals is None:
            sp.removals = removal_ocs(sp.ops)
        return pending_limit([oc for k, oc in sp.removals if k >= sp.i], router)

    # ---- which images take part -------------------------------------------------------------

    def involved(self) -> set[str]:
        """Dests with a router (at any point of the replay) and their sources."""
        names: set[str] = set()
        for img in self.images.values():
            if has_router(img):
                names.add(img.name)
                names |= sources(img, self.specs) & self.images.keys()
        return {n for n in names if self.images[n].policy.recovery != "after_ready"}

    def load(self, names: set[str]) -> None:
        for name in names:
            img = self.images[name]
            topic, st, done = self.b.load(img)
            self.loaded[name] = ld = Loaded(img, topic, st, done)
            self.engine.topics[name] = topic
            if has_router(img) and not done:
                self.plans[name] = Plan(ld, rederive=img.policy.wal)
            elif not done:
                for ftype, body in img.ops:
                    self.b._apply(topic, st, ftype, body)
            ld.head = topic.next_seq - 1
        for name, plan in self.plans.items():
            ri = (plan.loaded.img.ckpt or {}).get("router_in")
            if ri:
                spec = ri.get("spec") or self.specs.get(ri["name"])
                if spec is not None:
                    self._attach(plan, spec, int(ri["cursor"]), int(ri["source_epoch"]))
            del name

    def _source_topic(self, name: str, epoch: int) -> Topic | None:
        """The source as it is being recovered, or the image it had before a DROP."""
        ld = self.loaded.get(name)
        if ld is not None and ld.img.epoch == epoch:
            return ld.topic
        ghost = self.ghosts.get((name, epoch))
        if ghost is None:
            img = self.dropped.get((name, epoch))
            if img is None or img.policy.recovery != "at_open":
                return None
            topic, st, done = self.b.load(img)
            if not done:
                for ftype, body in img.ops:
                    self.b._apply(topic, st, ftype, body)
            ghost = self.ghosts[(name, epoch)] = Loaded(img, topic, st, done, topic.next_seq - 1)
        return ghost.topic

    def _attach(self, plan: Plan, spec_json: dict[str, Any], cursor: int, source_epoch: int) -> None:
        spec = routers.spec_from_json(spec_json)
        src = self._source_topic(spec.source, source_epoch)
        router = routers.Router(spec, cursor, source_epoch)
        ld = self.loaded.get(spec.source)
        if src is None or (ld is not None and ld.topic is src and ld.done):
            # a source rebuilt after readiness (memory class), one whose records are gone by
            # design (ephemeral: Rule 3 at the end), or unknown: nothing to re-derive
            src = src or restore.new_topic(spec.source, source_epoch, "log", plan.topic.config, 1, 0)
            plan.rederive = False
        routers.attach(self.engine, router, src, plan.topic)
        routers.refresh_caps(self.engine)

    def _detach(self, plan: Plan) -> None:
        router = plan.router
        if router is None:
            return
        self.engine.routers.pop(router.name, None)
        for topic in {id(t): t for t in [*self.engine.topics.values(),
                                          *(g.topic for g in self.ghosts.values())]}.values():
            outs = topic.ext.get("router_out")
            if outs and router in outs:
                outs.remove(router)
                if not outs:
                    del topic.ext["router_out"]
        del plan.topic.ext["router_in"]
        routers.refresh_caps(self.engine)

    # ---- forwarding ---------------------------------------------------------------------------

    def _forward(self, plan: Plan, rc: int | None, at: int | None) -> bool:
        """Re-derive until the cursor reaches `rc` or the dest reaches seq `at` (Rule 1);
        True when the target is met."""
        router = plan.router
        if router is None or not plan.rederive:
            return True
        dest = plan.topic
        src = self._source_topic(router.spec.source, router.source_epoch)
        if src is None:
            return True
        swap = self.engine.topics.get(src.name)
        self.engine.topics[src.name] = src  # a dropped source, rebuilt for its dest
        try:
            while True:
                if rc is not None and router.cursor >= rc:
                    return True
                if at is not None and dest.next_seq >= at:
                    return True
                until = router.cursor + BATCH if rc is None else min(rc, router.cursor + BATCH)
                if at is not None:
                    until = min(until, router.cursor + (at - dest.next_seq))
                kept = self.removed.next_for(src, router)  # removed.py Rule 2
                if kept is not None and kept[0] == router.cursor + 1:
                    step = self.removed.replay(self.engine, router, src, dest, *kept, until - router.cursor)
                    self.copies += step.forwarded
                    continue
                if kept is not None:
                    until = min(until, kept[0] - 1)
                limit = self._pending_oc(router, src)
                if limit is not None and limit < until:
                    if limit <= router.cursor:
                        return False  # waits for its source's frame (removed.py Rule 3)
                    until = limit
                before = (router.cursor, dest.next_seq)
                step = routers.forward(self.engine, router, limit=BATCH, until=until)
                self.copies += step.forwarded
                self._progress()
                if step.blocked is not None or (router.cursor, dest.next_seq) == before:
                    return rc is None and at is None
        finally:
            if swap is None:
                self.engine.topics.pop(src.name, None)
            else:
                self.engine.topics[src.name] = swap

    def _progress(self) -> None:
        t = time.monotonic()
        if t - self.last_log >= 1.0:
            self.last_log = t
            log.info("recovery: %d router copies re-derived so far (%.0f copies/s)", self.copies,
                     self.copies / max(t - self.t0, 1e-9))

    def _growing(self, plan: Plan) -> bool:
        """Can the plan's source still grow (a dest itself, not settled yet)?"""
        router = plan.router
        if router is None:
            return False
        src = self.plans.get(router.spec.source)
        return src is not None and not src.loaded.done and (src.i < len(src.ops) or src.router is not None)

    def _apply(self, plan: Plan, ftype: int, body: memoryview, rc: int | None, at: int | None,
               d: dict[str, Any] | None) -> None:
        dest = plan.topic
        if rc is not None:
            plan.last_rc = max(plan.last_rc, rc)
        if at is not None and dest.next_seq < at:
            restore.fill_lost(dest, at, dest.last_ts, LOST)
        if ftype != frames.T_ROUTER:
            self.b._apply(dest, plan.loaded.st, ftype, body)
            return
        assert d is not None
        op = d["op"]
        router = plan.router
        if op.get("op") == "put":
            if router is not None and router.name == op["spec"]["name"]:
                spec = routers.spec_from_json(op["spec"])
                router.spec = spec
                routers.refresh_caps(self.engine)
                return
            self._detach(plan)
            self._attach(plan, op["spec"], int(op["cursor"]), int(op["source_epoch"]))
        elif router is not None and router.name == op.get("name"):
            self._detach(plan)

    def _step(self, plan: Plan, force: bool) -> bool:
        """Apply as many of the plan's frames as can be placed; True if anything moved."""
        moved = False
        while plan.i < len(plan.ops):
            ftype, body = plan.ops[plan.i]
            rc, at, d = target(ftype, body)
            router = plan.router
            if ftype not in PLACED:
                pass
            elif router is not None and plan.rederive:
                before = (router.cursor, plan.topic.next_seq)
                if rc is None:  # Rule 1: the router was removed before this frame
                    reached = self._forward(plan, None, at) if at is not None else True
                else:
                    reached = self._forward(plan, rc, at)
                moved |= (router.cursor, plan.topic.next_seq) != before
                if not reached and self._growing(plan) and not force:
                    return moved
                if rc is None:
                    self._detach(plan)
            elif router is not None and rc is not None:
                router.cursor = max(router.cursor, rc)
            self._apply(plan, ftype, body, rc, at, d)
            plan.i += 1
            moved = True
            force = False
        router = plan.router
        if router is not None and plan.rederive:
            before = (router.cursor, plan.topic.next_seq)
            self._forward(plan, None, None)
            moved |= (router.cursor, plan.topic.next_seq) != before
        return moved

    def _order(self) -> list[Plan]:
        """Plans with their sources first (cycles in any order: passes repeat)."""
        seen: set[str] = set()
        out: list[Plan] = []

        def visit(name: str, stack: set[str]) -> None:
            if name in seen or name in stack or name not in self.plans:
                return
            stack.add(name)
            router = self.plans[name].router
            if router is not None:
                visit(router.spec.source, stack)
            seen.add(name)
            out.append(self.plans[name])

        for name in sorted(self.plans):
            visit(name, set())
        return out

    def run(self) -> None:
        order = self._order()
        while True:
            moved = False
            for plan in order:
                moved |= self._step(plan, False)
            waiting = [p for p in order if p.i < len(p.ops)]
            if not waiting:
                if not moved:
                    break
                continue
            if not moved:
                self._step(waiting[0], True)

    # ---- after re-derivation ------------------------------------------------------------------

    def finalize(self) -> list[Topic]:
        """Finalize every loaded topic, sources before dests, with Rule 3 between (a source's
        final head is computed, so inside a cycle the order does not matter)."""
        done: set[str] = set()
        out: list[Topic] = []
        order = [p.loaded.img.name for p in self._order()]
        names = [n for n in self.loaded if n not in self.plans] + order
        names += [n for n in self.plans if n not in order]
        for p in self.plans.values():
            if p.i < len(p.ops):  # never placed: apply as they are
                for ftype, body in p.ops[p.i:]:
                    self._apply(p, ftype, body, *target(ftype, body))
                p.i = len(p.ops)
        for ld in self.loaded.values():  # the recovered heads, before any crash gap (Rule 3)
            if not ld.done:
                ld.head = ld.topic.next_seq - 1
        for name in names:
            if name in done:
                continue
            done.add(name)
            ld = self.loaded[name]
            plan = self.plans.get(name)
            if plan is not None:
                self._settle(plan)
            if not ld.done:
                self.b.finalize(ld.img, ld.topic, ld.st)
            out.append(ld.topic)
        return out

    def _settle(self, plan: Plan) -> None:
        """Rule 3, before the dest is finalized."""
        router = plan.router
        if router is None:
            return
        if not plan.rederive:
            router.cursor = max(router.cursor, plan.last_rc)
        src = self.loaded.get(router.spec.source)
        if src is None or src.img.epoch != router.source_epoch:
            return  # removed below (dropped source) or rebuilt after readiness (memory class)
        head = (src.topic.next_seq if src.done else self.b.final_next(src.img, src.topic)) - 1
        if router.cursor >= head:
            router.cursor = head  # clamped: the source lost what the cursor had passed
            return
        recovered = router.cursor if src.done else src.head  # config-only: nothing came back
        silent = not (src.done or src.img.damaged)
        if silent and src.img.policy.crash_gap is not None and head > src.head:
            self._void(src, head)
        if router.cursor < recovered or silent:
            return  # the worker forwards what remains and skips the void gap
        gap = head - router.cursor
        first = plan.topic.next_seq
        restore.fill_lost(plan.topic, first + gap, plan.topic.last_ts, LOST)
        gaphops.add(plan.topic, first, gap, 1)
        log.warning("recovery: router %s: source %s lost seqs %d..%d that may have been "
                    "forwarded; dest %s skips %d seqs (readers get a `lost` tombstone)",
                    router.name, src.img.name, router.cursor + 1, head, plan.topic.name, gap)
        router.cursor = head

    def _void(self, src: Loaded, head: int) -> None:
        """Rule 3: the source's crash gap, no forwarded record in it, is VOID for its routers."""
        first, count = src.head + 1, head - src.head
        if any(v[0] == src.img.name for v in self.voids):
            return
        gaphops.add(src.topic, first, count, gaphops.VOID)
        self.voids.append((src.img.name, first, count))

    def static(self, images: list[Image]) -> None:
        """Rule 4: routers of dests that are not re-derived, at the newest cursor known."""
        for img in images:
            if img.name in self.plans or not has_router(img):
                continue
            state: dict[str, Any] | None = None
            ri = (img.ckpt or {}).get("router_in")
            if ri:
                spec = ri.get("spec") or self.specs.get(ri["name"])
                if spec is not None:
                    state = {"spec": spec, "cursor": int(ri["cursor"]), "source_epoch": int(ri["source_epoch"])}
            for ftype, body in img.ops:
                rc, _, d = target(ftype, body)
                if ftype == frames.T_ROUTER and d is not None:
                    op = d["op"]
                    if op.get("op") == "put":
                        if state is not None and state["spec"]["name"] == op["spec"]["name"]:
                            state["spec"] = op["spec"]
                        else:
                            state = {"spec": op["spec"], "cursor": int(op["cursor"]),
                                     "source_epoch": int(op["source_epoch"])}
                    elif state is not None and state["spec"]["name"] == op.get("name"):
                        state = None
                elif state is not None and rc is not None:
                    state["cursor"] = max(state["cursor"], rc)
            if state is not None:
                spec = routers.spec_from_json(state["spec"])
                router = routers.Router(spec, state["cursor"], state["source_epoch"])
                self.engine.routers[router.name] = router

    def relink(self, topics: list[Topic]) -> list[routers.Router]:
        """Link every surviving router to the topics recovery returns (routers Rule 5); a
        router whose source or dest did not come back (a DROP implies its routers) is gone."""
        by_name = {t.name: t for t in topics}
        for t in topics:
            t.ext.pop("router_in", None)
            t.ext.pop("router_out", None)
            t.drop_hook = None
        every, self.engine.routers = list(self.engine.routers.values()), {}
        for router in every:
            src, dst = by_name.get(router.spec.source), by_name.get(router.spec.dest)
            if src is None or dst is None or src.epoch != router.source_epoch:
                continue
            routers.attach(self.engine, router, src, dst)
        routers.refresh_caps(self.engine)
        return list(self.engine.routers.values())

