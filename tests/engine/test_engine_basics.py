"""Engine behaviour a client sees, driven with a fake clock (seeds sections 1-7)."""

from __future__ import annotations

import orjson
import pytest

from topicsrv.clock import FakeClock
from topicsrv.engine import Engine
from topicsrv.engine.log.deletes import parse_match
from topicsrv.engine.log.entries import parse_entry
from topicsrv.engine.log.reads import FMT_RESP, scan_range
from topicsrv.engine.log.records import (
    MAX_DATA_META_BYTES,
    MAX_RECORDS_PER_WRITE,
    prepare_fields,
    prepare_json,
)
from topicsrv.engine.log.segments import SEGMENT_RECORDS
from topicsrv.errors import TopicsError


def put(eng: Engine, topic: str, *datas: object, **fields: object) -> dict:
    recs = [prepare_json({"data": d, **fields}) for d in datas]
    return eng.write(topic, recs)[0]


def records(result) -> list[dict]:
    return [orjson.loads(b) for b in result.records]


def code_of(fn, *args, **kw) -> str:
    with pytest.raises(TopicsError) as info:
        fn(*args, **kw)
    return info.value.code


# ---- seqs ------------------------------------------------------------------------------


def test_seqs_are_gap_free_and_batches_contiguous(eng: Engine) -> None:
    a = put(eng, "t", 1, 2, 3)
    b = put(eng, "t", 4)
    assert a["seqs"] == [1, 2, 3] and a["first_seq"] == 1 and a["last_seq"] == 3
    assert b["seqs"] == [4] and b["head_seq"] == 4
    st = eng.state("t")
    assert (st["head_seq"], st["earliest_seq"], st["next_seq"], st["count"]) == (4, 1, 5, 4)


def test_a_batch_with_one_bad_record_appends_nothing(eng: Engine) -> None:
    put(eng, "t", 1)
    with pytest.raises(TopicsError):
        recs = [prepare_json({"data": 2}), prepare_json({"data": 3, "tag": 5}, 1)]
        eng.write("t", recs)
    assert eng.state("t")["head_seq"] == 1


def test_seq_base_and_empty_topic_state(eng: Engine) -> None:
    eng.put_topic("b", {"seq_base": 100})
    st = eng.state("b")
    assert (st["head_seq"], st["earliest_seq"], st["next_seq"], st["count"]) == (99, 100, 100, 0)
    assert put(eng, "b", "x")["seqs"] == [100]


def test_ts_is_clamped_non_decreasing(eng: Engine, clock: FakeClock) -> None:
    put(eng, "t", 1)
    clock.set(clock.now_ms() - 5000)  # the wall clock stepped back
    put(eng, "t", 2)
    recs = records(eng.diff("t", 0))
    assert recs[1]["$ts"] >= recs[0]["$ts"]


# ---- limits and names ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "rec,code",
    [
        ({"data": 1, "tag": "x" * 257}, "record_too_large"),
        ({"data": 1, "node": "n" * 129}, "record_too_large"),
        ({"data": "x" * MAX_DATA_META_BYTES}, "record_too_large"),
        ({"data": 1, "meta": {f"k{i}": "v" for i in range(65)}}, "record_too_large"),
        ({"data": 1, "meta": {"k": "v" * 17000}}, "record_too_large"),
        ({"data": 1, "meta": {"k": 1}}, "invalid_request"),
        ({"data": 1, "tag": 7}, "invalid_request"),
        ({"tag": "x"}, "invalid_request"),
        ({"data": 1, "extra": 1}, "invalid_request"),
        ("not an object", "invalid_request"),
    ],
)
def test_record_limits(rec: object, code: str) -> None:
    assert code_of(prepare_json, rec) == code


def test_limits_at_the_edge_are_accepted(eng: Engine) -> None:
    rec = {"data": 1, "tag": "t" * 256, "node": "n" * 128, "meta": {f"k{i}": "v" for i in range(64)}}
    eng.write("t", [prepare_json(rec)])
    assert eng.state("t")["count"] == 1


