"""The delivery scheduler: every waiting consumer is woken through it, in effective-priority order.

Users: SSE watches (`/watch`, `/v0/watch`), long-poll diffs, XREAD/XREADGROUP BLOCK, claim waits
(TOPIC.CLAIM BLOCK, `wait_ms`), `/v0/work` streams and router workers. Each holds a `Waiter`:

    with notifier.waiter(topics) as w:
        while True:
            w.arm()                 # before the read (Rule 1)
            ... read ...
            ... send; w.delivered()  # a stream's turn ends when its output is handed over
            if not await w.wait(timeout_s): ...   # True once woken and admitted

Rule 1: arm *before* reading the engine, wait only if the read came back empty. The engine
never yields, so no append can slip between the read and the wait.
Rule 2: `changed(topic)` (an engine listener) marks the topic's armed waiters ready and wakes
them at once, exactly as a plain event would. A woken waiter is then *admitted* by a pass
before `wait` returns; from then on it has a *turn*, which ends when what it read has been
handed to its socket (Rule 8), or when it waits again or leaves without sending anything.
Rule 3 (the common case costs nothing): a pass admits every ready waiter when they fit in
PASS_BUDGET or all wait on one topic; a single waiter is admitted by its own wake-up, no hop.
Rule 4 (contention): otherwise (a contended pass) it takes the PASS_BUDGET ready waiters of
highest key (P_eff of the topic that woke them, seeds 3.1, + age_boost of the time they have
been ready; FIFO among equals) and admits them in *steps*, one key at a time, highest first:
a step is admitted once every turn of the step before it has ended, so every delivery of a
higher key is handed to its socket before any lower-key reader of the pass runs. The rest, and
any waiter woken meanwhile, wait until the pass's last step is done, or until the pass is
TICK_MS old (a member stuck on a slow socket does not hold the others), then the next pass is
formed with fresh keys (P_eff is cached per topic for one tick); members of the old pass not
admitted yet are ready again and keyed anew.
Rule 5 (starvation bound): a waiter ready for AGE_CAP_MS or longer joins the next pass whatever
its key or the budget, in the pass's first steps, so a ready waiter is served within
AGE_CAP_MS + TICK_MS.
Rule 6: the pass order decides who is served first, never what: seq order, retention and
visibility are the engine's; a waiter reads everything after its cursor when admitted.
Rule 7: admission observes the wait from ready to admitted in a per-band histogram (bands of
the waiter's P_eff without the age term: <0, 0..499, >=500).
Rule 8 (a turn ends at delivery): a stream (SSE watch, job stream, router) calls `delivered()`
once its frames are sent (its forward is done). A waiter that leaves its `with` block with a
reply still to be written (long poll, BLOCK, claim wait) ends its turn through the connection:
the I/O adapter holds a `Delivery` (`delivery()`, a context variable of its task, used by that
task and the ones it starts itself) and calls `done()` once the reply is handed to the
socket, or the connection ends.
Only a turn of a step that others wait for is held that way; without a Delivery (a test, a
router) the turn ends at the close. `trace`, when a list, records every delivery (pass, topic)
in the order the turns end (a test hook).
"""

from __future__ import annotations

import time
from bisect import bisect_left
from collections.abc import Iterable, Sequence
from contextvars import ContextVar
from types import TracebackType
from typing import TYPE_CHECKING

import trio

from topicsrv.engine import priority
from topicsrv.engine.priority import AGE_CAP_MS, TICK_MS
from topicsrv.lifecycle import idle

if TYPE_CHECKING:
    from topicsrv.engine import Engine

PASS_BUDGET = 32
TICK_S = TICK_MS / 1000
BANDS = ("lt0", "0to499", "ge500")  # label values of topicsrv_delivery_latency_seconds
LATENCY_BUCKETS_S = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                     0.25, 0.5, 1.0, 2.5, 10.0)


def band_of(p_eff: int) -> int:
    return 0 if p_eff < 0 else (1 if p_eff < 500 else 2)


