"""Queue operations (seeds section 10): claim, ack, nack, extend and the queue's state.

Each operation validates its whole request, changes the lease projection only through
leases-log events (engine/queues/leases.py Rule 1), hands those events to the journal in one call,
and returns the commit token the front awaits before it answers.

Rule 1: a claim pass (`claim`) serves a cohort of claimers in one synchronous step: expire
leases whose deadline passed (recording `released`), take the freelist first, then fresh
jobs from the claim cursor, and deal them round-robin in proportion to each claimer's `max`
(seeds 10.3). A single claimer is a cohort of one.
Rule 2: ack/nack/extend apply to a seq only while `node` holds its lease and, when lease ids
are given, only with the current one (fencing); anything else is skipped and named, never
an error (at-least-once consumers retry acks freely). An ack deletes the job through the
ordinary permanent delete (seeds 7), so it is exactly as durable as the topic.
Rule 3: a job about to be delivered for the (max_deliveries + 1)-th time is moved to the
`dead_letter` topic instead (engine/queues/deadletter.py). With `dead_letter` null the job is
reclaimed indefinitely (seeds 10.7).
Rule 4 (bounded answers, issue 23): a claimer with `max_bytes` gets the jobs that fit in that
many record bytes, always at least one; the jobs past it are never leased (no event, no
delivery counted): a freelist job goes back to the freelist as it was, a fresh one stays
above the claim cursor. So the cursor never passes a fresh job that was left out, in a cohort
every fresh job from the first one left out on is left out (`_cap`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, cast

import orjson

from topicsrv.engine.config import CONFIG_INT_MAX
from topicsrv.engine.journal import CommitToken
from topicsrv.engine.log import deletes
from topicsrv.engine.log.reads import FMT_JSON
from topicsrv.engine.log.records import (
    MAX_NODE_BYTES,
    MAX_RECORDS_PER_WRITE,
    blob_to_json,
    blob_to_resp,
    check_label,
)
from topicsrv.engine.log.segments import LIVE
from topicsrv.engine.log.topic import Topic
from topicsrv.engine.queues import deadletter, leases
from topicsrv.engine.queues.deadletter import (
    DEAD_LETTER_RETRY_MS,
    Move,
    finish_moves,
    resolve_moves,
)
from topicsrv.engine.queues.leases import Event, QueueState, state_of
from topicsrv.errors import TopicsError, invalid

if TYPE_CHECKING:
    from topicsrv.engine.core import Engine

log: Final = logging.getLogger("topicsrv.queues")

__all__ = ["Claimer", "Job", "Move", "finish_moves", "resolve_moves"]

MAX_CLAIM: Final = MAX_RECORDS_PER_WRITE  # jobs one claim may ask for
MAX_SEQS: Final = MAX_RECORDS_PER_WRITE  # seqs one ack/nack/extend may name
CLAIM_MAX_BYTES: Final = 16 << 20  # record bytes one claim answer carries at most (Rule 4), as a diff


@dataclass(slots=True)
class Claimer:
    """One claim request: who, how many, and in which record form its jobs go out. The fields
    hold what the client sent (any JSON value) until `claim` validates them."""

    node: Any
    max: Any = 1
    lease_ms: Any = None
    fmt: int = FMT_JSON
    max_bytes: int = 0  # the record bytes one answer may carry (Rule 4); 0: no cap


class Job:
    """A claimed job: the record in the claimer's form (wire JSON or a RESP stream entry) and
    its lease fields. A plain class (one per job; see leases.Lease)."""

    __slots__ = ("seq", "blob", "lease_id", "deadline", "delivery")

    def __init__(self, seq: int, blob: bytes, lease_id: str, deadline: int, delivery: int) -> None:
        self.seq = seq
        self.blob = blob
        self.lease_id = lease_id
        self.deadline = deadline
        self.delivery = delivery

    def __repr__(self) -> str:
        return (f"Job(seq={self.seq}, lease_id={self.lease_id!r}, deadline={self.deadline}, "
                f"delivery={self.delivery}, blob={self.blob!r})")

    def to_json(self, topic: str | None = None) -> bytes:
        """The record's JSON plus the lease fields (API 7), `topic` for /v0/work."""
        extra = b',"lease_id":%b,"deadline":%d,"delivery":%d' % (
            orjson.dumps(self.lease_id), self.deadline, self.delivery)
        if topic is not None:
            extra += b',"topic":' + orjson.dumps(topic)
        return self.blob[:-1] + extra + b"}"