def test_fields_record_limits_match_json_limits() -> None:
    assert code_of(prepare_fields, [b"f", b"x" * MAX_DATA_META_BYTES]) == "record_too_large"
    assert code_of(prepare_fields, [b"f", b"v"], tag="x" * 257) == "record_too_large"
    assert code_of(prepare_fields, [b"f"]) == "invalid_request"


def test_too_many_records_in_one_write(eng: Engine) -> None:
    recs = [prepare_json({"data": 1})] * (MAX_RECORDS_PER_WRITE + 1)
    assert code_of(eng.write, "t", recs) == "record_too_large"
    assert eng.find("t") is None


@pytest.mark.parametrize("name", ["", "-a", "a b", "a/b", "x" * 256, "é"])
def test_invalid_topic_names(eng: Engine, name: str) -> None:
    assert code_of(eng.write, name, [prepare_json({"data": 1})]) == "invalid_topic_name"


def test_valid_topic_names(eng: Engine) -> None:
    for name in ["a", "render-queue:tenantA", "A.b_c-d:e", "9" * 255]:
        put(eng, name, 1)


# ---- create policy and config ---------------------------------------------------------


def test_lazy_create_and_create_false(eng: Engine) -> None:
    assert code_of(eng.write, "missing", [prepare_json({"data": 1})], create=False) == "topic_not_found"
    assert eng.find("missing") is None
    res, _ = eng.write("lazy", [prepare_json({"data": 1})], config={"cap_records": 3})
    assert res["created"] is True
    assert eng.state("lazy")["config"]["cap_records"] == 3


def test_put_upsert_rules(eng: Engine) -> None:
    topic, created, _ = eng.put_topic("q", {"type": "queue", "lease_ms": 1000})
    assert created and topic.type == "queue"
    _, created, _ = eng.put_topic("q", {"ttl_ms": 5})
    assert not created and eng.state("q")["config"]["ttl_ms"] == 5
    assert code_of(eng.put_topic, "q", {"type": "log"}) == "topic_exists_incompatible"
    assert code_of(eng.put_topic, "q", {"bogus": 1}) == "invalid_request"
    assert code_of(eng.put_topic, "q", {"ttl_ms": -1}) == "invalid_request"
    assert code_of(eng.put_topic, "q", {"ttl_ms": "5"}) == "invalid_request"
    assert code_of(eng.put_topic, "l", {"lease_ms": 5}) == "invalid_request"
    assert eng.state("q")["queue"] == {"ready": 0, "in_flight": 0, "delayed": 0, "dead_lettered": 0,
                                       "oldest_ready_age_ms": 0}
    eng.put_topic("l", {})
    assert "queue" not in eng.state("l")


def test_durability_resolution(eng: Engine) -> None:
    eng.put_topic("d", {})
    assert eng.state("d")["durability"] == "disk"
    eng.put_topic("d", {"durable": True})
    st = eng.state("d")
    assert st["durability"] == "fsync" and st["config"]["durable"] is True
    eng.put_topic("d", {"durability": "memory"})
    st = eng.state("d")
    assert st["durability"] == "memory" and st["config"]["durable"] is False
    eng.put_topic("d", {"durability": "ephemeral", "durable": True})
    assert eng.state("d")["durability"] == "ephemeral"


def test_delete_topic_and_recreate_bumps_epoch(eng: Engine) -> None:
    put(eng, "r", 1, 2, 3)
    assert eng.state("r")["epoch"] == 1
    eng.delete_topic("r")
    assert code_of(eng.state, "r") == "topic_not_found"
    put(eng, "r", "new")
    st = eng.state("r")
    assert st["epoch"] == 2 and st["head_seq"] == 1


def test_list_topics_prefix_and_paging(eng: Engine) -> None:
    for name in ["a:1", "a:2", "a:3", "b:1"]:
        put(eng, name, 1)
    items, nxt = eng.list_topics(prefix="a:", limit=2)
    assert [i["topic"] for i in items] == ["a:1", "a:2"] and nxt == "a:2"
    items, nxt = eng.list_topics(prefix="a:", limit=2, after=nxt)
    assert [i["topic"] for i in items] == ["a:3"] and nxt is None


