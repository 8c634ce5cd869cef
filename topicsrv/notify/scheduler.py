"""The delivery scheduler: passes in effective-priority order (the package's Rules 2-7), the
served and consumer waiters' admission (Rules 9-12), and the notifier's statistics.
"""

from __future__ import annotations

import logging
import time
from bisect import bisect_left
from collections import deque
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import trio

from topicsrv.engine.queues import priority
from topicsrv.engine.queues.priority import AGE_CAP_MS, TICK_MS
from topicsrv.notify.lines import Line, Lines
from topicsrv.notify.names import ArmedNames
from topicsrv.notify.runner import Runner
from topicsrv.notify.waiter import NOTHING, Serve, Waiter

if TYPE_CHECKING:
    from topicsrv.engine import Engine

log = logging.getLogger("topicsrv.notify")

PASS_BUDGET = 32
TICK_S = TICK_MS / 1000
BANDS = ("lt0", "0to499", "ge500")  # label values of topicsrv_delivery_latency_seconds
LATENCY_BUCKETS_S = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                     0.25, 0.5, 1.0, 2.5, 10.0)
SERVICE_ROUNDS = 10_000  # a bound on one end-of-step service (each round does some work)


def band_of(p_eff: int) -> int:
    return 0 if p_eff < 0 else (1 if p_eff < 500 else 2)


