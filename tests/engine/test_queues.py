"""Lease queues in the engine (seeds section 10) on a fake clock: claim order, cohort
dealing, expiry reclaim, nack delay, extend, fencing, acks, and the queue's state."""

from __future__ import annotations

from typing import Any

import orjson

from topicsrv.clock import FakeClock
from topicsrv.engine import Engine
from topicsrv.engine.log.records import prepare_json
from topicsrv.engine.queues import leases
from topicsrv.engine.queues.queues import Claimer, Job, deal


def mkq(eng: Engine, name: str = "q", **cfg: Any) -> None:
    eng.put_topic(name, {"type": "queue", **cfg})


def produce(eng: Engine, n: int, name: str = "q") -> list[int]:
    res, _ = eng.write(name, [prepare_json({"data": {"i": i}}, i) for i in range(n)])
    seqs: list[int] = res["seqs"]
    return seqs


def claim(eng: Engine, *claimers: Claimer, name: str = "q") -> list[list[Job]]:
    outs, _, moves = eng.claim(name, list(claimers))
    assert moves == []  # no journal: dead-letter copies are durable at once
    return outs


def one(eng: Engine, node: str = "w", mx: int = 1, lease_ms: int | None = None, name: str = "q") -> list[Job]:
    return claim(eng, Claimer(node, mx, lease_ms), name=name)[0]


def seqs(jobs: list[Job]) -> list[int]:
    return [j.seq for j in jobs]


def qstats(eng: Engine, name: str = "q") -> dict[str, int]:
    out: dict[str, int] = eng.state(name)["queue"]
    return out


# ---- claim order and dealing -------------------------------------------------------------------


def test_greedy_claims_take_the_oldest_jobs_in_seq_order(eng: Engine, clock: FakeClock) -> None:
    mkq(eng, lease_ms=1000)
    produce(eng, 5)
    a = one(eng, "a", 2)
    b = one(eng, "b", 2, lease_ms=50)
    assert (seqs(a), seqs(b), seqs(one(eng, "c", 5)), one(eng, "d", 5)) == ([1, 2], [3, 4], [5], [])
    now = clock.now_ms()
    assert [(j.deadline, j.delivery) for j in a + b] == [(now + 1000, 1)] * 2 + [(now + 50, 1)] * 2
    assert len({j.lease_id for j in a + b}) == 4
    rec = orjson.loads(a[0].to_json("q"))
    assert rec == {"$seq": 1, "$ts": now, "data": {"i": 0}, "lease_id": a[0].lease_id,
                   "deadline": now + 1000, "delivery": 1, "topic": "q"}


def test_deal_is_proportional_to_max() -> None:
    assert deal([10] * 10, 50) == [5] * 10
    assert deal([10] * 10, 100) == [10] * 10
    assert deal([2, 8], 5) == [1, 4]
    assert deal([3, 7], 5) == [2, 3]  # equal remainders: the earlier arrival first
    assert deal([1, 2, 3], 200) == [1, 2, 3]  # enough for all: what each asked for
    assert deal([10] * 10, 3) == [1, 1, 1] + [0] * 7  # fewer jobs than claimers
    for maxes, avail in (([1, 5, 9, 2], 7), ([4, 4, 1], 5), ([7, 3, 3, 3], 11)):
        got = deal(maxes, avail)
        assert sum(got) == avail and all(0 <= g <= m for g, m in zip(got, maxes, strict=True))
        total = sum(maxes)
        assert all(abs(g - avail * m / total) < 1 for g, m in zip(got, maxes, strict=True))


def test_a_cohort_of_ten_over_fifty_jobs_gets_five_each_round_robin(eng: Engine) -> None:
    mkq(eng)
    produce(eng, 50)
    outs = claim(eng, *[Claimer(f"w{i}", 10) for i in range(10)])
    assert [len(o) for o in outs] == [5] * 10
    assert seqs(outs[0]) == [1, 11, 21, 31, 41]  # round-robin: everyone gets old work
    assert sorted(s for o in outs for s in seqs(o)) == list(range(1, 51))


def test_a_cohort_with_uneven_maxes_and_too_few_jobs(eng: Engine) -> None:
    mkq(eng)
    produce(eng, 5)
    outs = claim(eng, Claimer("a", 2), Claimer("b", 8))
    assert [len(o) for o in outs] == [1, 4]
    produce(eng, 3)
    outs = claim(eng, *[Claimer(f"w{i}", 10) for i in range(10)])
    assert [seqs(o) for o in outs] == [[6], [7], [8]] + [[]] * 7


# ---- expiry, nack, extend ----------------------------------------------------------------------