# ---- tombstones -----------------------------------------------------------------------


def test_cap_eviction_tombstone_then_records_from_earliest(eng: Engine) -> None:
    eng.put_topic("c", {"cap_records": 5})
    put(eng, "c", *range(10))
    r = eng.diff("c", 2)
    assert r.tombstone is not None and r.tombstone.to_json() == {
        "gap_from": 3, "gap_to": 5, "reason": "cap",
        "missed_estimate": 3, "earliest_seq": 6, "head_seq": 10,
    }
    assert r.tombstone.resume_after == 5 and r.tombstone.ts == eng.get("c").ts_of(6)
    assert r.seqs == [6, 7, 8, 9, 10] and r.next_from_seq == 10 and r.caught_up
    # resuming after the tombstone: no second tombstone
    r2 = eng.diff("c", r.tombstone.gap_to)
    assert r2.tombstone is None and r2.seqs == [6, 7, 8, 9, 10]
    assert eng.diff("c", 5).tombstone is None  # from_seq + 1 == evict_floor: nothing missed


def test_cap_bytes_eviction(eng: Engine) -> None:
    eng.put_topic("cb", {"cap_bytes": 30})
    for _ in range(10):
        put(eng, "cb", "x" * 8)  # 10 bytes each as JSON
    st = eng.state("cb")
    assert st["bytes"] <= 30 and st["count"] == 3 and st["earliest_seq"] == 8
    assert eng.diff("cb", 0).tombstone.reason == "cap"


def test_discard_reject_is_422_before_any_seq(eng: Engine) -> None:
    eng.put_topic("rj", {"cap_records": 3, "discard": "reject"})
    put(eng, "rj", 1, 2)
    with pytest.raises(TopicsError) as info:
        put(eng, "rj", 3, 4)
    assert info.value.code == "topic_full" and info.value.status == 422
    assert info.value.detail["head_seq"] == 2 and info.value.detail["cap_records"] == 3
    assert eng.state("rj")["head_seq"] == 2
    put(eng, "rj", 3)


def test_write_larger_than_the_cap_is_400(eng: Engine) -> None:
    eng.put_topic("big", {"cap_records": 2, "discard": "reject"})
    assert code_of(put, eng, "big", 1, 2, 3) == "record_too_large"
    assert eng.state("big")["head_seq"] == 0
    eng.put_topic("bigb", {"cap_bytes": 5})
    assert code_of(put, eng, "bigb", "123456") == "record_too_large"
    eng.put_topic("old", {"cap_records": 2})
    assert put(eng, "old", 1, 2, 3)["seqs"] == [1, 2, 3]
    assert eng.state("old")["earliest_seq"] == 2


def test_ttl_expiry_with_fake_clock(eng: Engine, clock: FakeClock) -> None:
    eng.put_topic("ttl", {"ttl_ms": 1000})
    put(eng, "ttl", 1, 2, 3)
    clock.advance(600)
    put(eng, "ttl", 4)
    clock.advance(400)  # first three are exactly 1000 ms old: not yet expired (strict)
    assert eng.state("ttl")["count"] == 4
    clock.advance(1)
    st = eng.state("ttl")
    assert (st["count"], st["earliest_seq"], st["evict_floor"]) == (1, 4, 4)
    r = eng.diff("ttl", 0)
    assert r.tombstone.reason == "ttl" and r.tombstone.gap_to == 3 and r.seqs == [4]
    clock.advance(10_000)  # TTL moves with the clock, no writes needed
    st = eng.state("ttl")
    assert (st["count"], st["bytes"], st["earliest_seq"]) == (0, 0, 5)
    assert eng.diff("ttl", 3).tombstone.reason == "ttl"


