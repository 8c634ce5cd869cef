"""Model-based test of the lease projection (seeds section 10) against a plain model.

The model keeps, per job: when it was produced, how often it was delivered, its lease
(node, lease id, deadline) or its place on the freelist (ready_at), and whether it left the
queue (acked, deleted, dead-lettered). A claim pass is derived from the seeds' words:
expired leases are released (ready at deadline + 1), released jobs are served first in
(ready_at, seq) order, then never-delivered jobs in seq order, dealt round-robin in
proportion to `max`; a released job at `max_deliveries` is dead-lettered instead.
Hypothesis drives produce / claim cohorts / ack / nack / extend (right, stale or no lease
id; holder or another node) / clock / delete / trim / reconfigure / checkpoint / restart; after every step the
projection, the queue's state and every answer must match the model exactly.

A restart rebuilds the QueueState as recovery does (storage/recovery.py): the last
checkpoint's `leases.snapshot`, then every leases-log event logged after it (JSON round
trip, like the WAL), then `release_all` when leases are not durable, then `resolve_moves`,
then the startup checkpoint.
The jobs log (the Topic) is kept: its deletes are durable in this model.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from topicsrv.clock import FakeClock
from topicsrv.engine import Engine
from topicsrv.engine.journal import NullJournal
from topicsrv.engine.log.records import prepare_json
from topicsrv.engine.queues import leases, queues
from topicsrv.engine.queues.queues import Claimer, deal

NODES = ["a", "b", "c"]
LEASE_MS = 100


class Recording(NullJournal):
    """The leases log as the WAL would keep it: events after the last checkpoint, as JSON."""

    def __init__(self) -> None:
        self.events: list[bytes] = []

    def leases_logged(self, topic: Any, events: list[list[Any]]) -> None:
        self.events.append(orjson.dumps(events))


@dataclass
class MLease:
    node: str
    lease_id: str
    deadline: int


@dataclass
class MJob:
    ts: int
    deliveries: int = 0
    lease: MLease | None = None
    free_at: int | None = None  # on the freelist, claimable from then
    gone: str | None = None  # "acked" | "deleted" | "dead"
    ids: list[str] = field(default_factory=list)  # every lease id it was given


class QueueModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.clock = FakeClock()
        self.journal = Recording()
        self.eng = Engine(clock=self.clock, journal=self.journal)
        self.jobs: dict[int, MJob] = {}
        self.dead: list[tuple[int, int]] = []  # (seq, deliveries) in dead-letter order
        self.snap: bytes = orjson.dumps(None)
        self.seen_ids: set[str] = set()
        self.durable = False
        self.max_deliveries = 0
        self.dead_letter: str | None = None

    @initialize(durable=st.booleans(), max_deliveries=st.sampled_from([0, 2, 3]), dl=st.booleans())
    def create(self, durable: bool, max_deliveries: int, dl: bool) -> None:
        self.durable, self.max_deliveries = durable, max_deliveries
        self.dead_letter = "dlq" if dl else None
        self.eng.put_topic("q", {"type": "queue", "lease_ms": LEASE_MS, "leases_durable": durable,
                                 "max_deliveries": max_deliveries, "dead_letter": self.dead_letter})

    # ---- helpers ---------------------------------------------------------------------------

    @property
    def now(self) -> int:
        return self.clock.now_ms()

    def qs(self) -> leases.QueueState:
        return leases.state_of(self.eng.get("q"))

    def pick(self, data: st.DataObject) -> int:
        """A seq: mostly one under a lease, else any produced one or one never produced."""
        held = sorted(s for s, j in self.jobs.items() if j.lease is not None)
        known = sorted(self.jobs) + [max(self.jobs, default=0) + 1]
        seq: int = data.draw(st.sampled_from(held) if held and data.draw(st.integers(0, 3)) else
                             st.sampled_from(known))
        return seq

    # ---- rules -----------------------------------------------------------------------------

    @rule(n=st.integers(1, 4))
    def produce(self, n: int) -> None:
        res, _ = self.eng.write("q", [prepare_json({"data": i}) for i in range(n)])
        for seq in res["seqs"]:
            self.jobs[seq] = MJob(self.now)

    @rule(cohort=st.lists(st.tuples(st.sampled_from(NODES), st.integers(1, 4),
                                    st.one_of(st.none(), st.integers(1, 300))), min_size=1, max_size=3))
    def claim(self, cohort: list[tuple[str, int, int | None]]) -> None:
        self.check_claim([Claimer(node, mx, lease_ms) for node, mx, lease_ms in cohort])

    def check_claim(self, claimers: list[Claimer]) -> int:
        now = self.now
        for j in self.jobs.values():  # lazy expiry
            if j.lease is not None and j.lease.deadline < now:
                j.free_at, j.lease = j.lease.deadline + 1, None
        want = sum(c.max for c in claimers)
        found: list[int] = []
        for _, seq in sorted((j.free_at, s) for s, j in self.jobs.items() if j.free_at is not None):
            j = self.jobs[seq]
            assert j.free_at is not None
            if len(found) >= want or j.free_at > now:
                break
            j.free_at = None
            if j.gone is not None:
                continue  # deleted meanwhile: forgotten
            if self.dead_letter and self.max_deliveries and j.deliveries >= self.max_deliveries:
                j.gone = "dead"
                self.dead.append((seq, j.deliveries))
                continue
            found.append(seq)
        fresh = [s for s, j in sorted(self.jobs.items()) if j.gone is None and j.deliveries == 0
                 and j.lease is None and j.free_at is None]
        found += fresh[: want - len(found)]
        left = deal([c.max for c in claimers], len(found))
        expect: list[list[tuple[int, int, int]]] = [[] for _ in claimers]
        pos = 0
        while pos < len(found):
            for i, c in enumerate(claimers):
                if left[i] and pos < len(found):
                    left[i] -= 1
                    j = self.jobs[found[pos]]
                    j.deliveries += 1
                    expect[i].append((found[pos], j.deliveries, now + (c.lease_ms or LEASE_MS)))
                    pos += 1
        outs, _, moves = self.eng.claim("q", claimers)
        assert moves == []
        assert [[(x.seq, x.delivery, x.deadline) for x in out] for out in outs] == expect
        for c, out in zip(claimers, outs, strict=True):
            for x in out:
                assert x.lease_id not in self.seen_ids  # lease ids are never reused
                self.seen_ids.add(x.lease_id)
                self.jobs[x.seq].lease = MLease(c.node, x.lease_id, x.deadline)
                self.jobs[x.seq].ids.append(x.lease_id)
                assert orjson.loads(x.blob)["$seq"] == x.seq
        return len(found)

    @rule(data=st.data(), op=st.sampled_from(["ack", "nack", "extend"]), n=st.integers(1, 3),
          who=st.sampled_from(["holder", *NODES]), fence=st.sampled_from(["none", "right", "stale"]),
          arg=st.one_of(st.none(), st.integers(0, 200)))
    def settle(self, data: st.DataObject, op: str, n: int, who: str, fence: str, arg: int | None) -> None:
        seqs = [self.pick(data) for _ in range(n)]
        holder = next((j.lease.node for s in seqs if (j := self.jobs.get(s)) and j.lease), "a")
        node = holder if who == "holder" else who
        ids: list[str] | None = None
        if fence != "none":
            ids = []
            for s in seqs:
                j = self.jobs.get(s)
                cur = j.lease.lease_id if j and j.lease else "x.0"
                old = [i for i in (j.ids if j else []) if i != cur] or ["x.1"]
                ids.append(cur if fence == "right" else data.draw(st.sampled_from(old)))
        now = self.now
        applied: list[int] = []
        skipped: list[dict[str, Any]] = []
        seen: set[int] = set()
        for i, s in enumerate(seqs):
            j = self.jobs.get(s)
            lease = j.lease if j else None
            if s in seen or j is None or lease is None:
                skipped.append({"seq": s, "reason": "not_held"})
            elif lease.node != node:
                skipped.append({"seq": s, "reason": "not_holder"})
            elif ids is not None and ids[i] != lease.lease_id:
                skipped.append({"seq": s, "reason": "stale_lease"})
            else:
                applied.append(s)
            seen.add(s)
        if op == "ack":
            res, _ = self.eng.ack("q", node, seqs, ids)
            assert res == {"topic": "q", "acked": applied, "skipped": skipped}
            for s in applied:
                self.jobs[s].lease, self.jobs[s].gone = None, "acked"
        elif op == "nack":
            delay = (arg or 0) if data.draw(st.booleans()) else 0
            res, _ = self.eng.nack("q", node, seqs, ids, delay_ms=delay)
            assert res == {"topic": "q", "released": applied, "skipped": skipped, "ready_at": now + delay}
            for s in applied:
                self.jobs[s].lease, self.jobs[s].free_at = None, now + delay
        else:
            ms = None if arg == 0 else arg
            res, _ = self.eng.extend("q", node, seqs, ids, lease_ms=ms)
            deadline = now + (ms or LEASE_MS)
            assert res == {"topic": "q", "extended": applied, "deadlines": [deadline] * len(applied),
                           "skipped": skipped}
            for s in applied:
                lease = self.jobs[s].lease
                assert lease is not None
                lease.deadline = deadline

    @rule(ms=st.sampled_from([0, 1, 5, 50, 99, 100, 101, 250]))
    def advance(self, ms: int) -> None:
        self.clock.advance(ms)

    @precondition(lambda self: self.jobs)
    @rule(data=st.data())
    def delete(self, data: st.DataObject) -> None:
        seq = self.pick(data)
        deleted, _ = self.eng.delete_seqs("q", [seq])
        j = self.jobs.get(seq)
        assert deleted == (1 if j is not None and j.gone is None else 0)
        if deleted:
            assert j is not None
            j.gone = "deleted"

    @rule(n=st.integers(0, 6))
    def trim(self, n: int) -> None:
        """XTRIM MAXLEN n: the oldest live jobs beyond n leave the jobs log (leased or not)."""
        self.eng.trim("q", maxlen=n)
        live = sorted(s for s, j in self.jobs.items() if j.gone is None)
        for s in live[: max(0, len(live) - n)]:
            self.jobs[s].gone = "deleted"

    @rule(max_deliveries=st.sampled_from([0, 1, 2, 3]), dl=st.booleans())
    def reconfigure(self, max_deliveries: int, dl: bool) -> None:
        self.max_deliveries, self.dead_letter = max_deliveries, "dlq" if dl else None
        self.eng.put_topic("q", {"max_deliveries": max_deliveries, "dead_letter": self.dead_letter})

    @rule()
    def checkpoint(self) -> None:
        self.snap = orjson.dumps(leases.snapshot(self.qs()))
        self.journal.events.clear()

    @rule()
    def restart(self) -> None:
        topic = self.eng.get("q")
        qs = leases.restore(topic, orjson.loads(self.snap))
        for frame in self.journal.events:
            for ev in orjson.loads(frame):
                leases.apply(qs, ev)
        if not self.durable:  # non-durable leases end with the process (seeds 10.6)
            leases.release_all(qs, self.now)
            for j in self.jobs.values():
                if j.lease is not None:
                    j.lease, j.free_at = None, self.now
        queues.resolve_moves(self.eng)
        self.checkpoint()  # the startup checkpoint (Storage.run) folds the old leases log in

    # ---- invariants ------------------------------------------------------------------------

    @invariant()
    def projection_matches(self) -> None:
        qs = self.qs()
        got = {s: (x.node, x.lease_id, x.deadline) for s, x in qs.leases.items()}
        assert got == {s: (j.lease.node, j.lease.lease_id, j.lease.deadline)
                       for s, j in self.jobs.items() if j.lease is not None}
        live = {s: j for s, j in self.jobs.items() if j.gone is None}
        assert {s: at for s, at in qs.ready_at.items() if s in live} == {
            s: j.free_at for s, j in live.items() if j.free_at is not None}
        assert {s: n for s, n in qs.deliveries.items() if s in live} == {
            s: j.deliveries for s, j in live.items() if j.deliveries}
        for s, j in live.items():  # no job lost: leased, on the freelist or still ahead
            assert (s in qs.leases) + (s in qs.ready_at) + (j.deliveries == 0 and s >= qs.cursor) == 1
        assert not qs.moving

    @invariant()
    def state_matches(self) -> None:
        now = self.now
        live = {s: j for s, j in self.jobs.items() if j.gone is None}
        in_flight = sum(1 for j in live.values() if j.lease is not None and j.lease.deadline >= now)
        delayed = sum(1 for j in live.values() if j.free_at is not None and j.free_at > now)
        ready = sorted(set(live) - {s for s, j in live.items() if (j.lease and j.lease.deadline >= now)
                                    or (j.free_at is not None and j.free_at > now)})
        assert self.eng.state("q", touch=False)["queue"] == {
            "ready": len(ready), "in_flight": in_flight, "delayed": delayed,
            "dead_lettered": len(self.dead),
            "oldest_ready_age_ms": now - live[ready[0]].ts if ready else 0}
        assert self.eng.get("q").count == len(live)
        dlq = self.eng.find("dlq")
        copies = [orjson.loads(b)["meta"] for b in self.eng.diff("dlq", 0).records] if dlq else []
        assert [(int(m["$dead_letter_seq"]), int(m["$dead_letter_deliveries"])) for m in copies] == self.dead

    def teardown(self) -> None:
        """Every job still in the queue comes out once every lease and delay has passed."""
        if not hasattr(self, "eng") or self.eng.find("q") is None:
            return
        self.clock.advance(10_000)
        while self.check_claim([Claimer("drain", 1000)]):
            pass
        assert all(j.gone is not None or (j.lease and j.lease.node == "drain") for j in self.jobs.values())


QueueModel.TestCase.settings = settings(
    max_examples=200, stateful_step_count=40, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
test_lease_projection_matches_the_model = QueueModel.TestCase