def test_expired_leases_are_served_before_fresh_jobs_in_deadline_order(eng: Engine, clock: FakeClock) -> None:
    mkq(eng)
    produce(eng, 5)
    assert seqs(one(eng, "a", lease_ms=300)) == [1]
    assert seqs(one(eng, "b", lease_ms=100)) == [2]
    assert seqs(one(eng, "c", lease_ms=200)) == [3]
    clock.advance(300)  # 1's deadline is now: not yet reclaimable (now > deadline)
    got = one(eng, "d", 3)
    assert seqs(got) == [2, 3, 4] and [j.delivery for j in got] == [2, 2, 1]
    clock.advance(1)
    got = one(eng, "e", 2)
    assert seqs(got) == [1, 5] and [j.delivery for j in got] == [2, 1]
    assert leases.state_of(eng.get("q")).stats["expired"] == 3


def test_nack_delay_holds_the_job_back_then_it_comes_first(eng: Engine, clock: FakeClock) -> None:
    mkq(eng)
    produce(eng, 3)
    job = one(eng)[0]
    res, _ = eng.nack("q", "w", [1], [job.lease_id], delay_ms=500)
    assert res == {"topic": "q", "released": [1], "skipped": [], "ready_at": clock.now_ms() + 500}
    assert qstats(eng)["delayed"] == 1 and qstats(eng)["ready"] == 2
    assert seqs(one(eng)) == [2]
    clock.advance(499)
    assert seqs(one(eng)) == [3]
    assert one(eng) == []
    clock.advance(1)
    assert qstats(eng)["delayed"] == 0
    again = one(eng)
    assert seqs(again) == [1] and again[0].delivery == 2 and again[0].lease_id != job.lease_id
    res, _ = eng.nack("q", "w", [1])  # no delay: claimable at once, before fresh jobs
    produce(eng, 1)
    assert seqs(one(eng)) == [1]


def test_extend_moves_the_deadline_and_keeps_the_delivery(eng: Engine, clock: FakeClock) -> None:
    mkq(eng, lease_ms=700)
    produce(eng, 1)
    job = one(eng, lease_ms=100)[0]
    clock.advance(50)
    res, _ = eng.extend("q", "w", [1], [job.lease_id], lease_ms=1000)
    assert res == {"topic": "q", "extended": [1], "deadlines": [clock.now_ms() + 1000], "skipped": []}
    clock.advance(200)  # past the first deadline: still leased
    assert one(eng, "x") == [] and qstats(eng)["in_flight"] == 1
    res, _ = eng.extend("q", "w", [1])  # default: the queue's lease_ms
    assert res["deadlines"] == [clock.now_ms() + 700]
    clock.advance(701)
    again = one(eng, "x")
    assert seqs(again) == [1] and again[0].delivery == 2


# ---- fencing and acks --------------------------------------------------------------------------


def test_a_stale_lease_id_is_skipped_and_the_job_kept(eng: Engine, clock: FakeClock) -> None:
    mkq(eng)
    produce(eng, 1)
    old = one(eng, lease_ms=10)[0]
    clock.advance(11)
    new = one(eng)[0]  # the same node holds it again, under a new lease
    assert new.lease_id != old.lease_id
    for op in (eng.ack, eng.nack, eng.extend):
        res, _ = op("q", "w", [1], [old.lease_id])
        assert res["skipped"] == [{"seq": 1, "reason": "stale_lease"}]
    lease = leases.state_of(eng.get("q")).held(1)
    assert lease is not None and lease.lease_id == new.lease_id and lease.deadline == new.deadline
    assert eng.get("q").record_at(1) is not None
    res, _ = eng.ack("q", "w", [1], [new.lease_id])
    assert res["acked"] == [1]


def test_another_node_is_skipped_and_unheld_seqs_are_named(eng: Engine) -> None:
    mkq(eng)
    produce(eng, 3)
    one(eng, "a", 2)
    res, _ = eng.ack("q", "b", [1, 3, 1, 99])
    assert res == {"topic": "q", "acked": [], "skipped": [
        {"seq": 1, "reason": "not_holder"}, {"seq": 3, "reason": "not_held"},
        {"seq": 1, "reason": "not_held"}, {"seq": 99, "reason": "not_held"}]}
    res, _ = eng.ack("q", "a", [2, 2])  # a seq named twice is acked once
    assert res["acked"] == [2] and res["skipped"] == [{"seq": 2, "reason": "not_held"}]
    assert eng.get("q").record_at(1) is not None and leases.state_of(eng.get("q")).held(1) is not None


def test_ack_deletes_the_job_and_is_idempotent(eng: Engine, clock: FakeClock) -> None:
    mkq(eng)
    produce(eng, 2)
    job = one(eng, lease_ms=10)[0]
    res, _ = eng.ack("q", "w", [1], [job.lease_id])
    assert res == {"topic": "q", "acked": [1], "skipped": []}
    res, _ = eng.ack("q", "w", [1], [job.lease_id])
    assert res == {"topic": "q", "acked": [], "skipped": [{"seq": 1, "reason": "not_held"}]}
    assert eng.get("q").record_at(1) is None and eng.diff("q", 0).seqs == [2]
    clock.advance(1000)
    assert seqs(one(eng, mx=10)) == [2]
    assert one(eng, mx=10) == []