def test_mixed_reason(eng: Engine, clock: FakeClock) -> None:
    eng.put_topic("m", {"ttl_ms": 1000, "cap_records": 3})
    put(eng, "m", 1, 2, 3, 4, 5)  # 1,2 evicted by cap
    clock.advance(500)
    put(eng, "m", 6)  # 3 evicted by cap
    clock.advance(600)  # 4,5 expire by TTL
    r = eng.diff("m", 0)
    assert r.tombstone.reason == "mixed" and r.tombstone.gap_to == 5
    assert eng.diff("m", 3).tombstone.reason == "ttl"


def test_purely_deleted_gap_is_silent(eng: Engine) -> None:
    put(eng, "d", *range(10))
    res, _ = eng.delete_records("d", 6, None)
    assert res["deleted"] == 5 and res["earliest_seq"] == 6 and res["count"] == 5
    r = eng.diff("d", 0)
    assert r.tombstone is None and r.seqs == [6, 7, 8, 9, 10]
    st = eng.state("d")
    assert st["evict_floor"] == 1 and st["earliest_seq"] == 6


def test_deleted_prefix_then_cap_eviction(eng: Engine) -> None:
    """Popping deleted slots does not move evict_floor; evicting live ones does."""
    eng.put_topic("dc", {"cap_records": 4})
    put(eng, "dc", 1, 2, 3, 4)
    eng.delete_records("dc", 3, None)  # 1,2 deleted -> 2 live
    put(eng, "dc", 5, 6)  # 4 live, no eviction
    assert eng.diff("dc", 0).tombstone is None
    put(eng, "dc", 7)  # evicts 3 (live)
    r = eng.diff("dc", 0)
    assert r.tombstone.gap_from == 1 and r.tombstone.gap_to == 3
    assert eng.diff("dc", 2).tombstone is not None and eng.diff("dc", 3).tombstone is None


def test_own_node_filtered_batch_is_empty_and_caught_up(eng: Engine) -> None:
    put(eng, "n", 1, 2, 3, node="me")
    r = eng.diff("n", 0, nodes=["me"])
    assert r.records == [] and r.caught_up and r.next_from_seq == 3 and r.tombstone is None
    assert eng.diff("n", 0, nodes=["other"]).seqs == [1, 2, 3]
    eng.put_topic("n", {"dedupe_node": False})
    assert eng.diff("n", 0, nodes=["me"]).seqs == [1, 2, 3]


def test_node_filter_list_is_byte_exact(eng: Engine) -> None:
    put(eng, "nl", 1, node="a")
    put(eng, "nl", 2, node="b")
    put(eng, "nl", 3, node="A")
    put(eng, "nl", 4)
    assert eng.diff("nl", 0, nodes=["a", "b"]).seqs == [3, 4]


def test_recreated_tombstone(eng: Engine) -> None:
    put(eng, "rc", *range(10))
    eng.delete_topic("rc")
    put(eng, "rc", "a", "b")
    r = eng.diff("rc", 7)
    t = r.tombstone
    assert t.reason == "recreated" and t.gap_from == 1 and t.gap_to == 2
    assert r.seqs == [1, 2] and r.caught_up
    # with an explicit epoch the rewind is caught even below head
    r = eng.diff("rc", 1, epoch=1)
    assert r.tombstone.reason == "recreated" and r.seqs == [1, 2]
    assert eng.diff("rc", 1, epoch=2).tombstone is None


def test_limit_window_and_next_from_seq(eng: Engine) -> None:
    put(eng, "w", *range(10))
    r = eng.diff("w", 0, limit=4)
    assert r.seqs == [1, 2, 3, 4] and r.next_from_seq == 4 and not r.caught_up and r.lag == 6
    r = eng.diff("w", 4, limit=100)
    assert r.seqs == [5, 6, 7, 8, 9, 10] and r.caught_up and r.lag == 0
    r = eng.diff("w", 10)
    assert r.records == [] and r.caught_up and r.next_from_seq == 10


