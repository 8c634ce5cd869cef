"""Routers in the engine: mirrors and rings terminate, exactly_once, backpressure, source gaps."""

from __future__ import annotations

from collections import Counter
from typing import Any

import orjson

from topicsrv.clock import FakeClock
from topicsrv.engine import Engine
from topicsrv.engine.log.reads import FMT_RESP
from topicsrv.engine.log.records import prepare_fields, prepare_json
from topicsrv.engine.routing import routers


def write(eng: Engine, name: str, *recs: dict[str, Any]) -> dict[str, Any]:
    result, _ = eng.write(name, [prepare_json(r, i) for i, r in enumerate(recs)])
    return result


def records(eng: Engine, name: str, nodes: list[str] | None = None) -> list[dict[str, Any]]:
    return [orjson.loads(b) for b in eng.diff(name, 0, 10_000, nodes=nodes).records]


def pump(eng: Engine) -> None:
    for _ in range(1000):
        steps = [routers.forward(eng, r) for r in list(eng.routers.values())]
        if all(s.caught_up and not (s.forwarded or s.gap) for s in steps):
            return
    raise AssertionError("forwarding did not terminate")


def test_mirror_terminates_each_record_once_in_the_other_topic(eng: Engine) -> None:
    eng.router_put("ab", {"source": "a", "dest": "b", "allow_cycle": True})
    eng.router_put("ba", {"source": "b", "dest": "a", "allow_cycle": True})
    for i in range(20):
        write(eng, "a", {"data": f"a{i}", "node": "A"})
        write(eng, "b", {"data": f"b{i}", "node": "B"})
        if i % 3 == 0:
            pump(eng)
    pump(eng)
    for name in ("a", "b"):
        counts = Counter(r["data"] for r in records(eng, name))
        assert set(counts) == {f"{p}{i}" for p in "ab" for i in range(20)}
        assert set(counts.values()) == {1}  # each record exactly once, no echo
    # node filters: each node reads the other's records, never its own
    assert {r["$node"] for r in records(eng, "a", nodes=["A"])} == {"B"}
    assert {r["$node"] for r in records(eng, "b", nodes=["B"])} == {"A"}
    assert eng.router_get("ab")["skipped"] == 20  # b's copies of a's records stop there
    assert eng.find("a").ext.get("hops", {}) == {} or min(eng.find("a").ext["hops"]) > 0


def test_three_ring_with_node_filters(eng: Engine) -> None:
    ring = [("x", "y"), ("y", "z"), ("z", "x")]
    for source, dest in ring:
        eng.router_put(f"{source}{dest}", {"source": source, "dest": dest, "allow_cycle": True})
    assert {r["hop_cap"] for r in eng.router_list()} == {2}
    for i in range(10):
        for node in "xyz":
            write(eng, node, {"data": f"{node}{i}", "node": node.upper()})
        pump(eng)
    everything = {f"{n}{i}" for n in "xyz" for i in range(10)}
    for node in "xyz":
        got = records(eng, node)
        assert Counter(r["data"] for r in got) == Counter(everything)  # each exactly once
        others = records(eng, node, nodes=[node.upper()])
        assert {r["data"] for r in others} == {d for d in everything if not d.startswith(node)}


def test_max_hops_bounds_a_chain(eng: Engine) -> None:
    eng.router_put("ab", {"source": "a", "dest": "b"})
    eng.router_put("bc", {"source": "b", "dest": "c", "max_hops": 1})
    write(eng, "a", {"data": "from-a"})
    write(eng, "b", {"data": "direct-b"})
    pump(eng)
    assert [r["data"] for r in records(eng, "c")] == ["direct-b"]  # a's copy has hop 1 in b


def test_exactly_once_key_and_skip_on_recreate(eng: Engine) -> None:
    body = {"source": "a", "dest": "b", "guarantee": "exactly_once"}
    eng.router_put("r", body)
    write(eng, "a", *({"data": i, "meta": {"m": "1"}} for i in range(3)))
    eng.write("a", [prepare_fields([b"f", b"v"], node="n")])
    pump(eng)
    got = records(eng, "b")
    epoch = eng.find("a").epoch
    assert [r["meta"]["_topics_router"] for r in got[:3]] == [f"r/a/{epoch}/{s}" for s in (1, 2, 3)]
    assert got[0]["meta"]["m"] == "1"
    entry = eng.diff("b", 3, 1, fmt=FMT_RESP).records[0]
    assert b"$14\r\n_topics_router\r\n" in entry and entry.endswith(b"$5\r\n$node\r\n$1\r\nn\r\n")
    eng.router_delete("r")
    write(eng, "a", {"data": "later"})
    st, created, _ = eng.router_put("r", body)  # re-created: starts at earliest - 1 = 0 ...
    assert created and st["cursor"] == 4  # ... but the dest's evidence moves it to 4
    pump(eng)
    assert [r["data"] for r in records(eng, "b")] == [0, 1, 2, {"f": "v", "_topics_router": f"r/a/{epoch}/4"}, "later"]