# ---- validation (the same for both fronts) ----------------------------------------------------


def check_node(node: Any) -> str:
    if node is None or node == "":
        raise invalid("'node' is required: the name of the worker that holds the lease", field="node")
    value = check_label(node, "node", MAX_NODE_BYTES)
    assert value is not None
    return value


def check_int(value: Any, name: str, lo: int, hi: int = CONFIG_INT_MAX) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise invalid(f"'{name}' must be an integer", field=name)
    if not lo <= value <= hi:
        raise invalid(f"'{name}' must be between {lo} and {hi}", field=name)
    return value


def check_seqs(seqs: Any, lease_ids: Any = None) -> tuple[list[int], list[str] | None]:
    if not isinstance(seqs, list) or not seqs:
        raise invalid("'seqs' must be a non-empty list of job seqs", field="seqs")
    if len(seqs) > MAX_SEQS:
        raise invalid(f"'seqs' names {len(seqs)} jobs; the limit is {MAX_SEQS}", field="seqs")
    if all(type(s) is int for s in seqs) and min(seqs) >= 0 and max(seqs) < 1 << 64:
        out = seqs  # the common case checked in bulk (the RESP front hands parsed ints)
    else:
        out = [check_int(s, "seqs", 0, (1 << 64) - 1) for s in seqs]
    if lease_ids is None:
        return out, None
    if not isinstance(lease_ids, list) or len(lease_ids) != len(out) or not all(
            isinstance(x, str) for x in lease_ids):
        raise invalid("'lease_ids' must be a list of strings, one per seq, in the order of 'seqs'",
                      field="lease_ids")
    return out, lease_ids


def queue_topic(engine: Engine, name: str) -> Topic:
    topic = engine.get(name)
    if topic.type != "queue":
        raise TopicsError(
            "not_a_queue",
            f"topic '{name}' is a log topic; claim/ack/nack/extend need a topic created with type "
            "'queue'", {"topic": name, "type": topic.type})
    return topic


# ---- claim -------------------------------------------------------------------------------------


def _live_after(topic: Topic, lo: int, count: int) -> list[tuple[int, bytes, str | None, str | None]]:
    """Up to `count` live records with seq >= lo (native form), in seq order. A window of
    slots that are all live is taken as one slice of each column (the common case: a queue
    drained in order); a window with dead slots goes slot by slot."""
    out: list[tuple[int, bytes, str | None, str | None]] = []
    head = topic.head_seq
    seq = max(lo, topic.front)
    while seq <= head and len(out) < count and topic.segs:
        seg, i = topic.locate(seq)
        n = min(len(seg), head + 1 - seg.base)
        if not seg.live:
            seq = seg.base + len(seg)
            continue
        flags, blobs = seg.flags, seg.blobs
        m = min(n, i + count - len(out))
        if m > i and flags.count(LIVE, i, m) == m - i:
            nodes = seg.nodes[i:m] if seg.nodes is not None else [None] * (m - i)
            tags = seg.tags[i:m] if seg.tags is not None else [None] * (m - i)
            live = cast("list[bytes]", blobs[i:m])  # a LIVE slot always holds its blob
            out += zip(range(seg.base + i, seg.base + m), live, nodes, tags, strict=True)
            seq = seg.base + m
            continue
        for x in range(i, n):
            if flags[x] == LIVE:
                blob = blobs[x]
                assert blob is not None
                out.append((seg.base + x, blob, seg.node(x), seg.tag(x)))
                if len(out) >= count:
                    return out
        seq = seg.base + len(seg)
    return out


