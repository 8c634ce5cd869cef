"""Router workers: one trio task per router forwards its source into its dest, off the ack path.

A source write never waits for a router: it appends, notifies, and acks; the worker is woken by
the engine listener and forwards in batches (`routers.forward`, one synchronous engine step
each), so a slow or full dest never slows or fails a source write.

Rule 1 (wake-ups): the worker takes its events before each step (notify Rule 1): the source's
(new records, an option change) when caught up, through the delivery scheduler when the server
has one (a worker is a consumer of its source: its P_eff orders it among the other waiters);
the dest's (room, a delete) when blocked. An engine listener sets them; new routers are found when their endpoints are notified (a PUT
notifies both), and `run` starts one worker for every router that exists (after recovery).
Rule 2 (batches): a step forwards up to `batch` source seqs; the worker yields between steps,
so a long catch-up never starves the fronts.
Rule 3 (backoff): a blocked step (dest full under `discard: "reject"`, storage refusing) is
retried after 10 ms, doubling to 1 s, or at once when the dest changes. The log says WARNING
once when a router becomes blocked and INFO once when it resumes, never per retry.
Rule 4 (stop): a deleted router's worker exits on its next wake-up (the delete notifies both
ends); `forward` never moves a router that is not in `engine.routers`, so nothing is forwarded
after the delete returns.
Rule 5: an unexpected error in a step is logged once, reported in the router's state as
blocked (`internal`), and retried with the same backoff; it never takes the server down.
Rule 6 (share): forwarding shares one event loop with the fronts, so while clients are writing
(the engine's write count moved in the last 100 ms) all workers together take at most `share`
of the loop's time: after each step the shared pacer holds the next one back for
`spent * (1/share - 1)`. When nobody writes, steps run back to back. A write burst therefore
acks at nearly the speed it would without routers and the lag is caught up afterwards; under
a sustained overload the lag grows (and a source that evicts unforwarded records reports it to
dest readers as `source_trim`) instead of every writer slowing down.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable

import trio

from topicsrv.engine import Engine
from topicsrv.engine.routing import routers
from topicsrv.engine.routing.routers import Router
from topicsrv.notify import Notifier, wait_any

log = logging.getLogger("topicsrv.routers")

BACKOFF_MIN_S = 0.010
BACKOFF_MAX_S = 1.0
BATCH = 1000
PAUSED_S = 0.5  # how often a replica's paused worker looks whether it was promoted
SHARE = 0.1  # Rule 6: the loop's share forwarding may take while clients write
CONTENDED_S = 0.1  # Rule 6: "while clients write" = a write seen in the last 100 ms


class Pacer:
    """Rule 6: one for all workers of a server."""

    def __init__(self, engine: Engine, share: float = SHARE) -> None:
        if not 0 < share <= 1:
            raise ValueError("the forwarding share is in (0, 1]")
        self.engine = engine
        self.factor = 1 / share - 1
        self.writes = engine.stats["writes"]
        self.resume_at = 0.0  # trio time before which no step starts while clients write
        self.held = 0  # steps held back (statistics)
        self.wrote_at = -math.inf  # trio time a client write was last seen
        self.contended = False  # clients wrote within CONTENDED_S of this step
        self._turn = trio.Lock()

    async def step_start(self) -> None:
        now = trio.current_time()
        writes = self.engine.stats["writes"]
        if writes != self.writes:
            self.writes = writes
            self.wrote_at = now
        self.contended = now - self.wrote_at < CONTENDED_S
        if not (self.contended and self.factor):
            return
        if now < self.resume_at:
            self.held += 1
        # One held worker at a time: the lock is handed on only after the step it let through
        # has run (synchronously) and pushed `resume_at` on, so the next one waits for that.
        async with self._turn:
            await trio.sleep_until(self.resume_at)

    def step_done(self, spent: float) -> None:
        """Only a step taken while clients wrote runs up a debt; an uncontended one clears it."""
        now = trio.current_time()
        if self.contended:
            self.resume_at = max(self.resume_at, now) + spent * self.factor
        else:
            self.resume_at = now


class Routers:
    def __init__(self, engine: Engine, batch: int = BATCH, share: float = SHARE,
                 notifier: Notifier | None = None) -> None:
        self.engine = engine
        self.notifier = notifier  # the delivery scheduler a caught-up worker waits through
        self.batch = batch
        self.pacer = Pacer(engine, share)
        self.workers: dict[str, Router] = {}  # router name -> the Router its worker serves
        self._by_topic: dict[str, set[str]] = {}  # topic -> names of routers touching it
        self._source_events: dict[str, trio.Event] = {}
        self._dest_events: dict[str, trio.Event] = {}
        self._nursery: trio.Nursery | None = None
        self.steps = 0
        self.acting: Callable[[], bool] = lambda: True  # False on a replica (repl/state.py Rule 1)
        engine.router_listener = self.changed  # engine/core.py Rule 4: while routers exist
        engine.router_workers = self.workers

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Run a worker per router until cancelled (Rule 1)."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            try:
                for router in list(self.engine.routers.values()):
                    self._spawn(router)
                task_status.started()
                await trio.sleep_forever()
            finally:
                self._nursery = None

    # ---- the engine listener ------------------------------------------------------------

    def changed(self, name: str) -> None:
        """`name` changed: start workers of new routers touching it, wake the ones that wait."""
        if not self.workers and not self.engine.routers:
            return  # no router at all (the usual case): every write calls this
        if self._nursery is not None:
            topic = self.engine.topics.get(name)
            if topic is not None:
                inbound = topic.ext.get("router_in")
                for router in (*topic.ext.get("router_out", ()), *((inbound,) if inbound else ())):
                    if self.workers.get(router.name) is not router:
                        self._spawn(router)
        for rname in self._by_topic.get(name, ()):
            router = self.workers.get(rname)
            if router is None:
                continue
            if router.spec.source == name:
                self._fire(self._source_events, rname)
            if router.spec.dest == name:
                self._fire(self._dest_events, rname)
            if self.engine.routers.get(rname) is not router:  # deleted: wake it to exit
                self._fire(self._source_events, rname)
                self._fire(self._dest_events, rname)

    @staticmethod
    def _fire(events: dict[str, trio.Event], name: str) -> None:
        ev = events.pop(name, None)
        if ev is not None:
            ev.set()

    @staticmethod
    def _event(events: dict[str, trio.Event], name: str) -> trio.Event:
        ev = events.get(name)
        if ev is None:
            ev = events[name] = trio.Event()
        return ev

    # ---- workers --------------------------------------------------------------------------

    def _spawn(self, router: Router) -> None:
        assert self._nursery is not None
        old = self.workers.get(router.name)
        if old is not None:  # a re-created router: the old worker exits on its own
            self._untrack(old)
        self.workers[router.name] = router
        for topic in (router.spec.source, router.spec.dest):
            self._by_topic.setdefault(topic, set()).add(router.name)
        self._nursery.start_soon(self._work, router, name=f"router:{router.name}")

    def _untrack(self, router: Router) -> None:
        for topic in (router.spec.source, router.spec.dest):
            names = self._by_topic.get(topic)
            if names is not None:
                names.discard(router.name)
                if not names:
                    del self._by_topic[topic]

    async def _work(self, router: Router) -> None:
        engine, name = self.engine, router.name
        delay = 0.0
        blocked_since: str | None = None  # the error code that blocked it, while blocked
        failed = False
        waiter = None if self.notifier is None else self.notifier.waiter((router.spec.source,))
        try:
            while engine.routers.get(name) is router:
                source_changed = self._event(self._source_events, name)
                dest_changed = self._event(self._dest_events, name)
                if waiter is not None:
                    waiter.arm()  # the source's change, through the scheduler (Rule 1)
                await self.pacer.step_start()
                if engine.routers.get(name) is not router:
                    break
                if not self.acting():  # a replica: forwarding is its primary's (repl/state.py)
                    await trio.sleep(PAUSED_S)
                    continue
                t0 = time.perf_counter()
                try:
                    step = routers.forward(engine, router, self.batch)
                    failed = False
                except Exception:  # Rule 5
                    if not failed:
                        log.exception("router %s: a forwarding step failed; retrying", name)
                    failed = True
                    router.status = "blocked"
                    if router.last_error is None or router.last_error["code"] != "internal":
                        router.last_error = {"code": "internal", "message": "internal error (logged)",
                                             "since_ts": engine.now()}
                    else:
                        router.retries += 1
                    step = None
                self.pacer.step_done(time.perf_counter() - t0)
                if waiter is not None:
                    waiter.delivered()  # the forward is this turn's delivery (notify Rule 8)
                self.steps += 1
                blocked = None if step is None else step.blocked
                if step is None or blocked is not None:
                    code = "internal" if blocked is None else blocked.code
                    if blocked_since is None:
                        log.warning("router %s: blocked forwarding %s -> %s (%s: %s); holding its "
                                    "cursor at %d and retrying with backoff", name, router.spec.source,
                                    router.spec.dest, code,
                                    "internal error" if blocked is None else blocked.message, router.cursor)
                    blocked_since = code
                    delay = BACKOFF_MIN_S if delay == 0 else min(delay * 2, BACKOFF_MAX_S)
                    await wait_any([dest_changed], delay)
                    continue
                if blocked_since is not None:
                    log.info("router %s: resumed forwarding %s -> %s at cursor %d", name,
                             router.spec.source, router.spec.dest, router.cursor)
                    blocked_since = None
                delay = 0.0
                if step.caught_up:
                    if waiter is not None:
                        await waiter.wait()
                    else:
                        await source_changed.wait()
                else:
                    await trio.lowlevel.checkpoint()  # Rule 2
        finally:
            if waiter is not None:
                waiter.close()
            if self.workers.get(name) is router:
                del self.workers[name]
                self._untrack(router)
                self._source_events.pop(name, None)
                self._dest_events.pop(name, None)

    def statistics(self) -> dict[str, int]:
        return {"workers": len(self.workers), "steps": self.steps, "held": self.pacer.held}