def test_at_least_once_recreate_forwards_again(eng: Engine) -> None:
    eng.router_put("r", {"source": "a", "dest": "b"})
    write(eng, "a", {"data": 1})
    pump(eng)
    eng.router_delete("r")
    eng.router_put("r", {"source": "a", "dest": "b"})
    pump(eng)
    assert [r["data"] for r in records(eng, "b")] == [1, 1]


def test_reject_dest_blocks_and_resumes(eng: Engine, clock: FakeClock) -> None:
    eng.put_topic("b", {"cap_records": 3, "discard": "reject"})
    eng.router_put("r", {"source": "a", "dest": "b"})
    for i in range(5):  # the source ack never depends on the dest
        assert write(eng, "a", {"data": i})["seqs"] == [i + 1]
    step = routers.forward(eng, eng.routers["r"])
    assert step.forwarded == 3 and step.blocked is not None and step.blocked.code == "topic_full"
    st = eng.router_get("r")
    assert st["status"] == "blocked" and st["cursor"] == 3 and st["lag"] == 2
    assert st["last_error"]["code"] == "topic_full"
    since = st["last_error"]["since_ts"]
    clock.advance(10)
    step = routers.forward(eng, eng.routers["r"])
    assert step.blocked is not None and eng.router_get("r")["retries"] == 1
    assert eng.router_get("r")["last_error"]["since_ts"] == since
    assert write(eng, "a", {"data": 5})["seqs"] == [6]  # still accepted at once
    eng.delete_records("b", 3, None)  # room for two
    step = routers.forward(eng, eng.routers["r"])
    assert step.forwarded == 2 and step.blocked is not None
    eng.delete_records("b", 100, None)
    pump(eng)
    st = eng.router_get("r")
    assert st["status"] == "caught_up" and st["last_error"] is None and st["cursor"] == 6
    assert [orjson.loads(b)["data"] for b in eng.diff("b", 0, 100).records] == [5]
    assert st["forwarded"] == 6


def test_source_eviction_of_unforwarded_records_is_a_source_trim_tombstone(eng: Engine) -> None:
    eng.put_topic("a", {"cap_records": 4})
    eng.put_topic("b", {"cap_records": 2, "discard": "reject"})
    eng.router_put("r", {"source": "a", "dest": "b"})
    write(eng, "a", *({"data": i} for i in range(3)))  # seqs 1-3
    routers.forward(eng, eng.routers["r"])  # 1, 2 forwarded; blocked at 3
    write(eng, "a", *({"data": i} for i in range(3, 10)))  # evicts 1-6: 3-6 never forwarded
    res = eng.diff("b", 0, 100)
    assert [orjson.loads(b)["data"] for b in res.records] == [0, 1] and res.tombstone is None
    eng.put_topic("b", {"cap_records": 100})  # room again
    pump(eng)
    st = eng.router_get("r")
    assert st["source_trimmed"] == 4 and st["forwarded"] == 6 and st["cursor"] == 10
    res = eng.diff("b", 2, 100)  # a reader that had read both copies
    assert res.tombstone is not None
    tomb = res.tombstone.to_json()
    assert tomb["reason"] == "source_trim" and (tomb["gap_from"], tomb["gap_to"]) == (3, 6)
    assert tomb["missed_estimate"] == 4
    assert [orjson.loads(b)["data"] for b in res.records] == [6, 7, 8, 9]
    assert [orjson.loads(b)["$seq"] for b in res.records] == [7, 8, 9, 10]
    assert eng.diff("b", 0, 100).tombstone is None  # a reader from 0 gets 1, 2 first ...
    assert eng.diff("b", 0, 100).records[:2] == eng.diff("b", 0, 2).records


def test_gap_at_the_front_of_an_empty_dest(eng: Engine) -> None:
    eng.put_topic("a", {"cap_records": 2})
    eng.router_put("r", {"source": "a", "dest": "b"})
    write(eng, "a", *({"data": i} for i in range(5)))  # 1-3 evicted before any forward
    pump(eng)
    res = eng.diff("b", 0, 100)
    assert res.tombstone is not None and res.tombstone.reason == "source_trim"
    assert (res.tombstone.gap_from, res.tombstone.gap_to) == (1, 3)
    assert [orjson.loads(b)["data"] for b in res.records] == [3, 4]
    assert [orjson.loads(b)["$seq"] for b in res.records] == [4, 5]