def deal(maxes: Sequence[int], available: int) -> list[int]:
    """How many jobs each claimer gets: all it asked for when there is enough, otherwise
    shares proportional to `max` (largest remainders first, ties to the earlier arrival)."""
    total = sum(maxes)
    if available >= total:
        return list(maxes)
    shares = [available * m // total for m in maxes]
    order = sorted(range(len(maxes)), key=lambda i: (-(available * maxes[i] % total), i))
    left = available - sum(shares)
    for i in order:
        if left == 0:
            break
        if shares[i] < maxes[i]:
            shares[i] += 1
            left -= 1
    return shares


def dealing(shares: list[int]) -> list[int]:
    """The claimer of each job in turn: round-robin over the claimers with shares left, so
    every claimer gets the oldest work evenly (Rule 1)."""
    if len(shares) == 1:
        return [0] * shares[0]
    order: list[int] = []
    left = list(shares)
    while any(left):
        for i, n in enumerate(left):
            if n:
                order.append(i)
                left[i] = n - 1
    return order


def claim(engine: Engine, name: str, claimers: Sequence[Claimer]) -> tuple[
        list[list[Job]], CommitToken | None, list[Move]]:
    """One claim pass for a cohort (Rule 1): the jobs of each claimer, in claimer order."""
    topic = queue_topic(engine, name)
    for c in claimers:
        check_node(c.node)
        check_int(c.max, "max", 1, MAX_CLAIM)
        if c.lease_ms is not None:
            check_int(c.lease_ms, "lease_ms", 1)
    engine.journal.check_writable(topic)
    now = engine.now()
    topic.expire(now)
    cfg = topic.config
    qs = state_of(topic)
    events: list[Event] = []
    moves: list[Move] = []
    for lease in qs.expired_leases(now):  # lazy expiry (seeds 10.6)
        ev: Event = ["r", lease.seq, lease.lease_id, lease.deadline + 1, now, "expired"]
        leases.apply(qs, ev)
        events.append(ev)
    want = sum(c.max for c in claimers)
    found: list[tuple[int, bytes, str | None, str | None]] = []
    blocked: list[tuple[int, int]] = []
    free = qs.free
    popped: dict[int, int] = {}  # freelist seq -> its ready_at (Rule 4 may put it back)
    while len(found) < want and free and free[0][0] <= now:  # the freelist first
        at, seq = free.pop(0)
        popped[seq] = at
        del qs.ready_at[seq]
        rec = topic.record_at(seq)
        if rec is None:  # deleted, expired or evicted meanwhile
            leases.forget(qs, seq)
            continue
        if cfg.max_deliveries and cfg.dead_letter and qs.deliveries.get(seq, 0) >= cfg.max_deliveries:
            if not deadletter.move(engine, topic, qs, seq, rec, now, events, moves):
                blocked.append((at, seq))
            continue
        found.append((seq, *rec))
    for at, seq in blocked:  # not before a while: else every waiting claimer retries at once, forever
        qs._free(seq, max(at, now + DEAD_LETTER_RETRY_MS))
    if len(found) < want:  # then fresh jobs, from the claim cursor
        found += _live_after(topic, qs.cursor, want - len(found))
    if len(claimers) == 1:
        dealt = [found]
    else:
        dealt = [[] for _ in claimers]
        for item, i in zip(found, dealing(deal([c.max for c in claimers], len(found))), strict=True):
            dealt[i].append(item)
    if any(c.max_bytes for c in claimers):
        found = _cap(claimers, dealt, qs, popped)
    out: list[list[Job]] = []
    deliveries = qs.deliveries
    for c, recs in zip(claimers, dealt, strict=True):
        deadline = now + (c.lease_ms or cfg.lease_ms)
        fmt = c.fmt
        if len(recs) <= 1:  # none or one job: the per-job event is the cheaper one
            jobs: list[Job] = []
            for seq, blob, node, tag in recs:
                delivery = deliveries.get(seq, 0) + 1
                lease_id = qs.new_lease_id()
                ev = ["c", seq, c.node, lease_id, deadline, delivery, now]
                leases.apply(qs, ev)
                events.append(ev)
                if blob[0] != fmt:
                    blob = blob_to_json(blob, node, tag) if fmt == FMT_JSON else blob_to_resp(blob)
                jobs.append(Job(seq, blob, lease_id, deadline, delivery))
            out.append(jobs)
            continue
        seqs = [r[0] for r in recs]
        counts = [deliveries.get(seq, 0) + 1 for seq in seqs] if deliveries else [1] * len(seqs)
        ids = qs.new_lease_ids(len(seqs))
        ev = ["C", now, c.node, deadline, seqs, ids, counts]  # one event for the claimer's batch
        leases.apply(qs, ev)
        events.append(ev)
        jobs = []
        for (seq, blob, node, tag), lease_id, delivery in zip(recs, ids, counts, strict=True):
            if blob[0] != fmt:
                blob = blob_to_json(blob, node, tag) if fmt == FMT_JSON else blob_to_resp(blob)
            jobs.append(Job(seq, blob, lease_id, deadline, delivery))
        out.append(jobs)
    if found:
        topic.last_consumed_at = topic.last_read_ts = now
    token = engine.journal.leases_logged(topic, events) if events else None
    return out, token, moves


def _cap(claimers: Sequence[Claimer], dealt: list[list[tuple[int, bytes, str | None, str | None]]],
         qs: QueueState, popped: dict[int, int]) -> list[tuple[int, bytes, str | None, str | None]]:
    """Rule 4: trim each claimer's records (in place) to its `max_bytes`, at least one each;
    what is left out is not leased. Returns the records still taken."""
    cut: int | None = None  # the lowest fresh seq left out
    left_out: list[int] = []
    for c, recs in zip(claimers, dealt, strict=True):
        if not c.max_bytes:
            continue
        size, keep = 0, 0
        for _seq, blob, _node, _tag in recs:
            size += len(blob)
            if keep and size > c.max_bytes:
                break
            keep += 1
        for seq, *_ in recs[keep:]:
            left_out.append(seq)
            if seq >= qs.cursor and (cut is None or seq < cut):
                cut = seq
        del recs[keep:]
    if cut is not None:  # no fresh job at or past the first one left out is leased
        for recs in dealt:
            left_out += [r[0] for r in recs if r[0] > cut]
            recs[:] = [r for r in recs if r[0] < cut]
    for seq in left_out:
        at = popped.get(seq)
        if at is not None:
            qs._free(seq, at)
    return [r for recs in dealt for r in recs]


# ---- ack / nack / extend -------------------------------------------------------------------------


def _match(qs: QueueState, node: str, seqs: list[int], lease_ids: list[str] | None) -> tuple[
        list[leases.Lease], list[dict[str, Any]]]:
    """Rule 2: the leases `node` holds among `seqs` (fenced by lease ids when given)."""
    live = qs.leases
    if lease_ids is None:  # the common case: every seq held by `node`, each named once
        got = [live.get(seq) for seq in seqs]
        if None not in got and all(x.node == node for x in got) and len(set(seqs)) == len(seqs):  # type: ignore[union-attr]
            return got, []  # type: ignore[return-value]
    held: list[leases.Lease] = []
    skipped: list[dict[str, Any]] = []
    seen: set[int] = set()
    for i, seq in enumerate(seqs):
        lease = live.get(seq)
        if lease is None or seq in seen:
            skipped.append({"seq": seq, "reason": "not_held"})
        elif lease.node != node:
            skipped.append({"seq": seq, "reason": "not_holder"})
        elif lease_ids is not None and lease_ids[i] != lease.lease_id:
            skipped.append({"seq": seq, "reason": "stale_lease"})
        else:
            held.append(lease)
        seen.add(seq)
    return held, skipped


def ack(engine: Engine, name: str, node: Any, seqs: Any, lease_ids: Any = None) -> tuple[
        dict[str, Any], CommitToken | None]:
    topic = queue_topic(engine, name)
    node = check_node(node)
    seqs, lease_ids = check_seqs(seqs, lease_ids)
    engine.journal.check_writable(topic)
    now = engine.now()
    qs = state_of(topic)
    held, skipped = _match(qs, node, seqs, lease_ids)
    acked = [x.seq for x in held]
    token = None
    if acked:
        # the delete and the acked events go to the journal together (storage writes them
        # as one frame: a torn tail keeps both or neither, leases.py Rule 1). The ack waits
        # for them only on a durable queue (seeds 10.1: ack durability == jobs-log
        # durability), so other queues' acks do not force a flush each.
        bound = topic.next_seq
        if deletes.delete_seqs(topic, now, acked):
            engine.notify(name)
        ev: Event = ["A", now, acked, [x.lease_id for x in held]]
        leases.apply(qs, ev)
        token = engine.journal.acked(topic, acked, bound, [ev], topic.config.durability == "fsync")
    return {"topic": name, "acked": acked, "skipped": skipped}, token


def nack(engine: Engine, name: str, node: Any, seqs: Any, lease_ids: Any = None,
         delay_ms: Any = 0) -> tuple[dict[str, Any], CommitToken | None]:
    topic = queue_topic(engine, name)
    node = check_node(node)
    seqs, lease_ids = check_seqs(seqs, lease_ids)
    delay = check_int(delay_ms if delay_ms is not None else 0, "delay_ms", 0)
    engine.journal.check_writable(topic)
    now = engine.now()
    qs = state_of(topic)
    held, skipped = _match(qs, node, seqs, lease_ids)
    events: list[Event] = [["r", x.seq, x.lease_id, now + delay, now, "nack"] for x in held]
    for ev in events:
        leases.apply(qs, ev)
    token = engine.journal.leases_logged(topic, events) if events else None
    if events:
        engine.notify(name)  # waiting claimers look again (at once, or when the delay ends)
    return {"topic": name, "released": [x.seq for x in held], "skipped": skipped,
            "ready_at": now + delay}, token


def extend(engine: Engine, name: str, node: Any, seqs: Any, lease_ids: Any = None,
           lease_ms: Any = None) -> tuple[dict[str, Any], CommitToken | None]:
    topic = queue_topic(engine, name)
    node = check_node(node)
    seqs, lease_ids = check_seqs(seqs, lease_ids)
    ms = topic.config.lease_ms if lease_ms is None else check_int(lease_ms, "lease_ms", 1)
    engine.journal.check_writable(topic)
    now = engine.now()
    qs = state_of(topic)
    held, skipped = _match(qs, node, seqs, lease_ids)
    events: list[Event] = [["x", x.seq, x.lease_id, now + ms, now] for x in held]
    for ev in events:
        leases.apply(qs, ev)
    token = engine.journal.leases_logged(topic, events) if events else None
    return {"topic": name, "extended": [x.seq for x in held], "deadlines": [now + ms for _ in held],
            "skipped": skipped}, token


def claimable(topic: Topic, now: int) -> int:
    """An upper bound on the jobs a claim pass could lease now, 0 only when it could lease none
    (the supply of the queue's line of waiting claimers, topicsrv/notify/lines.py): the
    freelist entries ready now, every seq from the claim cursor to the head (deleted ones
    included), and every live lease once the earliest deadline has passed."""
    qs = state_of(topic)
    n = int(qs.free.bisect_right((now, 1 << 65)))
    fresh = max(qs.cursor, topic.front)
    if topic.head_seq >= fresh:
        n += topic.head_seq - fresh + 1
    if qs.expiry and qs.expiry[0][0] < now:
        n += len(qs.leases)
    return n


# ---- state ------------------------------------------------------------------------------------


def stats(topic: Topic, now: int) -> dict[str, int]:
    """`queue` of GET /v0/topics/:q, computed from the projection and the jobs log. A lease
    whose deadline passed counts as ready (it is reclaimable) even before a claim pass
    records its release. The projection forgets a job that left the jobs log (deleted,
    expired, evicted) only lazily, at the next claim pass that meets it, so only jobs still
    live are counted here."""
    qs = state_of(topic)
    alive = topic.record_at
    oldest: list[int] = []  # candidates for the oldest ready job
    in_flight = 0
    for x in qs.leases.values():
        if alive(x.seq) is None:
            continue
        if x.deadline < now:
            oldest.append(x.seq)
        else:
            in_flight += 1
    free = qs.free
    cut = free.bisect_right((now, 1 << 65))
    delayed = sum(1 for _, seq in free.islice(cut) if alive(seq) is not None)
    moving = sum(1 for seq in qs.moving if alive(seq) is not None)
    ready = max(0, topic.count - in_flight - delayed - moving)
    oldest += [seq for _, seq in free.islice(0, cut) if alive(seq) is not None]
    fresh = _live_after(topic, qs.cursor, 1)
    if fresh:
        oldest.append(fresh[0][0])
    age = max(0, now - topic.ts_of(min(oldest))) if oldest and ready else 0
    return {"ready": ready, "in_flight": in_flight, "delayed": delayed,
            "dead_lettered": qs.stats["dead_lettered"], "oldest_ready_age_ms": age}


def counters(topic: Topic) -> dict[str, int]:
    """Lifetime counters of the queue instance (for /metrics)."""
    return dict(state_of(topic).stats)
