"""The lease projection of a queue topic (seeds section 10): who holds which job, as values.

A queue is two logs (seeds 10.1): the jobs log (the topic's records) and the leases log, an
append-only list of lifecycle events. This module is the leases log's *projection*, the
state those events produce, and the one place each event's effect is written down:

    ["C", ts, node, deadline, [seq...], [lease_id...], [delivery...]]  claimed, a batch
    ["A", ts, [seq...], [lease_id...]]                  acked, a batch: the jobs are deleted
    ["c", seq, node, lease_id, deadline, delivery, ts]  claimed (fresh or reclaimed)
    ["r", seq, lease_id, ready_at, ts, why]             released: why = "nack" | "expired"
    ["x", seq, lease_id, deadline, ts]                  extended
    ["a", seq, lease_id, ts]                            acked (the job is deleted: seeds 10.2)
    ["d", seq, dl_topic, dl_seq, ts]                    moved to the dead-letter topic
    ["f", seq, ts]                                      forgotten (the job left the jobs log)

Rule 1: `apply(state, event)` is the only way the projection changes, live or at replay,
so replaying a log rebuilds exactly the state that wrote it (event sourcing). Events are
idempotent where a crash can repeat them (a checkpoint snapshot + the WAL tail after it).
A claim or an ack logs one batch event ("C", "A": the same effect as one "c" / "a" per job,
in order); older logs hold the per-job forms, which replay as before. An "A" event is also
the jobs' delete: recovery deletes its seqs from the jobs log before applying it, so an ack
is one WAL frame, its delete and its events together (storage/recovery.py).
Rule 2: no timers. A lease holds until `now > deadline`; the next claim pass finds expired
leases (`expired`, a heap with stale entries skipped) and releases them (seeds 10.6).
Rule 3: the freelist (released jobs, each with the time it becomes claimable) is served
before fresh jobs; fresh jobs come from `cursor`, the next seq never leased (seeds 10.3).
Rule 4: lease ids are `<nonce>.<n>`: `n` counts up per queue, `nonce` is drawn per projection
(once per process and queue instance), so an id handed out before a crash, or by a queue since
deleted and recreated under the same name, is never handed out again for another lease (a
stale worker's fenced ack can never hit a newer lease), even when non-durable events were lost.
"""

from __future__ import annotations

import heapq
import secrets
from dataclasses import dataclass, field
from typing import Any, Final

from sortedcontainers import SortedList

EXT_KEY: Final = "queue"
Event = list[Any]

def _nonce() -> str:
    return secrets.token_hex(4)


class Lease:
    """One live lease (a plain class, not a dataclass: one is made per claimed job, and a
    compiled build compiles this `__init__`; a dataclass's generated one stays interpreted)."""

    __slots__ = ("seq", "node", "lease_id", "deadline", "delivery")

    def __init__(self, seq: int, node: str, lease_id: str, deadline: int, delivery: int) -> None:
        self.seq = seq
        self.node = node
        self.lease_id = lease_id
        self.deadline = deadline
        self.delivery = delivery

    def __repr__(self) -> str:
        return (f"Lease(seq={self.seq}, node={self.node!r}, lease_id={self.lease_id!r}, "
                f"deadline={self.deadline}, delivery={self.delivery})")