class Waiter:
    """One waiting consumer (module docstring)."""

    __slots__ = ("_sched", "topics", "_ev", "fired", "topic", "ready_at", "ready_t", "_go",
                 "pass_no", "admitted", "turn", "_armed")

    def __init__(self, sched: Notifier, topics: Sequence[str]) -> None:
        self._sched = sched
        self.topics = tuple(topics)
        self._ev = trio.Event()
        self.fired = False
        self.topic = ""  # the topic that woke it (the best one, for a multi-topic waiter)
        self.ready_at = 0  # engine clock ms, for aging
        self.ready_t = 0.0  # perf_counter, for the latency histogram
        self._go: trio.Event | None = None
        self.pass_no = -1  # the pass that admitted it last
        self.admitted = -1  # the step of an admission whose turn has not started yet
        self.turn = -1  # the step of the turn in progress (Rule 2)
        self._armed = False

    @property
    def serving(self) -> bool:
        """Admitted, and its turn not over yet."""
        return self.turn >= 0 or self.admitted >= 0

    def __enter__(self) -> Waiter:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def _take(self) -> None:
        """The admission becomes the turn (a turn still open from before ends here)."""
        if self.turn >= 0:
            self._sched._checkin(self.turn)
        self.turn, self.admitted = self.admitted, -1

    def arm(self) -> None:
        """Register for the next change of any topic (Rule 1)."""
        s = self._sched
        if self.fired:
            s._unready(self)
            self.fired = False
            self._ev = trio.Event()
        if self.admitted >= 0:  # admitted while not waiting (a stream's heartbeat): it reads now
            self._take()
        if not self._armed:
            self._armed = True
            by_topic = s._by_topic
            for t in self.topics:
                w = by_topic.get(t)
                if w is None:
                    by_topic[t] = {self: None}
                else:
                    w[self] = None

    def delivered(self) -> None:
        """What this turn read is handed to the socket (a stream's frames sent, a router's
        forward done): the turn is over (Rule 8)."""
        if self.turn >= 0:
            turn, self.turn = self.turn, -1
            self._sched._delivered(turn, self.pass_no, self.topic)

    def close(self) -> None:
        s = self._sched
        if self.fired:
            s._unready(self)
            self.fired = False
        if self.admitted >= 0:  # admitted, but it leaves before its turn
            s._checkin(self.admitted)
            self.admitted = -1
        if self.turn >= 0:  # its reply is still to be written: the connection says when
            turn, self.turn = self.turn, -1
            d = None
            if (turn == s._stage and s._steps_wait) or s.trace is not None:
                d = _DELIVERY.get()
            if d is not None and d.writes_for_me():
                d.held.append((s, turn, self.pass_no, self.topic))
            else:
                s._checkin(turn)
        self._armed = False
        for t in self.topics:  # a fired multi-topic waiter may still sit in its other topics
            w = s._by_topic.get(t)
            if w is not None:
                w.pop(self, None)
                if not w:
                    del s._by_topic[t]

    async def wait(self, timeout_s: float | None = None) -> bool:
        """Wait for a change of one of the topics, at most `timeout_s`; True once admitted.
        Waiting again ends the turn in progress (nothing more was sent in it)."""
        if self.turn >= 0:
            turn, self.turn = self.turn, -1
            self._sched._checkin(turn)
        if not self.fired:
            if timeout_s is not None and timeout_s <= 0:
                return False
            with trio.move_on_after(float("inf") if timeout_s is None else timeout_s), idle():
                await self._ev.wait()  # not a request in flight meanwhile (lifecycle Rule 1)
            if not self.fired:
                return False
        await self._sched._admit(self)
        self._take()
        return True


class Delivery:
    """A connection's report that the replies of the turns it holds are handed to the socket
    (Rule 8); `delivery()` makes one for the current task."""

    __slots__ = ("held", "owner")

    def __init__(self) -> None:
        self.held: list[tuple[Notifier, int, int, str]] = []  # (scheduler, step, pass, topic)
        self.owner = trio.lowlevel.current_task()  # the connection's task

    def writes_for_me(self) -> bool:
        """The current task is the connection's, or one it started (a long poll's handler, an
        SSE stream): not a long-lived task that only inherited the context (a router worker
        started by an engine listener while the connection wrote)."""
        task = trio.lowlevel.current_task()
        if task is self.owner:
            return True
        nursery = task.parent_nursery
        return nursery is not None and nursery.parent_task is self.owner

    def done(self) -> None:
        """The replies are written (or never will be: the connection ended)."""
        if self.held:
            held, self.held = self.held, []
            for sched, step, pass_no, topic in held:
                sched._delivered(step, pass_no, topic)


_DELIVERY: ContextVar[Delivery | None] = ContextVar("topicsrv_delivery", default=None)


def delivery() -> Delivery:
    """A Delivery for the current task and the tasks it starts from now on (Rule 8)."""
    d = Delivery()
    _DELIVERY.set(d)
    return d


class Notifier:
    """The scheduler (module docstring); `changed` is the engine listener."""

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

    # ---- the engine side ---------------------------------------------------------------

    def armed_names(self) -> dict[str, dict[Waiter, None]]:
        """The names some waiter is armed on, as a live mapping (the engine tells a string
        change only of these: engine/core.py Rule 4)."""
        return self._by_topic

    def changed(self, topic: str) -> None:
        """Engine listener: `topic` was appended to, deleted from, trimmed, created or dropped."""
        waiters = self._by_topic.pop(topic, None)
        if waiters is None:
            return
        now = self._now()
        t = time.perf_counter()
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
            w._ev.set()

    def waiter(self, topics: Sequence[str]) -> Waiter:
        return Waiter(self, topics)

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
        """How many waiters are armed on `topic` (woken by its next change)."""
        return len(self._by_topic.get(topic, ()))

    def waiting_topics(self) -> int:
        return len(self._by_topic)

    def statistics(self) -> dict[str, int]:
        return {"armed_topics": len(self._by_topic), "ready": len(self._ready),
                "in_service": self._in_service, "passes": self.passes,
                "contended_passes": self.contended_passes, "starved_admits": self.starved_admits,
                "wakeups": self.wakeups}

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
            go = w._go
            if go is not None:
                w._go = None
                go.set()
        self._in_service = n
        return n

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
