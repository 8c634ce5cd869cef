"""Lease ids fence acks (seeds 10.2): one is never handed out twice for different leases."""

from __future__ import annotations

from topicsrv.engine import Engine
from topicsrv.engine.log.records import prepare_json
from topicsrv.engine.queues.queues import Claimer


def claim_one(eng: Engine) -> tuple[int, str]:
    outs, _, _ = eng.claim("q", [Claimer("w")])
    job = outs[0][0]
    return job.seq, job.lease_id


def test_a_recreated_queue_never_reissues_a_lease_id_of_its_predecessor(eng: Engine) -> None:
    eng.put_topic("q", {"type": "queue"})
    eng.write("q", [prepare_json({"data": 1})])
    seq, old = claim_one(eng)
    eng.delete_topic("q")
    eng.put_topic("q", {"type": "queue"})
    eng.write("q", [prepare_json({"data": 2})])
    assert claim_one(eng)[0] == seq  # same seq, same node: only the lease id tells them apart
    result, _ = eng.ack("q", "w", [seq], [old])
    assert result["acked"] == [] and result["skipped"] == [{"seq": seq, "reason": "stale_lease"}]
    assert eng.get("q").count == 1
