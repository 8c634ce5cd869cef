"""Pushed jobs (API.md section 7): `GET /v0/work?topics=q1,q2&node=W[&max_in_flight=N]`.

Frames are `event: job`, `data:` the job (`Job.to_json(topic=...)`: the record, its lease
fields and "topic"), no `id:`: a job stream is not resumable, a job not acked comes back
through its lease. Heartbeats and socket pacing are the watch's (sse.Pacer).

Rule 1: the request is validated before the stream starts: query parameters (400, unknown ones
included), every topic exists (404 `topic_not_found`) and is a queue (409 `not_a_queue`).
Rule 2: a connection holds at most `max_in_flight` leases. A lease counts while the queue's
projection still holds that seq with that lease id (an ack, a nack, a reclaim or a deletion
frees the slot) and its deadline has not passed (an expired lease is reclaimable by any claim
pass, so its slot is given back: the job may come again, here or to another worker).
Rule 3: jobs are claimed through the Claims service, one claim per queue while room is left,
so pushed workers share cohorts with polling claimers (seeds 10.3). The queues are taken
highest P_eff first (seeds 3), aged by the time since the stream last claimed from a queue or
found it empty; a queue passed over for AGE_CAP_MS goes first (docs/priority.md); equal keys
are taken in turn (one further each round). A claim's leases are recorded before its commit token is
awaited, and its frames go out after.
Rule 4: with room left, the stream waits in the line of each of its queues (Claims.line: the
same lines as blocked claimers; topicsrv/notify/lines.py), taken before the claims, and is
woken only when a queue holds a job for it, first come first served (a round that got jobs
gives up its place: it waits at the end of the lines next time), or when one of its leases
passes its deadline. With every slot taken it leaves the lines (it takes no job) and waits for
any change of its queues (an ack, a nack, a delete may free a slot) or a lease deadline.
Never past the heartbeat.
Rule 5: when the stream ends (the client left, a send failed), the leases it still holds are
released at once: a nack without delay, fenced by their lease ids, in the queue instance that
granted them (AMQP requeue-on-close).
Rule 6 (bounded output, issue 23): a round claims at most BATCH_BYTES of records (at least one
job per queue it claims from), and the next round starts only once that round's frames were
taken by the socket (`Pacer.frames` awaits the send). So a client that stops reading holds
what its socket buffers take plus one round, never `max_in_flight` jobs in server memory.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from topicsrv.engine.config import check_topic_name
from topicsrv.engine.journal import CommitToken
from topicsrv.engine.log.reads import FMT_JSON
from topicsrv.engine.queues import leases, queues
from topicsrv.engine.queues.priority import AGE_CAP_MS, age_boost
from topicsrv.engine.queues.queues import Claimer, Job
from topicsrv.errors import TopicsError, invalid
from topicsrv.http import params as p
from topicsrv.http.protocol import Request
from topicsrv.http.sse import BATCH_BYTES, MAX_WATCH_TOPICS, Pacer, Send, event_frame
from topicsrv.tasks.claims import release

if TYPE_CHECKING:
    from topicsrv.context import ServerContext
    from topicsrv.engine import Engine
    from topicsrv.engine.log.topic import Topic

log = logging.getLogger("topicsrv.http")

MAX_IN_FLIGHT = 1000
WORK_PARAMS = frozenset({"topics", "node", "max_in_flight"})
MIN_WAIT_S = 0.005  # a due time already reached is looked at again after this (no busy loop)


@dataclass(slots=True)
class WorkPlan:
    topics: list[str]
    node: str
    max_in_flight: int

    async def run(self, ctx: ServerContext, send: Send) -> None:
        await run_work(ctx, self, send)


def plan_work(ctx: ServerContext, req: Request) -> WorkPlan:
    """Rule 1: the validated request, or a 4xx before any byte of the stream."""
    q = req.query
    extra = sorted(q.keys() - WORK_PARAMS)
    if extra:
        raise invalid(f"unknown query parameter '{extra[0]}' (allowed: "
                      f"{', '.join(sorted(WORK_PARAMS))})", field=extra[0])
    names = list(dict.fromkeys(t for t in q.get("topics", "").split(",") if t))
    if not names:
        raise invalid("query parameter 'topics' must name at least one queue", field="topics")
    if len(names) > MAX_WATCH_TOPICS:
        raise invalid(f"at most {MAX_WATCH_TOPICS} queues per job stream", field="topics")
    node = queues.check_node(q.get("node"))
    max_in_flight = p.query_int(q, "max_in_flight", 1, MAX_IN_FLIGHT) or 1
    for name in names:
        check_topic_name(name)
        queues.queue_topic(ctx.engine, name)
    return WorkPlan(names, node, max_in_flight)


@dataclass(slots=True)
class _Granted:
    topic: Topic  # the queue instance that granted the leases
    leases: dict[int, str] = field(default_factory=dict)  # seq -> lease id


class Holdings:
    """The leases one job stream holds (Rules 2 and 5)."""

    def __init__(self) -> None:
        self.by_name: dict[str, _Granted] = {}
        self.next_deadline: int | None = None

    def add(self, topic: Topic, jobs: list[Job]) -> None:
        granted = self.by_name.get(topic.name)
        if granted is None or granted.topic is not topic:
            granted = self.by_name[topic.name] = _Granted(topic)
        for job in jobs:
            granted.leases[job.seq] = job.lease_id

    def count(self, engine: Engine, now: int) -> int:
        """Rule 2: forget the leases that no longer count; how many still do."""
        held = 0
        soonest: int | None = None
        for name, granted in list(self.by_name.items()):
            if engine.topics.get(name) is not granted.topic:
                del self.by_name[name]  # deleted (maybe recreated): its leases are gone
                continue
            qs = leases.state_of(granted.topic)
            for seq, lease_id in list(granted.leases.items()):
                lease = qs.held(seq)
                if lease is None or lease.lease_id != lease_id or lease.deadline < now:
                    del granted.leases[seq]
                    continue
                held += 1
                soonest = lease.deadline if soonest is None else min(soonest, lease.deadline)
        self.next_deadline = soonest
        return held

    def release(self, engine: Engine, node: str) -> None:
        """Rule 5: nack what is still held, fenced, only in the instance that granted it."""
        for name, granted in self.by_name.items():
            if granted.leases and engine.topics.get(name) is granted.topic:
                jobs = [Job(seq, b"", lease_id, 0, 0) for seq, lease_id in granted.leases.items()]
                release(engine, name, node, jobs)
        self.by_name.clear()


async def run_work(ctx: ServerContext, plan: WorkPlan, send: Send) -> None:
    """Push jobs until cancelled (the client left) or `send` fails; then release (Rule 5)."""
    engine = ctx.engine
    held = Holdings()
    turn = 0
    looked: dict[str, int] = {}  # queue -> when this stream last claimed from it or found none
    lines = [ctx.claims_service().line(name) for name in plan.topics]
    try:
        with Pacer(ctx, send) as pacer, ctx.notifier.waiter(plan.topics) as full, \
                ctx.notifier.consumer(lines) as waiter:
            while True:
                room = plan.max_in_flight - held.count(engine, engine.now())
                if room <= 0:  # Rule 4: out of the lines; any change may free a slot
                    waiter.close()
                    full.arm()
                    await pacer.wait(full, _wake_in(engine, plan, held, False))
                    continue
                full.close()
                waiter.arm()  # before the claims (Rule 4)
                waiter.demand = room
                k = turn % len(plan.topics)
                turn += 1
                order = by_priority(ctx, plan.topics, k, looked)
                out = await _claim_round(ctx, plan, order, room, held, looked)
                if out:
                    waiter.took()
                    await pacer.frames(out)
                    waiter.delivered()  # notify Rule 8
                    continue
                await pacer.wait(waiter, _wake_in(engine, plan, held, True))
    finally:
        held.release(engine, plan.node)


def by_priority(ctx: ServerContext, topics: list[str], k: int, looked: dict[str, int]) -> list[str]:
    """Rule 3: the queues by key, highest first (P_eff + age_boost of the time since this stream
    last claimed from the queue or found it empty); one passed over AGE_CAP_MS or longer goes
    first whatever its P_eff (the starvation bound); equals in turn from the k-th."""
    turn = topics[k:] + topics[:k]
    if len(turn) == 1:
        return turn
    p_eff = ctx.notifier.p_eff
    now = ctx.engine.now()

    def key(name: str) -> tuple[bool, int]:
        since = looked.setdefault(name, now)
        return (now - since < AGE_CAP_MS, -(p_eff(name, now) + age_boost(since, now)))

    return sorted(turn, key=key)


async def _claim_round(ctx: ServerContext, plan: WorkPlan, order: list[str], room: int,
                       held: Holdings, looked: dict[str, int]) -> list[bytes]:
    """Rule 3: claim up to `room` jobs over the queues in `order`; their frames."""
    engine = ctx.engine
    claims = ctx.claims_service()
    out: list[bytes] = []
    tokens: list[CommitToken] = []
    budget = BATCH_BYTES  # Rule 6: one round's frames, the bytes awaiting one send
    for name in order:
        if room <= 0 or budget <= 0:
            break
        try:
            jobs, token = await claims.claim(
                name, Claimer(plan.node, room, None, FMT_JSON, budget), 0)
        except TopicsError as err:
            # deleted or recreated as a log (nothing to claim until it is a queue again), or
            # storage refusing writes: the stream waits and tries again (Rule 4)
            log.debug("job stream %s: no claim on %s (%s)", plan.node, name, err.code)
            continue
        topic = engine.topics.get(name)
        looked[name] = engine.now()
        if not jobs or topic is None:
            continue
        held.add(topic, jobs)
        if token is not None:
            tokens.append(token)
        room -= len(jobs)
        frames = [event_frame(b"job", job.to_json(topic=name)) for job in jobs]
        budget -= sum(map(len, frames))
        out += frames
    for token in tokens:
        await token.wait()
    return out


def _wake_in(engine: Engine, plan: WorkPlan, held: Holdings, has_room: bool) -> float | None:
    """Rule 4: seconds until a lease deadline or a nack delay may change what we can do."""
    now = engine.now()
    due = [held.next_deadline + 1] if held.next_deadline is not None else []
    if has_room:
        for name in plan.topics:
            topic = engine.topics.get(name)
            if topic is not None and topic.type == "queue":
                at = leases.state_of(topic).next_due(now)
                if at is not None:
                    due.append(at)
    if not due:
        return None
    return max(MIN_WAIT_S, (min(due) - now) / 1000)