@dataclass(slots=True, eq=False)
class QueueState:
    cursor: int  # the next never-leased seq (Rule 3)
    leases: dict[int, Lease] = field(default_factory=dict)
    deliveries: dict[int, int] = field(default_factory=dict)  # seq -> claims so far (live jobs)
    free: SortedList = field(default_factory=SortedList)  # (ready_at, seq): the freelist
    ready_at: dict[int, int] = field(default_factory=dict)  # seq -> its key in `free`
    # heap of (deadline, n, seqs, lease ids): one entry per claim batch or extend (n: a tie
    # breaker); an entry whose lease is gone or was extended since is skipped (Rule 2)
    expiry: list[tuple[int, int, tuple[int, ...], tuple[str, ...]]] = field(default_factory=list)
    pushed: int = 0
    moving: dict[int, tuple[str, int]] = field(default_factory=dict)  # seq -> (dl topic, dl seq)
    counter: int = 0
    nonce: str = field(default_factory=_nonce)
    issued: str = ""  # the last id new_lease_id() handed out (its claim needs no counter bump)
    # observability counters (since the topic instance was created; restored at restart)
    stats: dict[str, int] = field(default_factory=lambda: {
        "claimed": 0, "acked": 0, "nacked": 0, "expired": 0, "extended": 0, "dead_lettered": 0,
        "dead_letter_errors": 0})

    def new_lease_id(self) -> str:
        self.counter += 1
        self.issued = f"{self.nonce}.{self.counter}"
        return self.issued

    def new_lease_ids(self, n: int) -> list[str]:
        """`n` fresh lease ids (Rule 4), in order."""
        c, prefix = self.counter, self.nonce + "."
        ids = [prefix + str(k) for k in range(c + 1, c + n + 1)]
        self.counter = c + n
        if ids:
            self.issued = ids[-1]
        return ids

    def _expire_at(self, deadline: int, seqs: tuple[int, ...], ids: tuple[str, ...]) -> None:
        self.pushed += 1
        heapq.heappush(self.expiry, (deadline, self.pushed, seqs, ids))

    def held(self, seq: int) -> Lease | None:
        found: Lease | None = self.leases.get(seq)
        return found

    def _unfree(self, seq: int) -> None:
        at = self.ready_at.pop(seq, None)
        if at is not None:
            self.free.discard((at, seq))

    def _free(self, seq: int, ready_at: int) -> None:
        self._unfree(seq)
        self.ready_at[seq] = ready_at
        self.free.add((ready_at, seq))

    def expired_leases(self, now: int) -> list[Lease]:
        """Leases whose deadline has passed (`now > deadline`), oldest deadline first."""
        out: list[Lease] = []
        heap, live = self.expiry, self.leases
        while heap and heap[0][0] < now:
            deadline, _, seqs, ids = heapq.heappop(heap)
            for seq, lease_id in zip(seqs, ids, strict=True):
                lease = live.get(seq)
                if lease is not None and lease.lease_id == lease_id and lease.deadline == deadline:
                    out.append(lease)
        return out

    def next_due(self, now: int) -> int | None:
        """The earliest time after `now` something becomes claimable without a write: a lease
        deadline passing or a nack delay ending (for long-poll claims; a stale heap entry only
        makes a waiter look once more)."""
        i = self.free.bisect_right((now, 1 << 65))
        due = [at for at, _ in self.free.islice(i, i + 1)]
        if self.expiry and self.expiry[0][0] + 1 > now:
            due.append(self.expiry[0][0] + 1)
        return min(due) if due else None


def state_of(topic: Any) -> QueueState:
    """The projection of a queue topic, created on first use."""
    qs: QueueState | None = topic.ext.get(EXT_KEY)
    if qs is None:
        qs = topic.ext[EXT_KEY] = QueueState(cursor=topic.seq_base)
    return qs


def apply(qs: QueueState, ev: Event) -> None:
    """Rule 1: the effect of one event."""
    kind = ev[0]
    if kind == "C":
        _claimed(qs, ev)
        return
    if kind == "A":
        _acked(qs, ev[2], ev[3])
        return
    seq = int(ev[1])
    lease: Lease | None
    if kind == "c":
        _, _, node, lease_id, deadline, delivery, _ts = ev
        qs._unfree(seq)
        new = Lease(seq, str(node), str(lease_id), int(deadline), int(delivery))
        qs.leases[seq] = new
        qs.deliveries[seq] = new.delivery
        qs._expire_at(new.deadline, (seq,), (new.lease_id,))
        if seq >= qs.cursor:
            qs.cursor = seq + 1
        _bump_counter(qs, str(lease_id))
        qs.stats["claimed"] += 1
    elif kind == "r":
        _, _, lease_id, ready_at, _ts, why = ev
        lease = qs.leases.get(seq)
        if lease is not None and lease.lease_id == lease_id:
            del qs.leases[seq]
            qs._free(seq, int(ready_at))
            qs.stats["expired" if why == "expired" else "nacked"] += 1
    elif kind == "x":
        _, _, lease_id, deadline, _ts = ev
        lease = qs.leases.get(seq)
        if lease is not None and lease.lease_id == lease_id:
            lease.deadline = int(deadline)
            qs._expire_at(lease.deadline, (seq,), (lease.lease_id,))
            qs.stats["extended"] += 1
    elif kind == "a":
        _acked(qs, [seq], [ev[2]])
    elif kind == "d":
        qs._unfree(seq)
        qs.leases.pop(seq, None)
        qs.moving[seq] = (str(ev[2]), int(ev[3]))
        qs.stats["dead_lettered"] += 1
    elif kind == "f":
        forget(qs, seq)