def test_evicted_records_a_filter_drops_make_no_gap(eng: Engine) -> None:
    eng.put_topic("a", {"cap_records": 2})
    eng.router_put("r", {"source": "a", "dest": "b", "filter": "keep"})
    write(eng, "a", {"data": 0, "tag": "keep"}, {"data": 1}, {"data": 2}, {"data": 3, "tag": "keep"},
          {"data": 4})
    pump(eng)
    res = eng.diff("b", 0, 100)
    assert res.tombstone is not None and res.tombstone.gap_to - res.tombstone.gap_from == 0
    assert [orjson.loads(b)["data"] for b in res.records] == [3]
    assert eng.router_get("r")["source_trimmed"] == 1


def test_ttl_expiry_before_forwarding_is_reported(eng: Engine, clock: FakeClock) -> None:
    eng.put_topic("a", {"ttl_ms": 1000})
    eng.router_put("r", {"source": "a", "dest": "b"})
    write(eng, "a", {"data": 1}, {"data": 2})
    clock.advance(2000)
    write(eng, "a", {"data": 3})
    pump(eng)
    res = eng.diff("b", 0, 100)
    assert res.tombstone is not None and res.tombstone.reason == "source_trim"
    assert [orjson.loads(b)["data"] for b in res.records] == [3]


def test_lost_source_slots_become_source_trim(eng: Engine) -> None:
    from topicsrv.engine import restore

    eng.router_put("r", {"source": "a", "dest": "b"})
    write(eng, "a", {"data": 1})
    restore.fill_lost(eng.find("a"), 5, eng.now())  # seqs 2-4 lost (a crashed tail)
    write(eng, "a", {"data": 5})
    pump(eng)
    res = eng.diff("b", 1, 100)
    assert res.tombstone is not None and res.tombstone.reason == "source_trim"
    assert (res.tombstone.gap_from, res.tombstone.gap_to) == (2, 4)
    assert [orjson.loads(b)["$seq"] for b in res.records] == [5]


def test_copy_too_large_for_the_dest_is_a_gap_not_a_stall(eng: Engine) -> None:
    eng.put_topic("b", {"cap_bytes": 100})
    eng.router_put("r", {"source": "a", "dest": "b"})
    write(eng, "a", {"data": "x" * 500}, {"data": "small"})
    pump(eng)
    res = eng.diff("b", 0, 100)
    assert res.tombstone is not None and res.tombstone.reason == "source_trim"
    assert [orjson.loads(b)["data"] for b in res.records] == ["small"]


def test_dest_ttl_counts_from_forward_time(eng: Engine, clock: FakeClock) -> None:
    eng.put_topic("b", {"ttl_ms": 1000})
    eng.router_put("r", {"source": "a", "dest": "b"})
    write(eng, "a", {"data": 1})
    clock.advance(5000)
    pump(eng)
    got = records(eng, "b")
    assert len(got) == 1 and got[0]["$ts"] == eng.now()


def test_hops_are_pruned_below_the_cursor(eng: Engine) -> None:
    eng.router_put("ab", {"source": "a", "dest": "b", "allow_cycle": True})
    eng.router_put("ba", {"source": "b", "dest": "a", "allow_cycle": True})
    for i in range(100):
        write(eng, "a", {"data": i})
    pump(eng)
    assert eng.find("b").ext.get("hops", {}) == {}
    assert eng.find("a").ext.get("hops", {}) == {}


def test_dest_retention_dropping_a_trimmed_run_still_tells_the_reader(eng: Engine) -> None:
    eng.put_topic("a", {"cap_records": 2})
    eng.router_put("r", {"source": "a", "dest": "b"})
    write(eng, "a", {"data": 0})
    pump(eng)
    assert [r["data"] for r in records(eng, "b")] == [0]  # the reader is at 1
    write(eng, "a", *({"data": i} for i in range(1, 6)))  # 2-4 evicted before forwarding
    pump(eng)  # b: 1 copy, 2-4 TRIMMED, 5-6 copies
    eng.trim("b", minid_seq=5)  # b's own retention takes seq 1 and the TRIMMED run
    res = eng.diff("b", 1, 100)
    assert res.tombstone is not None and (res.tombstone.gap_from, res.tombstone.gap_to) == (2, 4)
    assert [orjson.loads(b)["data"] for b in res.records] == [4, 5]


def test_lost_run_at_the_front_is_not_skipped_silently(eng: Engine) -> None:
    """reads.gate used to move a cursor past LOST slots in front of the first live record."""
    from topicsrv.engine import restore

    topic, _, _ = eng.put_topic("t", {})
    restore.fill_lost(topic, 4, eng.now())
    write(eng, "t", {"data": 1})
    res = eng.diff("t", 0, 10)
    assert res.tombstone is not None and res.tombstone.reason == "lost"
    assert (res.tombstone.gap_from, res.tombstone.gap_to) == (1, 3) and res.seqs == [4]
