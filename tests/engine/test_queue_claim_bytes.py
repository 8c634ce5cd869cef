"""Issue 23 item 5: a claim answers at most `max_bytes` of records (engine/queues/queues.py Rule 4).

`POST /claim {"max": 10000}` over 300 x 1 MB jobs used to lease all 300 and build one 300 MB
answer. Now a claimer gets the jobs that fit (always at least one) and the others are never
leased: no lease event, no delivery counted, the freelist and the claim cursor as they were,
so the next claim gets them, in order, and a cohort never skips a job.
"""

from __future__ import annotations

from topicsrv.clock import FakeClock
from topicsrv.engine import Engine
from topicsrv.engine.log.records import prepare_json
from topicsrv.engine.queues.leases import state_of
from topicsrv.engine.queues.queues import Claimer

from .test_queues import claim, mkq, qstats, seqs

KB = 1000


def big(eng: Engine, n: int, size: int = 10 * KB, name: str = "q") -> list[int]:
    res, _ = eng.write(name, [prepare_json({"data": "x" * size}, i) for i in range(n)])
    out: list[int] = res["seqs"]
    return out


def test_a_claim_takes_only_the_jobs_that_fit_and_leases_nothing_else(eng: Engine) -> None:
    mkq(eng, lease_ms=60_000)
    big(eng, 10)
    [jobs] = claim(eng, Claimer("w", 10_000, None, max_bytes=35 * KB))
    assert seqs(jobs) == [1, 2, 3]  # three 10 KB records fit in 35 KB, the fourth does not
    assert sum(len(j.to_json("q")) for j in jobs) < 35 * KB
    st = qstats(eng)
    assert (st["in_flight"], st["ready"]) == (3, 7)
    qs = state_of(eng.get("q"))
    assert qs.cursor == 4 and set(qs.deliveries) == {1, 2, 3}  # 4.. never counted
    [more] = claim(eng, Claimer("w", 10_000, None, max_bytes=1))  # one even over the cap
    assert seqs(more) == [4]
    [rest] = claim(eng, Claimer("w", 10_000))
    assert seqs(rest) == list(range(5, 11))


def test_freelist_jobs_left_out_go_back_as_they_were(eng: Engine, clock: FakeClock) -> None:
    mkq(eng, lease_ms=1000)
    big(eng, 4)
    claim(eng, Claimer("a", 4, None))
    clock.advance(2000)  # all four leases expire: the freelist holds 1..4
    [jobs] = claim(eng, Claimer("b", 4, None, max_bytes=25 * KB))
    assert [(j.seq, j.delivery) for j in jobs] == [(1, 2), (2, 2)]
    qs = state_of(eng.get("q"))
    assert [seq for _, seq in qs.free] == [3, 4] and qs.deliveries[3] == 1
    [after] = claim(eng, Claimer("c", 4, None))
    assert [(j.seq, j.delivery) for j in after] == [(3, 2), (4, 2)]


def test_a_cohort_never_skips_a_job_left_out(eng: Engine) -> None:
    """Dealt round-robin, claimer a gets 1, 3, 5 and b gets 2, 4, 6; a's cap leaves 3 out, so
    every fresh job from 3 on is left out (b keeps 2): the cursor stays at 3."""
    mkq(eng, lease_ms=60_000)
    big(eng, 8)
    a, b = claim(eng, Claimer("a", 3, None, max_bytes=15 * KB), Claimer("b", 3, None))
    assert (seqs(a), seqs(b)) == ([1], [2])
    assert state_of(eng.get("q")).cursor == 3
    [rest] = claim(eng, Claimer("c", 100, None))
    assert seqs(rest) == [3, 4, 5, 6, 7, 8]