def test_ack_after_the_deadline_is_applied_until_a_claim_reclaims(eng: Engine, clock: FakeClock) -> None:
    mkq(eng)
    produce(eng, 2)
    a, b = one(eng, mx=2, lease_ms=10)
    clock.advance(100)
    res, _ = eng.ack("q", "w", [1], [a.lease_id])
    assert res["acked"] == [1]
    assert seqs(one(eng, "w", 5)) == [2]  # the pass reclaims 2 (for w again): a new lease
    res, _ = eng.ack("q", "w", [2], [b.lease_id])
    assert res["skipped"] == [{"seq": 2, "reason": "stale_lease"}]


# ---- jobs that leave the jobs log --------------------------------------------------------------


def test_a_job_deleted_while_leased_or_free_is_never_delivered(eng: Engine, clock: FakeClock) -> None:
    mkq(eng)
    produce(eng, 4)
    one(eng, "a", 2, lease_ms=10)  # 1, 2 leased
    eng.nack("q", "a", [2])  # 2 on the freelist
    eng.delete_seqs("q", [1, 2])
    assert qstats(eng) == {"ready": 2, "in_flight": 0, "delayed": 0, "dead_lettered": 0,
                           "oldest_ready_age_ms": 0}
    clock.advance(100)
    assert seqs(one(eng, "b", 10)) == [3, 4]
    assert one(eng, "b", 10) == []


def test_a_delayed_job_deleted_is_not_counted(eng: Engine, clock: FakeClock) -> None:
    mkq(eng)
    produce(eng, 2)
    one(eng)
    eng.nack("q", "w", [1], delay_ms=1000)
    assert qstats(eng)["delayed"] == 1
    eng.delete_records("q", 2, None)
    assert qstats(eng) == {"ready": 1, "in_flight": 0, "delayed": 0, "dead_lettered": 0,
                           "oldest_ready_age_ms": 0}
    clock.advance(1000)
    assert seqs(one(eng, mx=5)) == [2]


def test_ttl_expiry_of_leased_and_free_jobs(eng: Engine, clock: FakeClock) -> None:
    mkq(eng, ttl_ms=1000)
    produce(eng, 3)
    one(eng, mx=2, lease_ms=5000)  # 1, 2 leased past the TTL
    eng.nack("q", "w", [2])
    clock.advance(500)
    produce(eng, 1)  # 4 outlives the others
    clock.advance(501)
    assert qstats(eng) == {"ready": 1, "in_flight": 0, "delayed": 0, "dead_lettered": 0,
                           "oldest_ready_age_ms": 501}
    assert seqs(one(eng, mx=10)) == [4]
    clock.advance(10_000)
    assert one(eng, mx=10) == []


# ---- the queue's state -------------------------------------------------------------------------


def test_stats_are_exact_in_every_state(eng: Engine, clock: FakeClock) -> None:
    mkq(eng, max_deliveries=2, dead_letter="dlq")
    t0 = clock.now_ms()
    for _ in range(4):  # seq i is produced at t0 + 10 * (i - 1)
        produce(eng, 1)
        clock.advance(10)
    clock.set(t0 + 100)

    def st(ready: int, in_flight: int, delayed: int, dl: int, oldest: int | None) -> None:
        age = 0 if oldest is None else clock.now_ms() - (t0 + 10 * (oldest - 1))
        assert qstats(eng) == {"ready": ready, "in_flight": in_flight, "delayed": delayed,
                               "dead_lettered": dl, "oldest_ready_age_ms": age}

    st(4, 0, 0, 0, 1)
    one(eng, lease_ms=100)
    st(3, 1, 0, 0, 2)
    eng.nack("q", "w", [1], delay_ms=50)
    st(3, 0, 1, 0, 2)
    clock.advance(50)
    st(4, 0, 0, 0, 1)
    assert seqs(one(eng, mx=2, lease_ms=20)) == [1, 2]
    st(2, 2, 0, 0, 3)
    clock.advance(20)  # at the deadline: still in flight
    st(2, 2, 0, 0, 3)
    clock.advance(1)  # past it: ready again, before any claim pass records it
    st(4, 0, 0, 0, 1)
    assert seqs(one(eng, mx=3, lease_ms=1000)) == [2, 3, 4]  # 1 (delivered twice) is dead-lettered
    st(0, 3, 0, 1, None)
    eng.ack("q", "w", [2, 3, 4])
    st(0, 0, 0, 1, None)
    assert eng.get("q").count == 0 and eng.get("dlq").count == 1


def test_counters_count_the_lifecycle(eng: Engine, clock: FakeClock) -> None:
    mkq(eng)
    produce(eng, 3)
    one(eng, mx=3, lease_ms=10)
    eng.ack("q", "w", [1])
    eng.nack("q", "w", [2])
    clock.advance(11)
    assert seqs(one(eng, mx=3)) == [2, 3]
    eng.extend("q", "w", [2, 3])
    assert leases.state_of(eng.get("q")).stats == {
        "claimed": 5, "acked": 1, "nacked": 1, "expired": 1, "extended": 2, "dead_lettered": 0,
        "dead_letter_errors": 0}