def _claimed(qs: QueueState, ev: Event) -> None:
    """A "C" event: one "c" per job, in order, at the cost of one loop."""
    _, _ts, node, deadline, seqs, ids, deliveries = ev
    node, deadline = str(node), int(deadline)
    live, counts, ready_at = qs.leases, qs.deliveries, qs.ready_at
    for seq, lease_id, delivery in zip(seqs, ids, deliveries, strict=True):
        if ready_at:
            qs._unfree(seq)
        live[seq] = Lease(seq, node, lease_id, deadline, delivery)
        counts[seq] = delivery
    if seqs:
        qs._expire_at(deadline, tuple(seqs), tuple(ids))
        top = max(seqs)
        if top >= qs.cursor:
            qs.cursor = top + 1
        if ids[-1] is not qs.issued:  # replayed: the counter may be behind (Rule 4)
            for lease_id in ids:
                _bump_counter(qs, lease_id)
        qs.stats["claimed"] += len(seqs)


def _acked(qs: QueueState, seqs: list[int], ids: list[str]) -> None:
    """An "A" event (or one "a"): each lease still current ends and its job is forgotten."""
    live, counts = qs.leases, qs.deliveries
    n = 0
    for seq, lease_id in zip(seqs, ids, strict=True):
        lease = live.get(seq)
        if lease is not None and lease.lease_id == lease_id:
            del live[seq]
            counts.pop(seq, None)
            n += 1
    qs.stats["acked"] += n


def forget(qs: QueueState, seq: int) -> None:
    """The job left the jobs log (acked, deleted, expired, moved): drop what we know of it."""
    qs._unfree(seq)
    qs.leases.pop(seq, None)
    qs.deliveries.pop(seq, None)
    qs.moving.pop(seq, None)


def _bump_counter(qs: QueueState, lease_id: str) -> None:
    if lease_id is qs.issued:  # claimed live: the counter already counts it
        return
    nonce, _, n = lease_id.rpartition(".")
    if nonce == qs.nonce and n.isdigit():
        qs.counter = max(qs.counter, int(n))


def release_all(qs: QueueState, now: int) -> int:
    """A restart with non-durable leases (seeds 10.6): every lease ends and its job is
    claimable at once, exactly as if all had expired. Delivery counts are kept."""
    n = len(qs.leases)
    for seq in list(qs.leases):
        del qs.leases[seq]
        qs._free(seq, now)
    qs.expiry.clear()
    return n


# ---- snapshots (a checkpoint is the leases log compacted to its projection) -------------------


def snapshot(qs: QueueState) -> dict[str, Any]:
    return {
        "cursor": qs.cursor,
        "leases": [[x.seq, x.node, x.lease_id, x.deadline, x.delivery] for x in qs.leases.values()],
        "deliveries": [[s, n] for s, n in qs.deliveries.items() if s not in qs.leases],
        "free": [[at, s] for at, s in qs.free],
        "moving": [[s, t, d] for s, (t, d) in qs.moving.items()],
        "stats": dict(qs.stats),
    }


def restore(topic: Any, snap: dict[str, Any] | None) -> QueueState:
    qs = topic.ext[EXT_KEY] = QueueState(cursor=topic.seq_base)
    if not snap:
        return qs
    qs.cursor = int(snap.get("cursor", topic.seq_base))
    for s, n in snap.get("deliveries", []):
        qs.deliveries[int(s)] = int(n)
    for s, node, lease_id, deadline, delivery in snap.get("leases", []):
        apply(qs, ["c", s, node, lease_id, deadline, delivery, 0])
    for at, s in snap.get("free", []):
        qs._free(int(s), int(at))
    for s, t, d in snap.get("moving", []):
        qs.moving[int(s)] = (str(t), int(d))
    qs.stats.update({k: int(v) for k, v in snap.get("stats", {}).items() if k in qs.stats})
    return qs