class Notifier:
    """The scheduler (the package docstring); `changed` is the engine listener."""

    def __init__(self, engine: Engine | None = None) -> None:
        self.engine = engine
        self._by_topic: dict[str, dict[Waiter, None]] = {}
        self._ready: dict[Waiter, None] = {}  # fired, not yet admitted (insertion = FIFO)
        self._ready_topics: dict[str, int] = {}
        self._peff: dict[str, tuple[int, int]] = {}  # topic -> (computed at ms, P_eff)
        self._pass_no = 0
        self._pass_started = 0.0
        self._pass_contended = False
        self.tick_s = TICK_S  # how long a pass may hold the waiters of the next (Rule 4)
        self._steps: list[list[Waiter]] = []  # the contended pass's steps still to admit, last first
        self._steps_wait = False  # others wait for the step being served (a contended pass)
        self._stage = 0  # the step being served (every admission is one step)
        self._in_service = 0  # its turns not over yet
        self.trace: list[tuple[int, str]] | None = None  # Rule 8: (pass, topic) per delivery
        self.wakeups = 0
        self.passes = 0
        self.contended_passes = 0
        self.starved_admits = 0
        self.latency = [[0] * (len(LATENCY_BUCKETS_S) + 1) for _ in BANDS]
        self.latency_sum = [0.0 for _ in BANDS]
        self.lines = Lines(self)  # consumer lines (Rule 10)
        self.runner = Runner(self)  # the end-of-step service and the timers (Rule 9)
        self.changes = 0  # changes told so far (a consumer's report compares with it)
        self._ready_served = 0  # served waiters among `_ready` (the runner admits those)
        self._to_serve: deque[Waiter] = deque()  # admitted served waiters, in admission order
        self._tick_pass = -1  # the contended pass a tick check is set for
        self.served = 0
        self.served_empty = 0
        # work the served attempts of one runner turn share (a fan-out's one read), emptied by
        # every change and at every turn (Rule 9)
        self.memo: dict[Any, Any] = {}

    # ---- the engine side ---------------------------------------------------------------

    def armed_names(self) -> ArmedNames:
        """The names some waiter waits on, as a live collection (the engine tells a string
        change only of these: engine/core.py Rule 4; notify/names.py)."""
        return ArmedNames(self._by_topic, self.lines.by_name)

    def changed(self, topic: str) -> None:
        """Engine listener: `topic` was appended to, deleted from, trimmed, created or dropped."""
        self.changes += 1
        if self.memo:
            self.memo.clear()
        if topic in self.lines.by_name:
            self.lines.changed(topic, self.changes)  # refilled at the end of the step (Rule 10)
        waiters = self._by_topic.pop(topic, None)
        if waiters is None:
            return
        now = self._now()
        t = time.perf_counter()
        served = False
        for w in waiters:
            w._armed = False  # re-registered by its next arm()
            if w.fired:  # a multi-topic waiter already woken: keep the best topic's key
                if w.topic != topic and self.p_eff(topic, now) > self.p_eff(w.topic, now):
                    if self._ready.pop(w, 0) is None:  # not admitted yet: re-keyed
                        self._drop_topic(w.topic)
                        self._ready[w] = None
                        self._ready_topics[topic] = self._ready_topics.get(topic, 0) + 1
                    w.topic = topic
                continue
            w.fired = True
            w.topic = topic
            w.ready_at = now
            w.ready_t = t
            self._ready[w] = None
            self._ready_topics[topic] = self._ready_topics.get(topic, 0) + 1
            self.wakeups += 1
            ev = w._ev
            if w.serve is not None:
                self._ready_served += 1
                served = True
            elif ev is not None:
                ev.set()
        if served:
            self.runner.kick()

    def _fire(self, w: Waiter, topic: str) -> None:
        """Rule 10: a consumer its line hands a unit to is ready (as a fan-out waiter woken by
        a change of `topic`)."""
        w.fired = True
        w.topic = topic
        w.ready_at = self._now()
        w.ready_t = time.perf_counter()
        w.fired_at = self.changes
        self._ready[w] = None
        self._ready_topics[topic] = self._ready_topics.get(topic, 0) + 1
        self.wakeups += 1
        if w.serve is not None:
            self._ready_served += 1
            self.runner.kick()
        elif w._ev is not None:
            w._ev.set()

    def waiter(self, topics: Sequence[str], serve: Serve | None = None) -> Waiter:
        """A fan-out waiter of `topics` (Rule 2); with `serve`, served at admission (Rule 9)."""
        return Waiter(self, topics, serve)

    def consumer(self, lines: Sequence[Line], demand: int = 1,
                 serve: Serve | None = None) -> Waiter:
        """A consumer waiting in `lines` for `demand` units at most (Rules 10-11)."""
        return Waiter(self, (), serve, lines, max(1, demand))

    def line(self, key: Any, name: str, supply: Any, due: Any = None) -> Line:
        """The consumer line of `key`, a key of the engine name `name` (lines.py)."""
        return self.lines.line(key, name, supply, due)

    def p_eff(self, topic: str, now: int | None = None) -> int:
        """The topic's P_eff without aging, recomputed at most once per tick (seeds 3.1)."""
        if now is None:
            now = self._now()
        hit = self._peff.get(topic)
        if hit is not None and now - hit[0] < TICK_MS:
            return hit[1]
        value = 0
        eng = self.engine
        if eng is not None:
            t = eng.topics.get(topic)
            if t is not None:
                cfg = t.config
                value = priority.effective_priority(cfg.priority, cfg.auto_priority,
                                                    t.last_consumed_at, now)
        if len(self._peff) > 4096:
            self._peff.clear()
        self._peff[topic] = (now, value)
        return value

    def ready_since(self, topic: str) -> int | None:
        """The oldest ready_at of the topic's ready waiters (the age term GET shows)."""
        if not self._ready_topics.get(topic):
            return None
        return min((w.ready_at for w in self._ready if w.topic == topic), default=None)

    def armed(self, topic: str) -> int:
        """How many waiters wait on `topic`: armed fan-out waiters (woken by its next change)
        and consumers in its lines."""
        return len(self._by_topic.get(topic, ())) + self.lines.parked_on(topic)

    def waiting_topics(self) -> int:
        return len(self.armed_names())

    def statistics(self) -> dict[str, int]:
        """`wakeups`: waiters made ready (a fan-out waiter by a change of its topic, a consumer
        by its line); `served`: served waiters' attempts, `served_empty` those that found
        nothing; `parked`: consumers waiting in lines."""
        return {"armed_topics": len(self._by_topic), "ready": len(self._ready),
                "in_service": self._in_service, "passes": self.passes,
                "contended_passes": self.contended_passes, "starved_admits": self.starved_admits,
                "wakeups": self.wakeups, "served": self.served, "served_empty": self.served_empty,
                "lines": len(self.lines.by_key), "parked": self.lines.waiting(),
                "timers": self.runner.pending()}

    # ---- passes ------------------------------------------------------------------------

    def _now(self) -> int:
        return self.engine.now() if self.engine is not None else int(trio.current_time() * 1000)

    def _drop_topic(self, topic: str) -> None:
        n = self._ready_topics[topic] - 1
        if n:
            self._ready_topics[topic] = n
        else:
            del self._ready_topics[topic]

    def _unready(self, w: Waiter) -> None:
        if self._ready.pop(w, 0) is None:
            self._drop_topic(w.topic)
            if w.serve is not None:
                self._ready_served -= 1

    def _checkin(self, stage: int) -> None:
        """A turn of step `stage` is over; the last one of the step being served moves on."""
        if stage == self._stage:
            self._in_service -= 1
            if self._in_service <= 0:
                self._advance()

    def _delivered(self, stage: int, pass_no: int, topic: str) -> None:
        if self.trace is not None:
            self.trace.append((pass_no, topic))
        self._checkin(stage)

    def _advance(self) -> None:
        """The step being served is done: admit the pass's next step, else form the next pass."""
        steps = self._steps
        while steps:
            if self._admit_step(steps.pop()):
                return
        self._steps_wait = False
        if self._ready:
            self._form_pass()

    async def _admit(self, w: Waiter) -> None:
        if w not in self._ready:
            return  # admitted by a pass already
        if self._in_service <= 0 or not self._pass_contended:
            self._form_pass()  # Rule 3: only a contended pass makes the others wait
        while w in self._ready:
            started = self._pass_no
            go = w._go = trio.Event()
            with trio.move_on_at(self._pass_started + self.tick_s):
                await go.wait()
            if w in self._ready and self._pass_no == started:  # the pass outlived its tick
                self._form_pass()

    def _form_pass(self) -> None:
        ready = self._ready
        self._pass_no += 1
        self._pass_started = trio.current_time()
        self.passes += 1
        contended = self._pass_contended = len(ready) > PASS_BUDGET and len(self._ready_topics) > 1
        if not contended:
            self._steps = []
            self._steps_wait = False
            self._admit_step(list(ready))
            return
        steps = self._pick()
        steps.reverse()
        self._steps = steps
        self._steps_wait = True
        self._advance()

    def _admit_step(self, members: list[Waiter]) -> int:
        """Admit the members still ready as one step; how many."""
        self._stage += 1
        stage = self._stage
        ready = self._ready
        n = 0
        t = time.perf_counter()
        now = self._now()
        bands: dict[str, int] = {}
        for w in members:
            if w not in ready:
                continue  # it left, or re-armed, since the pass was formed
            self._unready(w)
            w.admitted = stage
            w.pass_no = self._pass_no
            n += 1
            b = bands.get(w.topic)
            if b is None:
                b = bands[w.topic] = band_of(self.p_eff(w.topic, now))
            waited = t - w.ready_t
            self.latency[b][bisect_left(LATENCY_BUCKETS_S, waited)] += 1
            self.latency_sum[b] += waited
            if w.serve is not None:
                self._to_serve.append(w)  # served by the runner, in admission order (Rule 9)
                continue
            go = w._go
            if go is not None:
                w._go = None
                go.set()
        self._in_service = n
        if self._to_serve:
            self.runner.kick()
        return n

    # ---- served waiters (Rule 9) ----------------------------------------------------------

    def _service(self) -> None:
        """The runner's turn at the end of a step: refill the dirty lines, admit the ready
        served waiters (a pass, unless a contended one is in service) and serve the admitted
        ones, until nothing more moves."""
        self.memo.clear()
        for _ in range(SERVICE_ROUNDS):
            worked = self.lines.refill_dirty()
            if self._ready_served and (self._in_service <= 0 or not self._pass_contended):
                self._form_pass()
                worked = True
            if self._to_serve:
                self._serve_admitted()
                worked = True
            if not worked:
                break
        if self._ready_served and self._pass_contended and self._tick_pass != self._pass_no:
            self._tick_pass = self._pass_no  # Rule 4: a pass may hold the next for one tick
            self.runner.at(self._pass_started + self.tick_s, self._tick)

    def _tick(self) -> None:
        if self._ready_served and self._pass_no == self._tick_pass:
            self._form_pass()

    def _serve_admitted(self) -> None:
        q = self._to_serve
        while q:
            w = q.popleft()
            serve = w.serve
            if w.admitted < 0 or serve is None:
                continue  # it left, timed out or was served since
            w._take()
            self.served += 1
            try:
                r = serve()
            except Exception as exc:  # a bug in an attempt: the waiter gets it, the loop goes on
                log.exception("a served waiter's attempt failed")
                r = exc
            if w.serve is None:
                continue  # closed during its attempt (its client was found gone)
            if r is NOTHING:
                self.served_empty += 1
                self._back(w)
            else:
                self._finish(w, r)

    def _back(self, w: Waiter) -> None:
        """A served waiter came back empty: it waits on at its place; its turn ends."""
        turn, w.turn = w.turn, -1
        w.fired = False
        if w.lines:
            self.lines.came_back(w, False)
            self.lines.park(w)
        else:
            w.arm()
        w.waiting_again()
        if turn >= 0:
            self._checkin(turn)

    def _finish(self, w: Waiter, result: Any) -> None:
        """A served waiter got its result: it leaves every topic and line, and its adapter
        (or task) takes over; the turn ends when the reply is handed to the socket."""
        w.result = result
        w.serve = None
        w.fired = False
        if w.lines:
            self.lines.came_back(w, True)
            self.lines.leave(w)
        w._disarm()
        w.finished()
        done = w.on_done
        if done is not None:
            done()
        elif w._ev is not None:
            w._ev.set()

    def _pick(self) -> list[list[Waiter]]:
        """Rules 4 and 5: the starved first (all of them), then the highest keys up to the
        budget, as steps of one key each, highest first."""
        self.contended_passes += 1
        now = self._now()
        keyed: list[tuple[bool, int, int, Waiter]] = []
        starved = 0
        for i, w in enumerate(self._ready):
            fresh = now - w.ready_at < AGE_CAP_MS
            starved += not fresh
            keyed.append((fresh, -(self.p_eff(w.topic, now) + priority.age_boost(w.ready_at, now)),
                          i, w))
        self.starved_admits += starved
        keyed.sort(key=lambda k: (k[0], k[1], k[2]))
        steps: list[list[Waiter]] = []
        last: tuple[bool, int] | None = None
        for fresh, key, _, w in keyed[:max(PASS_BUDGET, starved)]:
            if (fresh, key) != last:
                last = (fresh, key)
                steps.append([])
            steps[-1].append(w)
        return steps


async def wait_any(events: Iterable[trio.Event], timeout_s: float | None) -> bool:
    """Wait until any event fires or the timeout passes; True if one fired (for events that
    are not topic changes, e.g. a router's destination draining)."""
    evs = list(events)
    if any(ev.is_set() for ev in evs):
        return True
    fired = False
    with trio.move_on_after(timeout_s if timeout_s is not None else float("inf")):
        async with trio.open_nursery() as nursery:

            async def one(ev: trio.Event) -> None:
                nonlocal fired
                await ev.wait()
                fired = True
                nursery.cancel_scope.cancel()

            for ev in evs:
                nursery.start_soon(one, ev)
    return fired