def test_trailing_deleted_slots_are_stepped_over(eng: Engine) -> None:
    put(eng, "td", 1, 2, 3, 4, tag="x")
    put(eng, "td", 5, 6, tag="y")
    eng.delete_records("td", None, parse_match("y"))
    r = eng.diff("td", 0, limit=4)
    assert r.seqs == [1, 2, 3, 4] and r.caught_up and r.next_from_seq == 6


def test_max_bytes_returns_at_least_one_record(eng: Engine) -> None:
    put(eng, "mb", "a" * 100, "b" * 100, "c")
    r = eng.diff("mb", 0, max_bytes=10)
    assert r.seqs == [1] and r.next_from_seq == 1
    r = eng.diff("mb", 0, max_bytes=300)
    assert r.seqs == [1, 2]


# ---- deletes -------------------------------------------------------------------------


def test_tag_eq_glob_and_point_in_time(eng: Engine) -> None:
    put(eng, "g", 1, tag="chat-42:a")
    put(eng, "g", 2, tag="chat-42:b")
    put(eng, "g", 3, tag="chat-43:a")
    put(eng, "g", 4, tag="chat-42")
    res, _ = eng.delete_records("g", None, parse_match("chat-42:*"))
    assert res["deleted"] == 2
    put(eng, "g", 5, tag="chat-42:c")  # after the delete: untouched (point-in-time)
    assert eng.diff("g", 0).seqs == [3, 4, 5]
    res, _ = eng.delete_records("g", None, parse_match(["tag", "Eq", "chat-42"]))
    assert res["deleted"] == 1 and eng.diff("g", 0).seqs == [3, 5]
    assert eng.diff("g", 0).tombstone is None


def test_match_and_before_seq_combine(eng: Engine) -> None:
    put(eng, "v", "v1", tag="msg-1")
    put(eng, "v", "other", tag="msg-2")
    v2 = put(eng, "v", "v2", tag="msg-1")["first_seq"]
    res, _ = eng.delete_records("v", v2, parse_match("msg-1"))
    assert res["deleted"] == 1 and eng.diff("v", 0).seqs == [2, 3]


def test_match_grammar_errors() -> None:
    for bad in [["tag", "Glob", "x"], ["tag", "Re", "x"], ["node", "Eq", "x"], 5, ["tag", "Eq"]]:
        assert code_of(parse_match, bad) == "invalid_request"
    assert parse_match("a*b").kind == "Eq"  # only a trailing * is a wildcard


def test_untagged_records_never_match(eng: Engine) -> None:
    put(eng, "u", 1)
    put(eng, "u", 2, tag="")
    assert eng.delete_records("u", None, parse_match("*"))[0]["deleted"] == 1
    assert eng.diff("u", 0).seqs == [1]


def test_delete_needs_a_selector(eng: Engine) -> None:
    put(eng, "s", 1)
    assert code_of(eng.delete_records, "s", None, None) == "invalid_request"


def test_xdel_and_trim(eng: Engine) -> None:
    put(eng, "x", *range(6))
    n, _ = eng.delete_seqs("x", [2, 3, 99])
    assert n == 2 and eng.diff("x", 0).tombstone is None
    removed, _ = eng.trim("x", maxlen=2)
    assert removed == 2 and eng.diff("x", 0).seqs == [5, 6]
    t = eng.diff("x", 0).tombstone
    assert t.reason == "cap" and t.gap_to == 4
    removed, _ = eng.trim("x", minid_seq=6)
    assert removed == 1 and eng.diff("x", 0).seqs == [6]


