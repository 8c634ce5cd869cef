"""Claims as the fronts see them: long-poll waits, claim cohorts and the dead-letter mover.

Both fronts (HTTP `POST /claim`, `GET /v0/work`, RESP `TOPIC.CLAIM`) call `Claims.claim`, so a
polling claimer, a pushed SSE worker and a redis-cli claimer of one queue meet in the same
cohort and the same wait, and everything here is written once.

Rule 1 (greedy): with `claim_jitter_ms` 0 a claim is one engine pass at once (seeds 10.3).
Rule 2 (cohorts): with `claim_jitter_ms` > 0 the first claimer of a queue opens a cohort and
a task serves it when the window closes: one engine pass over every claimer that joined
meanwhile, jobs dealt round-robin in proportion to `max` (engine/queues/queues.py Rule 1). A claimer
that leaves before the pass (cancelled, disconnected) is not dealt jobs.
Rule 3 (long poll): a claim that got nothing waits, up to `wait_ms`, in the queue's line of
waiting claimers (`line`; topicsrv/notify/lines.py), the same line as TOPIC.CLAIM BLOCK and
`/v0/work` streams: a produce, a nack or a lease deadline or nack delay passing makes only as
many claimers ready as there are jobs, first come first served, and each is served in place
by a claim pass of its own (`_greedy`, also on a cohort queue: a claimer that waited is not
held for another window). Its jobs reach it through the notifier; a claimer that leaves
after it was served gives them back at once (`release`, fenced by their lease ids).
Rule 4 (dead-letter mover): a dead-letter copy must be durable before its job leaves the
queue (queues Rule 3); the mover awaits each copy's barrier, then deletes the job. A copy
that could not be made durable leaves the job in the queue (it is offered again).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import trio

from topicsrv.engine import Engine
from topicsrv.engine.journal import CommitToken
from topicsrv.engine.queues import leases, queues
from topicsrv.engine.queues.queues import Claimer, Job, Move
from topicsrv.errors import TopicsError
from topicsrv.notify import NOTHING, Notifier
from topicsrv.notify.lines import Line

log = logging.getLogger("topicsrv.queues")

MAX_WAIT_MS = 600_000  # the longest long poll a claim may ask for (10 min)
WAKE_ALL = 1 << 30  # a line whose queue is gone: every claimer answers (not found, not a queue)


def release(engine: Engine, name: str, node: str, jobs: Sequence[Job]) -> None:
    """Give leases back at once (a nack without delay, fenced by lease id); a refusal (topic
    gone, storage refusing writes) is logged: the leases then end at their deadline."""
    for i in range(0, len(jobs), queues.MAX_SEQS):
        part = jobs[i:i + queues.MAX_SEQS]
        try:
            engine.nack(name, node, [j.seq for j in part], [j.lease_id for j in part])
        except TopicsError as exc:
            log.warning("queue %s: %d leases of %s not released (%s); they end at their deadline",
                        name, len(part), node, exc.message)


@dataclass(eq=False)
class _Member:
    claimer: Claimer
    left: bool = False
    jobs: list[Job] = field(default_factory=list)


@dataclass(eq=False)
class _Cohort:
    members: list[_Member] = field(default_factory=list)
    done: trio.Event = field(default_factory=trio.Event)
    token: CommitToken | None = None
    error: TopicsError | None = None


class Claims:
    def __init__(self, engine: Engine, notifier: Notifier) -> None:
        self.engine = engine
        self.notifier = notifier
        self.cohorts: dict[str, _Cohort] = {}
        self._send, self._recv = trio.open_memory_channel[list[Move]](math.inf)
        self._nursery: trio.Nursery | None = None
        self.cohort_passes = 0
        self.moves_pending = 0

    # ---- the background part ---------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Serve cohorts and move dead-lettered jobs (Rules 2 and 4) until cancelled."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            task_status.started()
            try:
                async for moves in self._recv:
                    nursery.start_soon(self._move, moves)
            finally:
                self._nursery = None

    def submit(self, moves: list[Move]) -> None:
        if moves:
            self.moves_pending += len(moves)
            self._send.send_nowait(moves)

    async def _move(self, moves: list[Move]) -> None:
        done: list[Move] = []
        for m in moves:
            try:
                await m.token.wait()
                done.append(m)
            except TopicsError as exc:  # the copy is not durable: the job stays (Rule 4)
                log.error("queue %s: the dead-letter copy of job %d failed (%s); the job stays",
                          m.queue.name, m.seq, exc.message)
                qs = leases.state_of(m.queue)
                if qs.moving.pop(m.seq, None) is not None:
                    qs.stats["dead_lettered"] = max(0, qs.stats["dead_lettered"] - 1)
                qs._free(m.seq, self.engine.now())
        self.moves_pending -= len(moves)
        try:
            queues.finish_moves(self.engine, done)
        except TopicsError as exc:  # storage refused the delete: the next restart finishes it
            log.error("dead-lettered jobs not deleted yet (%s); recovery completes the move", exc.message)

    # ---- claims ------------------------------------------------------------------------------

    def line(self, name: str) -> Line:
        """Rule 3: the line of the claimers waiting for jobs of queue `name`."""
        engine = self.engine

        def supply() -> int:
            topic = engine.topics.get(name)
            if topic is None or topic.type != "queue":
                return WAKE_ALL
            return queues.claimable(topic, engine.now())

        def due() -> int | None:
            topic = engine.topics.get(name)
            if topic is None or topic.type != "queue":
                return None
            return leases.state_of(topic).next_due(engine.now())

        return self.notifier.line(("queue", name), name, supply, due)

    async def claim(self, name: str, claimer: Claimer, wait_ms: int = 0) -> tuple[list[Job], CommitToken | None]:
        """Jobs for one claimer (Rules 1-3); validation errors raise before any wait."""
        wait_ms = queues.check_int(wait_ms, "wait_ms", 0, MAX_WAIT_MS)
        deadline = trio.current_time() + wait_ms / 1000
        topic = queues.queue_topic(self.engine, name)
        jitter = topic.config.claim_jitter_ms
        if jitter > 0 and self._nursery is not None:
            jobs, token = await self._join(name, claimer, jitter)
        else:
            jobs, token = self._greedy(name, claimer)
        remaining = deadline - trio.current_time()
        if jobs or remaining <= 0:
            return jobs, token
        return await self.wait_claim(name, claimer, remaining)

    async def wait_claim(self, name: str, claimer: Claimer,
                         timeout_s: float | None) -> tuple[list[Job], CommitToken | None]:
        """Rule 3: wait in the queue's line, at most `timeout_s` (None: until served), and be
        served there; nothing when the wait ends first."""

        def attempt() -> object:
            jobs, token = self._greedy(name, claimer)
            return (jobs, token) if jobs else NOTHING

        with self.notifier.consumer([self.line(name)], claimer.max, attempt) as waiter:
            waiter.arm()
            try:
                served = await waiter.wait(timeout_s)
            except BaseException:
                got = waiter.result
                if isinstance(got, tuple):  # served, then cancelled: the client never sees them
                    release(self.engine, name, claimer.node, got[0])
                raise
        if not served:
            return [], None
        got = waiter.result
        if isinstance(got, BaseException):
            raise got
        assert isinstance(got, tuple)
        return got[0], got[1]

    def claim_nowait(self, name: str, claimer: Claimer) -> tuple[list[Job], CommitToken | None] | None:
        """`claim` without a wait, for a front that answers at once when it can: one greedy
        pass now (Rule 1); None when the queue gathers claims into cohorts (Rule 2), whose
        claims must go through `claim`."""
        topic = queues.queue_topic(self.engine, name)
        if topic.config.claim_jitter_ms > 0 and self._nursery is not None:
            return None
        return self._greedy(name, claimer)

    def claim_now(self, name: str, claimer: Claimer) -> tuple[list[Job], CommitToken | None]:
        """One greedy pass now, whatever the queue's window (a claimer served in its line)."""
        return self._greedy(name, claimer)

    def _greedy(self, name: str, claimer: Claimer) -> tuple[list[Job], CommitToken | None]:
        outs, token, moves = self.engine.claim(name, [claimer])
        self.submit(moves)
        return outs[0], token

    async def _join(self, name: str, claimer: Claimer, jitter_ms: int) -> tuple[list[Job], CommitToken | None]:
        queues.check_node(claimer.node)  # a bad member must not spoil the cohort's pass
        queues.check_int(claimer.max, "max", 1, queues.MAX_CLAIM)
        if claimer.lease_ms is not None:
            queues.check_int(claimer.lease_ms, "lease_ms", 1)
        cohort = self.cohorts.get(name)
        if cohort is None:
            cohort = self.cohorts[name] = _Cohort()
            assert self._nursery is not None
            self._nursery.start_soon(self._serve, name, cohort, jitter_ms)
        me = _Member(claimer)
        cohort.members.append(me)
        try:
            await cohort.done.wait()
        except BaseException:
            me.left = True  # not dealt jobs if the pass has not run yet (Rule 2)
            raise
        if cohort.error is not None:
            raise cohort.error
        return me.jobs, cohort.token

    async def _serve(self, name: str, cohort: _Cohort, jitter_ms: int) -> None:
        try:
            await trio.sleep(jitter_ms / 1000)
        finally:
            if self.cohorts.get(name) is cohort:
                del self.cohorts[name]
        members = [m for m in cohort.members if not m.left]
        try:
            if members:
                outs, cohort.token, moves = self.engine.claim(name, [m.claimer for m in members])
                self.submit(moves)
                for m, jobs in zip(members, outs, strict=True):
                    m.jobs = jobs
                self.cohort_passes += 1
        except TopicsError as exc:
            cohort.error = exc
        except Exception:  # never take the server down; the members get an internal error
            log.exception("queue %s: a claim pass failed", name)
            cohort.error = TopicsError("internal", "internal error (logged)")
        finally:
            cohort.done.set()
