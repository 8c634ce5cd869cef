"""Dead-lettering (seeds 10.7): after `max_deliveries` a job moves to the `dead_letter` topic
with `meta.$dead_letter_*` provenance, its data, tag and node verbatim."""

from __future__ import annotations

from typing import Any

import orjson

from topicsrv.clock import FakeClock
from topicsrv.engine import Engine
from topicsrv.engine.log.records import PreparedRecord, prepare_fields, prepare_json
from topicsrv.engine.queues import leases
from topicsrv.engine.queues.queues import Claimer, Job


def claim(eng: Engine, node: str = "w", mx: int = 1, lease_ms: int | None = None) -> list[Job]:
    outs, _, moves = eng.claim("q", [Claimer(node, mx, lease_ms)])
    assert moves == []  # no journal: the copy is durable at once, the job deleted at once
    return outs[0]


def deliver(eng: Engine, clock: FakeClock, times: int) -> None:
    """Claim job 1 `times` times, alternately letting the lease expire and nacking it."""
    for i in range(times):
        got = claim(eng, lease_ms=10)
        assert [(j.seq, j.delivery) for j in got] == [(1, i + 1)]
        if i % 2:
            eng.nack("q", "w", [1])
        else:
            clock.advance(11)


def dl_records(eng: Engine, name: str = "dlq") -> list[dict[str, Any]]:
    return [orjson.loads(b) for b in eng.diff(name, 0).records]


def provenance(seq: int, deliveries: int, ts: int) -> dict[str, str]:
    return {"$dead_letter_topic": "q", "$dead_letter_seq": str(seq),
            "$dead_letter_deliveries": str(deliveries), "$dead_letter_reason": "max_deliveries",
            "$dead_letter_ts": str(ts)}


def _moved_after_max_deliveries(eng: Engine, clock: FakeClock, rec: PreparedRecord) -> dict[str, Any]:
    eng.put_topic("q", {"type": "queue", "max_deliveries": 3, "dead_letter": "dlq"})
    eng.write("q", [rec])
    deliver(eng, clock, 3)
    clock.advance(5)
    assert claim(eng, mx=5) == []  # the 4th delivery is a move instead
    assert eng.get("q").record_at(1) is None and eng.get("q").count == 0
    assert eng.state("q")["queue"]["dead_lettered"] == 1
    assert leases.state_of(eng.get("q")).stats["dead_lettered"] == 1
    (copy,) = dl_records(eng)
    assert copy["$seq"] == 1 and eng.get("dlq").type == "log"
    assert copy["meta"] == {**copy["meta"], **provenance(1, 3, clock.now_ms())}
    claim(eng, mx=5)
    assert len(dl_records(eng)) == 1  # moved once
    return dict(copy)


def test_a_json_job_is_dead_lettered_verbatim_with_provenance(eng: Engine, clock: FakeClock) -> None:
    data = {"x": [1, {"y": None}], "s": "é"}
    copy = _moved_after_max_deliveries(eng, clock, prepare_json(
        {"data": data, "tag": "t:1", "node": "n1", "meta": {"k": "v"}}))
    assert copy["data"] == data and copy["$tag"] == "t:1" and copy["$node"] == "n1"
    assert copy["meta"] == {"k": "v", **provenance(1, 3, clock.now_ms())}


def test_a_field_record_is_dead_lettered_as_a_data_object(eng: Engine, clock: FakeClock) -> None:
    copy = _moved_after_max_deliveries(eng, clock, prepare_fields(
        [b"a", b"1", b"b", b"two"], node="n2", tag="t:2"))
    assert copy["data"] == {"a": "1", "b": "two"} and copy["$tag"] == "t:2" and copy["$node"] == "n2"
    assert copy["meta"] == provenance(1, 3, clock.now_ms())


def test_a_field_record_without_node_or_tag(eng: Engine, clock: FakeClock) -> None:
    copy = _moved_after_max_deliveries(eng, clock, prepare_fields([b"k", b"\xff", b"k", b"v"]))
    assert copy["data"] == {"$fields": [["k", {"$base64": "/w=="}], ["k", "v"]]}
    assert "$tag" not in copy and "$node" not in copy


def test_without_a_dead_letter_topic_a_job_is_reclaimed_indefinitely(eng: Engine, clock: FakeClock) -> None:
    eng.put_topic("q", {"type": "queue", "max_deliveries": 2})
    eng.write("q", [prepare_json({"data": 1})])
    deliver(eng, clock, 7)
    assert eng.state("q")["queue"]["dead_lettered"] == 0


def test_max_deliveries_zero_never_dead_letters(eng: Engine, clock: FakeClock) -> None:
    eng.put_topic("q", {"type": "queue", "dead_letter": "dlq"})
    eng.write("q", [prepare_json({"data": 1})])
    deliver(eng, clock, 7)
    assert eng.find("dlq") is None


def test_a_refused_copy_keeps_the_job_until_the_dead_letter_topic_has_room(
        eng: Engine, clock: FakeClock) -> None:
    eng.put_topic("dlq", {"cap_records": 1, "discard": "reject"})
    eng.write("dlq", [prepare_json({"data": "full"})])
    eng.put_topic("q", {"type": "queue", "max_deliveries": 1, "dead_letter": "dlq"})
    eng.write("q", [prepare_json({"data": i}) for i in range(2)])
    claim(eng, lease_ms=10)
    clock.advance(11)
    assert [j.seq for j in claim(eng, mx=5)] == [2]  # 1 cannot move: it stays, undelivered
    qs = leases.state_of(eng.get("q"))
    assert qs.stats["dead_letter_errors"] == 1 and qs.stats["dead_lettered"] == 0
    assert eng.get("q").record_at(1) is not None
    clock.advance(1000)  # (a refused copy may be retried only after a while)
    assert eng.state("q")["queue"] == {"ready": 1, "in_flight": 1, "delayed": 0, "dead_lettered": 0,
                                       "oldest_ready_age_ms": 1011}
    eng.delete_seqs("dlq", [1])
    assert claim(eng, mx=5) == []
    assert [r["data"] for r in dl_records(eng)] == [0]
    assert eng.get("q").record_at(1) is None and qs.stats["dead_lettered"] == 1


def test_a_cohort_pass_moves_and_deals_in_one_step(eng: Engine, clock: FakeClock) -> None:
    eng.put_topic("q", {"type": "queue", "max_deliveries": 1, "dead_letter": "dlq"})
    eng.write("q", [prepare_json({"data": i}) for i in range(4)])
    claim(eng, mx=2, lease_ms=10)
    clock.advance(11)
    outs, _, _ = eng.claim("q", [Claimer("a", 2), Claimer("b", 2)])
    assert [[j.seq for j in o] for o in outs] == [[3], [4]]
    assert [r["meta"]["$dead_letter_seq"] for r in dl_records(eng)] == ["1", "2"]
