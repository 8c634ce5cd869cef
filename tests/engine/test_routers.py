"""Routers in the engine: definitions, graph rules, forwarding order and fidelity (seeds 8)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from topicsrv.engine import Engine
from topicsrv.engine.log.deletes import parse_match
from topicsrv.engine.log.entries import parse_entry
from topicsrv.engine.log.reads import FMT_RESP
from topicsrv.engine.log.records import prepare_fields, prepare_json
from topicsrv.engine.log.segments import SEGMENT_RECORDS, Segment
from topicsrv.engine.routing import routers
from topicsrv.errors import TopicsError


def write(eng: Engine, name: str, *recs: dict[str, Any]) -> list[int]:
    result, _ = eng.write(name, [prepare_json(r, i) for i, r in enumerate(recs)])
    return list(result["seqs"])


def records(eng: Engine, name: str, from_seq: int = 0) -> list[dict[str, Any]]:
    return [orjson.loads(b) for b in eng.diff(name, from_seq, 10_000).records]


def pump(eng: Engine, *names: str) -> None:
    """Forward until every named router (default: all) is caught up."""
    for _ in range(1000):
        moved = False
        for name in names or list(eng.routers):
            step = routers.forward(eng, eng.routers[name])
            moved |= bool(step.forwarded or step.gap or step.skipped) or not step.caught_up
        if not moved:
            return
    raise AssertionError("routers did not settle")


def test_put_get_list_delete(eng: Engine) -> None:
    st, created, _ = eng.router_put("r1", {"source": "a", "dest": "b"})
    assert created and st["name"] == "r1" and st["source"] == "a" and st["dest"] == "b"
    assert st["preserve_node"] and st["preserve_tag"] and st["filter"] is None
    assert st["guarantee"] == "at_least_once" and st["max_hops"] is None and st["hop_cap"] is None
    assert st["cursor"] == 0 and st["lag"] == 0 and st["status"] == "caught_up"
    assert eng.find("a") is not None and eng.find("b") is not None  # created with defaults
    st2, created2, _ = eng.router_put("r1", {"source": "a", "dest": "b", "preserve_tag": False})
    assert not created2 and st2["preserve_tag"] is False and st2["created_ts"] == st["created_ts"]
    assert [s["name"] for s in eng.router_list()] == ["r1"]
    assert eng.router_get("r1")["preserve_tag"] is False
    eng.router_delete("r1")
    assert eng.router_list() == []
    with pytest.raises(TopicsError) as err:
        eng.router_get("r1")
    assert err.value.code == "router_not_found" and err.value.status == 404
    with pytest.raises(TopicsError) as err:
        eng.router_delete("r1")
    assert err.value.code == "router_not_found"


@pytest.mark.parametrize("body, field", [
    ({"dest": "b"}, "source"),
    ({"source": "a"}, "dest"),
    ({"source": "a", "dest": "a"}, "dest"),
    ({"source": "a", "dest": "b", "bogus": 1}, "bogus"),
    ({"source": "a", "dest": "b", "preserve_node": "yes"}, "preserve_node"),
    ({"source": "a", "dest": "b", "filter": ["tag", "Like", "x"]}, "filter"),
    ({"source": "a", "dest": "b", "max_hops": 0}, "max_hops"),
    ({"source": "a", "dest": "b", "max_hops": 65}, "max_hops"),
    ({"source": "a", "dest": "b", "guarantee": "maybe"}, "guarantee"),
    ({"source": "bad name", "dest": "b"}, "source"),
])
def test_bad_definitions_name_the_field(eng: Engine, body: dict[str, Any], field: str) -> None:
    with pytest.raises(TopicsError) as err:
        eng.router_put("r", body)
    assert err.value.code == "invalid_request" and err.value.status == 400
    assert err.value.detail is not None and err.value.detail["field"] == field
    assert eng.routers == {} and eng.find("a") is None and eng.find("b") is None  # nothing created


def test_create_dest_false_needs_both_topics(eng: Engine) -> None:
    eng.put_topic("a", {})
    with pytest.raises(TopicsError) as err:
        eng.router_put("r", {"source": "a", "dest": "b", "create_dest": False})
    assert err.value.code == "topic_not_found" and eng.routers == {} and eng.find("b") is None


def test_endpoints_are_immutable(eng: Engine) -> None:
    eng.router_put("r", {"source": "a", "dest": "b"})
    with pytest.raises(TopicsError) as err:
        eng.router_put("r", {"source": "a", "dest": "c"})
    assert err.value.code == "topic_exists_incompatible" and err.value.status == 409
    assert err.value.detail is not None and err.value.detail["reason"] == "router_endpoints_immutable"


def test_fan_in_is_refused(eng: Engine) -> None:
    eng.router_put("r1", {"source": "a", "dest": "d"})
    for source in ("b", "a"):  # a different source, or even the same one
        with pytest.raises(TopicsError) as err:
            eng.router_put("r2", {"source": source, "dest": "d"})
        assert err.value.code == "topic_exists_incompatible" and err.value.status == 409
        assert err.value.detail is not None and err.value.detail["reason"] == "router_dest_fan_in"
    assert list(eng.routers) == ["r1"] and eng.find("b") is None


def test_queue_dest_is_refused(eng: Engine) -> None:
    eng.put_topic("q", {"type": "queue"})
    with pytest.raises(TopicsError) as err:
        eng.router_put("r", {"source": "a", "dest": "q"})
    assert err.value.detail is not None and err.value.detail["reason"] == "router_dest_is_queue"


def test_cycle_is_refused_with_the_cycle(eng: Engine) -> None:
    eng.router_put("ab", {"source": "a", "dest": "b"})
    eng.router_put("bc", {"source": "b", "dest": "c"})
    with pytest.raises(TopicsError) as err:
        eng.router_put("ca", {"source": "c", "dest": "a"})
    assert err.value.code == "router_cycle" and err.value.status == 409
    assert err.value.detail is not None and err.value.detail["cycle"] == ["c", "a", "b", "c"]
    with pytest.raises(TopicsError) as err:
        eng.router_put("ba", {"source": "b", "dest": "a"})
    assert err.value.detail is not None and err.value.detail["cycle"] == ["b", "a", "b"]
    assert sorted(eng.routers) == ["ab", "bc"]
    # an update that drops allow_cycle from an edge on a cycle is refused too
    eng.router_put("ca", {"source": "c", "dest": "a", "allow_cycle": True})
    with pytest.raises(TopicsError) as err:
        eng.router_put("ca", {"source": "c", "dest": "a"})
    assert err.value.code == "router_cycle"


def test_hop_caps(eng: Engine) -> None:
    eng.router_put("ab", {"source": "a", "dest": "b"})
    assert eng.router_get("ab")["hop_cap"] is None
    eng.router_put("ba", {"source": "b", "dest": "a", "allow_cycle": True})
    assert eng.router_get("ab")["hop_cap"] == 1 and eng.router_get("ba")["hop_cap"] == 1
    eng.router_put("x", {"source": "c", "dest": "d", "max_hops": 5})
    assert eng.router_get("x")["hop_cap"] == 5 and eng.router_get("x")["max_hops"] == 5
    eng.router_delete("ba")
    assert eng.router_get("ab")["hop_cap"] is None


def test_fidelity_json_records(eng: Engine) -> None:
    eng.router_put("r", {"source": "a", "dest": "b"})
    write(eng, "b", {"data": "direct"})  # the dest has seqs of its own
    write(eng, "a", {"data": {"k": [1, 2.5, None]}, "node": "n1", "tag": "t1", "meta": {"m": "v"}},
          {"data": "plain"})
    pump(eng)
    got = records(eng, "b")
    assert [r["$seq"] for r in got] == [1, 2, 3]
    assert got[1] == {"$seq": 2, "$ts": got[1]["$ts"], "$node": "n1", "$tag": "t1",
                      "meta": {"m": "v"}, "data": {"k": [1, 2.5, None]}}
    assert got[2]["data"] == "plain" and "$node" not in got[2] and "$tag" not in got[2]
    st = eng.router_get("r")
    assert st["forwarded"] == 2 and st["cursor"] == 2 and st["lag"] == 0 and st["status"] == "caught_up"


def test_fidelity_field_value_entries(eng: Engine) -> None:
    eng.router_put("r", {"source": "a", "dest": "b"})
    eng.write("a", [prepare_fields([b"f1", b"v1", b"f2", b"\xff\x00"], node="n", tag="t")])
    pump(eng)
    res = eng.diff("b", 0, 10, fmt=FMT_RESP)
    _, seq, pairs = parse_entry(res.records[0])
    assert seq == 1 and pairs == [b"f1", b"v1", b"f2", b"\xff\x00", b"$node", b"n", b"$tag", b"t"]
    assert eng.find("b").segs[0].blobs[0][0] == ord("*")  # stored as an entry, not converted


def test_preserve_flags(eng: Engine) -> None:
    eng.router_put("r", {"source": "a", "dest": "b", "preserve_node": False, "preserve_tag": False})
    write(eng, "a", {"data": 1, "node": "n", "tag": "t", "meta": {"x": "y"}})
    eng.write("a", [prepare_fields([b"f", b"v"], node="n", tag="t")])
    pump(eng)
    got = records(eng, "b")
    assert got[0] == {"$seq": 1, "$ts": got[0]["$ts"], "meta": {"x": "y"}, "data": 1}
    assert got[1]["data"] == {"f": "v"} and "$node" not in got[1] and "$tag" not in got[1]
    _, _, pairs = parse_entry(eng.diff("b", 1, 10, fmt=FMT_RESP).records[0])
    assert pairs == [b"f", b"v"]
    assert eng.diff("b", 0, 10, nodes=["n"]).seqs == [1, 2]  # no $node: a node filter keeps them


def test_per_source_fifo_and_own_seqs(eng: Engine) -> None:
    eng.put_topic("b", {"seq_base": 1000})
    eng.router_put("r", {"source": "a", "dest": "b"})
    for i in range(50):
        write(eng, "a", {"data": i})
        if i % 7 == 0:
            write(eng, "b", {"data": f"direct{i}"})
        if i % 5 == 0:
            routers.forward(eng, eng.routers["r"], limit=3)
    pump(eng)
    got = records(eng, "b")
    copies = [r["data"] for r in got if isinstance(r["data"], int)]
    assert copies == list(range(50))
    assert [r["$seq"] for r in got] == list(range(1000, 1000 + len(got)))


def test_filter_eq_and_glob(eng: Engine) -> None:
    eng.router_put("eq", {"source": "a", "dest": "b", "filter": ["tag", "Eq", "x"]})
    eng.router_put("glob", {"source": "a", "dest": "c", "filter": ["tag", "Glob", "p*"]})
    write(eng, "a", {"data": 1, "tag": "x"}, {"data": 2, "tag": "xx"}, {"data": 3},
          {"data": 4, "tag": "p1"}, {"data": 5, "tag": "p"}, {"data": 6, "tag": "q"})
    pump(eng)
    assert [r["data"] for r in records(eng, "b")] == [1]
    assert [r["data"] for r in records(eng, "c")] == [4, 5]
    assert eng.router_get("eq")["skipped"] == 5 and eng.router_get("eq")["cursor"] == 6
    assert eng.find("b").next_seq == 2  # filtered records consume no dest seq


def test_new_router_forwards_the_retained_log(eng: Engine) -> None:
    write(eng, "a", *({"data": i} for i in range(5)))
    eng.delete_records("a", 3, None)  # seqs 1, 2 deleted: not forwarded, no gap
    eng.router_put("r", {"source": "a", "dest": "b"})
    assert eng.router_get("r")["cursor"] == 2 and eng.router_get("r")["lag"] == 3
    pump(eng)
    assert [r["data"] for r in records(eng, "b")] == [2, 3, 4]


def test_deleted_source_records_are_skipped_silently(eng: Engine) -> None:
    eng.router_put("r", {"source": "a", "dest": "b"})
    write(eng, "a", *({"data": i, "tag": "odd" if i % 2 else None} for i in range(6)))
    eng.delete_records("a", None, parse_match("odd"))
    pump(eng)
    res = eng.diff("b", 0, 100)
    assert res.tombstone is None and [orjson.loads(b)["data"] for b in res.records] == [0, 2, 4]
    assert [orjson.loads(b)["$seq"] for b in res.records] == [1, 2, 3]


def test_topic_delete_removes_its_routers(eng: Engine) -> None:
    eng.router_put("ab", {"source": "a", "dest": "b"})
    eng.router_put("bc", {"source": "b", "dest": "c"})
    eng.router_put("ad", {"source": "a", "dest": "d"})
    eng.delete_topic("b")
    assert list(eng.routers) == ["ad"]
    assert eng.find("c").ext.get("router_in") is None
    assert [r.name for r in eng.find("a").ext["router_out"]] == ["ad"]
    eng.router_put("xb", {"source": "c", "dest": "a"})  # no stale edge: no cycle any more


def test_router_delete_stops_forwarding_at_once(eng: Engine) -> None:
    eng.router_put("r", {"source": "a", "dest": "b"})
    write(eng, "a", {"data": 1})
    router = eng.routers["r"]
    pump(eng)
    write(eng, "a", {"data": 2})
    eng.router_delete("r")
    step = routers.forward(eng, router)  # a worker that was mid-flight: nothing moves
    assert step.forwarded == 0 and [r["data"] for r in records(eng, "b")] == [1]
    assert eng.find("a").drop_hook is None and "router_out" not in eng.find("a").ext


def test_a_router_copies_entries_out_of_bare_segments(eng: Engine) -> None:
    """A router created over a source whose old segments are bare (segments Rule 7) copies
    their stored pairs as they are: the dest holds the same entries under its own IDs."""
    n = 3 * SEGMENT_RECORDS
    recs = [prepare_fields([b"f", b"v%d" % i], tag="t" if i % 2 else None) for i in range(n)]
    for k in range(0, n, 1000):
        eng.write("a", recs[k:k + 1000])
    assert eng.find("a").segs[0].bare  # type: ignore[union-attr]
    eng.router_put("r", {"source": "a", "dest": "b"})
    pump(eng)
    got = eng.diff("b", 0, n, fmt=FMT_RESP)
    assert len(got.records) == n
    pairs = [parse_entry(b)[2] for b in got.records]
    assert pairs[0] == [b"f", b"v0"] and pairs[1] == [b"f", b"v1", b"$tag", b"t"]
    assert [p[1] for p in pairs] == [b"v%d" % i for i in range(n)]
    assert all(isinstance(s, Segment) for s in eng.find("b").segs)