def test_whole_segments_are_reclaimed(eng: Engine) -> None:
    eng.put_topic("seg", {"cap_records": 100})
    recs = [prepare_json({"data": i}) for i in range(1000)]
    for _ in range(SEGMENT_RECORDS * 3 // 1000):
        eng.write("seg", recs)
    topic = eng.get("seg")
    assert len(topic.segs) <= 2 and topic.count == 100
    eng.put_topic("del", {})
    for _ in range(SEGMENT_RECORDS * 2 // 1000 + 1):
        eng.write("del", recs)
    eng.delete_records("del", SEGMENT_RECORDS * 2, None)
    assert len(eng.get("del").segs) == 1


# ---- idempotency ---------------------------------------------------------------------


def test_idempotency_key_repeats_the_original_result(eng: Engine, clock: FakeClock) -> None:
    eng.put_topic("i", {"idempotency_window_ms": 1000})
    first, _ = eng.write("i", [prepare_json({"data": 1})], idempotency_key="k1")
    again, _ = eng.write("i", [prepare_json({"data": 1})], idempotency_key="k1")
    assert again["duplicate"] is True and again["seqs"] == first["seqs"]
    assert eng.state("i")["head_seq"] == 1
    clock.advance(1001)
    later, _ = eng.write("i", [prepare_json({"data": 1})], idempotency_key="k1")
    assert later["duplicate"] is False and later["seqs"] == [2]


# ---- record forms --------------------------------------------------------------------


def test_fields_records_read_as_json_and_back(eng: Engine) -> None:
    eng.write("f", [prepare_fields([b"a", b"1", b"b", b"2"], node="n1", tag="t")])
    eng.write("f", [prepare_fields([b"k", b"\xff\x00", b"k", b"dup"])])
    eng.write("f", [prepare_json({"data": {"x": "y"}, "meta": {"m": "1"}})])
    eng.write("f", [prepare_json({"data": [1, 2]})])
    recs = records(eng.diff("f", 0))
    assert recs[0]["data"] == {"a": "1", "b": "2"} and recs[0]["$node"] == "n1" and recs[0]["$tag"] == "t"
    assert recs[1]["data"] == {"$fields": [["k", {"$base64": "/wA="}], ["k", "dup"]]}
    resp = eng.diff("f", 0, fmt=FMT_RESP).records
    ts, seq, pairs = parse_entry(resp[0])
    assert seq == 1 and pairs == [b"a", b"1", b"b", b"2", b"$node", b"n1", b"$tag", b"t"]
    assert parse_entry(resp[1])[2] == [b"k", b"\xff\x00", b"k", b"dup"]
    assert parse_entry(resp[2])[2] == [b"x", b"y", b"$meta", b'{"m":"1"}']
    assert parse_entry(resp[3])[2] == [b"data", b"[1,2]"]


# ---- visibility (storage hides fsync-class records until durable) ---------------------


def test_hidden_records_are_invisible_to_every_read_path(eng: Engine) -> None:
    put(eng, "h", 1, 2)
    topic = eng.get("h")
    topic.hide_from(3)
    put(eng, "h", 3, 4, tag="t")
    assert eng.diff("h", 0).seqs == [1, 2] and eng.diff("h", 0).caught_up
    assert eng.diff("h", 2).records == [] and eng.diff("h", 2).next_from_seq == 2
    assert [s for s, _ in scan_range(topic, 0, 99, 0, eng.now())] == [1, 2]
    st = eng.state("h")
    assert (st["head_seq"], st["next_seq"], st["evict_floor"]) == (2, 5, 1)
    assert eng.diff("h", 3).tombstone.reason == "recreated"  # a cursor nobody could hold
    eng.delete_records("h", 3, None)  # everything readable is gone: earliest is head + 1
    assert eng.state("h")["earliest_seq"] == 3
    assert topic.reveal(4) and eng.diff("h", 2).seqs == [3]
    assert topic.reveal(5) and topic.visible_next is None and eng.diff("h", 2).seqs == [3, 4]
    assert not topic.reveal(5)


def test_cap_loss_of_hidden_records_tombstones_once_revealed(eng: Engine) -> None:
    eng.put_topic("hc", {"cap_records": 2})
    put(eng, "hc", 1, 2)
    topic = eng.get("hc")
    topic.hide_from(3)
    put(eng, "hc", 3, 4)  # evicts 1 and 2 while 3 and 4 are still hidden
    assert eng.diff("hc", 2).tombstone is None  # nothing readable was lost below 2
    topic.reveal(5)
    r = eng.diff("hc", 0)
    assert r.tombstone.gap_to == 2 and r.seqs == [3, 4]
