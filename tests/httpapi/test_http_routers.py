"""Router routes over HTTP (API.md section 6, seeds section 8): PUT/GET/DELETE
/v0/routers/:router, GET /v0/routers, the state object, the graph rules (409 cycle with
`detail.cycle`, 409 fan-in with `detail.reason`), fidelity of what a copy carries, filters,
exactly-once keys and the /metrics families, against an in-process server (both fronts and
the forwarding workers, trio in a background thread) whose engine reads a FakeClock."""

from __future__ import annotations

import json
from typing import Any

import pytest

from .conftest import Client, metric, wait_until
from .inproc import Srv

STATE_KEYS = {"name", "source", "dest", "preserve_node", "preserve_tag", "filter", "allow_cycle",
              "max_hops", "hop_cap", "guarantee", "create_dest", "created_ts", "cursor",
              "source_epoch", "lag", "forwarded", "skipped", "source_trimmed", "retries",
              "status", "last_error"}


@pytest.fixture
def names(topic: str) -> tuple[str, str, str]:
    """(router, source, dest) names unique to the test."""
    return f"r-{topic}", f"{topic}.src", f"{topic}.dst"


def put(c: Client, name: str, source: str, dest: str, status: int = 201,
        **options: Any) -> dict[str, Any]:
    r = c.put(f"/v0/routers/{name}", {"source": source, "dest": dest, **options})
    assert r.status == status, r
    return r.json  # type: ignore[no-any-return]


def state(c: Client, name: str) -> dict[str, Any]:
    r = c.get(f"/v0/routers/{name}")
    assert r.status == 200, r
    return r.json  # type: ignore[no-any-return]


def write(c: Client, topic: str, *records: dict[str, Any]) -> list[int]:
    r = c.post(f"/v0/topics/{topic}", {"records": list(records)})
    assert r.status == 200, r
    return r.json["seqs"]  # type: ignore[no-any-return]


def records(c: Client, topic: str, **extra: Any) -> list[dict[str, Any]]:
    return c.diff(topic, 0, limit=10_000, **extra)["records"]  # type: ignore[no-any-return]


def caught_up(c: Client, name: str, forwarded: int | None = None) -> dict[str, Any]:
    """Wait until the router handled everything (and forwarded `forwarded` records)."""
    box: dict[str, Any] = {}

    def done() -> bool:
        box["s"] = s = state(c, name)
        return s["lag"] == 0 and s["status"] == "caught_up" and (
            forwarded is None or s["forwarded"] == forwarded)

    wait_until(done)
    return box["s"]


def assert_error(r: Any, status: int, code: str) -> dict[str, Any]:
    assert r.status == status, r
    err = r.json["error"]
    assert err["code"] == code and err["message"], r
    return err  # type: ignore[no-any-return]


# ---- lifecycle and the state object ----------------------------------------------------------


def test_create_get_update_delete(c: Client, srv: Srv, names: tuple[str, str, str]) -> None:
    name, src, dst = names
    now = srv.clock.now_ms()
    created = put(c, name, src, dst)
    assert set(created) == STATE_KEYS | {"performance"}
    assert {k: created[k] for k in STATE_KEYS - {"status"}} == {
        "name": name, "source": src, "dest": dst, "preserve_node": True, "preserve_tag": True,
        "filter": None, "allow_cycle": False, "max_hops": None, "hop_cap": None,
        "guarantee": "at_least_once", "create_dest": True, "created_ts": now, "cursor": 0,
        "source_epoch": created["source_epoch"], "lag": 0, "forwarded": 0, "skipped": 0,
        "source_trimmed": 0, "retries": 0, "last_error": None}
    # both endpoints were created with the defaults of a topic PUT
    assert c.get(f"/v0/topics/{src}").status == c.get(f"/v0/topics/{dst}").status == 200
    write(c, src, {"data": 1}, {"data": 2})
    got = caught_up(c, name, 2)
    assert (got["cursor"], got["lag"]) == (2, 0)
    # same endpoints: the options change, the cursor and counters stay, 200
    updated = put(c, name, src, dst, 200, preserve_tag=False, filter=["tag", "Eq", "x"])
    assert (updated["preserve_tag"], updated["filter"], updated["cursor"],
            updated["forwarded"]) == (False, ["tag", "Eq", "x"], 2, 2)
    assert updated["created_ts"] == now
    listed = [r for r in c.get("/v0/routers").json["routers"] if r["name"] == name]
    one = state(c, name)
    one.pop("performance")
    assert listed == [one]
    r = c.delete(f"/v0/routers/{name}")
    assert r.status == 200 and r.json["router"] == name and r.json["deleted"] is True
    assert_error(c.get(f"/v0/routers/{name}"), 404, "router_not_found")
    assert_error(c.delete(f"/v0/routers/{name}"), 404, "router_not_found")
    # the copies stay; a write after the delete is not forwarded
    write(c, src, {"data": 3})
    assert [rec["data"] for rec in records(c, dst)] == [1, 2]


def test_list_is_in_name_order_and_matches_get(c: Client, topic: str) -> None:
    for n in ("c", "a", "b"):
        put(c, f"{topic}-{n}", f"{topic}.src", f"{topic}.to-{n}")
    listed = [r for r in c.get("/v0/routers").json["routers"] if r["name"].startswith(topic)]
    assert [r["name"] for r in listed] == [f"{topic}-a", f"{topic}-b", f"{topic}-c"]
    for r in listed:
        assert set(r) == STATE_KEYS
        assert r["source"] == f"{topic}.src"


def test_endpoints_are_immutable(c: Client, names: tuple[str, str, str]) -> None:
    name, src, dst = names
    put(c, name, src, dst)
    for body in ({"source": src, "dest": dst + "2"}, {"source": src + "2", "dest": dst}):
        err = assert_error(c.put(f"/v0/routers/{name}", body), 409, "topic_exists_incompatible")
        assert err["detail"]["reason"] == "router_endpoints_immutable"
    assert c.get(f"/v0/topics/{dst}2").status == 404  # nothing was created
    assert (state(c, name)["source"], state(c, name)["dest"]) == (src, dst)


# ---- graph rules ------------------------------------------------------------------------------


def test_cycle_is_409_with_the_cycle(c: Client, topic: str) -> None:
    a, b, x = f"{topic}.a", f"{topic}.b", f"{topic}.x"
    put(c, f"{topic}-ab", a, b)
    put(c, f"{topic}-bx", b, x)
    err = assert_error(c.put(f"/v0/routers/{topic}-xa", {"source": x, "dest": a}), 409,
                       "router_cycle")
    assert err["detail"]["cycle"] == [x, a, b, x]
    assert_error(c.get(f"/v0/routers/{topic}-xa"), 404, "router_not_found")
    # a router into its own source is not a router at all
    err = assert_error(c.put(f"/v0/routers/{topic}-aa", {"source": a, "dest": a}), 400,
                       "invalid_request")
    assert err["detail"]["field"] == "dest"
    # allow_cycle closes it
    got = put(c, f"{topic}-xa", x, a, allow_cycle=True)
    assert got["allow_cycle"] is True and got["hop_cap"] == 2  # a 3-cycle: reaches 2 others


def test_second_router_into_a_dest_is_fan_in(c: Client, topic: str) -> None:
    put(c, f"{topic}-1", f"{topic}.s1", f"{topic}.d")
    for source in (f"{topic}.s2", f"{topic}.s1"):  # another source, or even the same one
        err = assert_error(c.put(f"/v0/routers/{topic}-2", {"source": source,
                                                             "dest": f"{topic}.d"}),
                           409, "topic_exists_incompatible")
        assert err["detail"]["reason"] == "router_dest_fan_in"
    assert c.get(f"/v0/topics/{topic}.s2").status == 404  # a refused PUT creates nothing


def test_a_queue_dest_is_refused(c: Client, topic: str) -> None:
    assert c.put(f"/v0/topics/{topic}.q", {"type": "queue"}).status == 201
    err = assert_error(c.put(f"/v0/routers/{topic}", {"source": f"{topic}.s",
                                                      "dest": f"{topic}.q"}),
                       409, "topic_exists_incompatible")
    assert err["detail"]["reason"] == "router_dest_is_queue"


def test_create_dest_false_needs_both_topics(c: Client, names: tuple[str, str, str]) -> None:
    name, src, dst = names
    r = c.put(f"/v0/routers/{name}", {"source": src, "dest": dst, "create_dest": False})
    assert_error(r, 404, "topic_not_found")
    assert c.get(f"/v0/topics/{src}").status == 404
    assert_error(c.get(f"/v0/routers/{name}"), 404, "router_not_found")
    c.put(f"/v0/topics/{src}", {})
    c.put(f"/v0/topics/{dst}", {})
    assert put(c, name, src, dst, create_dest=False)["create_dest"] is False


@pytest.mark.parametrize("body, field", [
    ({"dest": "d"}, "source"),
    ({"source": "s"}, "dest"),
    ({"source": "s", "dest": "d", "guarantee": "twice"}, "guarantee"),
    ({"source": "s", "dest": "d", "filter": ["tag", "Regex", "x"]}, "filter"),
    ({"source": "s", "dest": "d", "preserve_node": "yes"}, "preserve_node"),
    ({"source": "s", "dest": "d", "max_hops": 0}, "max_hops"),
    ({"source": "s", "dest": "d", "max_hops": 65}, "max_hops"),
    ({"source": "s", "dest": "d", "colour": "red"}, "colour"),
    ({"source": "-bad", "dest": "d"}, "source"),
])
def test_bad_bodies_are_400_naming_the_field(c: Client, topic: str, body: dict[str, Any],
                                             field: str) -> None:
    body = {k: (f"{topic}{v}" if k in ("source", "dest") and v in ("s", "d") else v)
            for k, v in body.items()}
    r = c.put(f"/v0/routers/{topic}", body)
    assert r.status == 400, r
    assert r.json["error"]["detail"]["field"] == field, r
    assert_error(c.get(f"/v0/routers/{topic}"), 404, "router_not_found")


def test_bad_names_methods_and_bodies(c: Client) -> None:
    r = c.put("/v0/routers/r1", raw=b"[1]")
    assert r.status == 400, r
    r = c.put("/v0/routers/r1", raw=b"{nope")
    assert r.status == 400, r
    r = c.post("/v0/routers/r1", {})
    assert r.status == 405 and r.headers["allow"] == "DELETE, GET, PUT"
    r = c.delete("/v0/routers")
    assert r.status == 405 and r.headers["allow"] == "GET"
    r = c.put("/v0/routers/%20bad", {"source": "a", "dest": "b"})
    assert r.status == 400, r
    assert c.get("/v0/topics/a").status == 404


def test_deleting_a_topic_deletes_its_routers(c: Client, topic: str) -> None:
    put(c, f"{topic}-1", f"{topic}.a", f"{topic}.b")
    put(c, f"{topic}-2", f"{topic}.b", f"{topic}.c")
    put(c, f"{topic}-3", f"{topic}.x", f"{topic}.y")
    assert c.delete(f"/v0/topics/{topic}.b").status == 200
    for gone in ("1", "2"):
        assert_error(c.get(f"/v0/routers/{topic}-{gone}"), 404, "router_not_found")
    assert state(c, f"{topic}-3")["source"] == f"{topic}.x"


# ---- forwarding ---------------------------------------------------------------------------------


def test_copies_carry_node_tag_meta_data_with_dest_seqs(c: Client, topic: str) -> None:
    src, dst = f"{topic}.src", f"{topic}.dst"
    write(c, dst, {"data": "direct"})  # a dest takes direct writes too: copies get the next seqs
    put(c, topic, src, dst)
    sent = [{"data": {"i": i, "nested": [1, {"x": None}]}, "node": f"n{i % 2}", "tag": f"t{i}",
             "meta": {"m": str(i)}} for i in range(5)]
    sent.append({"data": "bare"})
    src_seqs = write(c, src, *sent)
    caught_up(c, topic, 6)
    got = records(c, dst)
    assert [r["$seq"] for r in got] == [1, 2, 3, 4, 5, 6, 7]
    assert src_seqs == [1, 2, 3, 4, 5, 6]
    for want, rec in zip(sent, got[1:], strict=True):
        assert rec["data"] == want["data"]
        assert rec.get("$node") == want.get("node")
        assert rec.get("$tag") == want.get("tag")
        assert rec.get("meta") == want.get("meta")
    # $ts is the dest's (forward time)
    assert all(rec["$ts"] >= got[0]["$ts"] for rec in got)


def test_preserve_flags_drop_node_and_tag(c: Client, topic: str) -> None:
    src, dst = f"{topic}.src", f"{topic}.dst"
    put(c, topic, src, dst, preserve_node=False, preserve_tag=False)
    write(c, src, {"data": 1, "node": "n", "tag": "t", "meta": {"k": "1"}})
    caught_up(c, topic, 1)
    (rec,) = records(c, dst)
    assert "$node" not in rec and "$tag" not in rec and rec["meta"] == {"k": "1"}


def test_filters_eq_and_glob(c: Client, topic: str) -> None:
    src = f"{topic}.src"
    put(c, f"{topic}-eq", src, f"{topic}.eq", filter=["tag", "Eq", "a"])
    put(c, f"{topic}-glob", src, f"{topic}.glob", filter=["tag", "Glob", "user:*"])
    write(c, src, {"data": 1, "tag": "a"}, {"data": 2, "tag": "user:1"}, {"data": 3},
          {"data": 4, "tag": "ab"}, {"data": 5, "tag": "user:2"})
    eq = caught_up(c, f"{topic}-eq", 1)
    glob = caught_up(c, f"{topic}-glob", 2)
    assert (eq["skipped"], glob["skipped"]) == (4, 3)
    assert [r["data"] for r in records(c, f"{topic}.eq")] == [1]
    glob_recs = records(c, f"{topic}.glob")
    assert [(r["$seq"], r["data"]) for r in glob_recs] == [(1, 2), (2, 5)]  # no seq for a skip


def test_fan_out_keeps_per_source_order(c: Client, topic: str) -> None:
    src = f"{topic}.src"
    for i in range(4):
        put(c, f"{topic}-{i}", src, f"{topic}.d{i}")
    for batch in range(5):
        write(c, src, *({"data": batch * 100 + j} for j in range(100)))
    want = [b * 100 + j for b in range(5) for j in range(100)]
    for i in range(4):
        caught_up(c, f"{topic}-{i}", 500)
        assert [r["data"] for r in records(c, f"{topic}.d{i}")] == want


def test_a_new_router_forwards_the_retained_log(c: Client, topic: str) -> None:
    src, dst = f"{topic}.src", f"{topic}.dst"
    c.put(f"/v0/topics/{src}", {"cap_records": 3})
    write(c, src, *({"data": i} for i in range(5)))
    created = put(c, topic, src, dst)
    assert created["cursor"] == 2  # earliest_seq - 1
    caught_up(c, topic, 3)
    assert [r["data"] for r in records(c, dst)] == [2, 3, 4]


def test_exactly_once_copies_carry_the_router_key(c: Client, topic: str) -> None:
    src, dst = f"{topic}.src", f"{topic}.dst"
    got = put(c, topic, src, dst, guarantee="exactly_once")
    write(c, src, {"data": 1, "meta": {"keep": "yes"}}, {"data": 2})
    caught_up(c, topic, 2)
    epoch = got["source_epoch"]
    metas = [r["meta"] for r in records(c, dst)]
    assert metas == [{"keep": "yes", "_topics_router": f"{topic}/{src}/{epoch}/1"},
                     {"_topics_router": f"{topic}/{src}/{epoch}/2"}]


# ---- backpressure and metrics -------------------------------------------------------------------


def test_reject_dest_blocks_and_resumes(c: Client, topic: str) -> None:
    src, dst = f"{topic}.src", f"{topic}.dst"
    c.put(f"/v0/topics/{dst}", {"cap_records": 2, "discard": "reject"})
    put(c, topic, src, dst)
    write(c, src, *({"data": i} for i in range(5)))  # acked although the dest is full

    def blocked() -> bool:
        s = state(c, topic)
        return s["status"] == "blocked" and s["forwarded"] == 2

    wait_until(blocked)
    s = state(c, topic)
    assert (s["cursor"], s["lag"]) == (2, 3)
    assert s["last_error"]["code"] == "topic_full" and s["last_error"]["since_ts"] > 0
    assert metric(c, "topicsrv_router_blocked", f'{{router="{topic}"}}') == 1
    assert metric(c, "topicsrv_router_lag", f'{{router="{topic}"}}') == 3
    # room appears: the router resumes without any write to the source
    assert c.post(f"/v0/topics/{dst}/delete", {"before_seq": 3}).status == 200
    wait_until(lambda: state(c, topic)["forwarded"] == 4)
    assert c.post(f"/v0/topics/{dst}/delete", {"before_seq": 5}).status == 200
    s = caught_up(c, topic, 5)
    assert s["last_error"] is None and s["retries"] >= 1
    assert [(r["$seq"], r["data"]) for r in records(c, dst)] == [(5, 4)]
    assert metric(c, "topicsrv_router_blocked", f'{{router="{topic}"}}') == 0


def test_metrics_families(c: Client, topic: str) -> None:
    src = f"{topic}.src"
    put(c, topic, src, f"{topic}.dst", filter=["tag", "Eq", "x"])
    write(c, src, {"data": 1, "tag": "x"}, {"data": 2}, {"data": 3, "tag": "x"})
    caught_up(c, topic, 2)
    label = f'{{router="{topic}"}}'
    assert metric(c, "topicsrv_router_forwarded_total", label) == 2
    assert metric(c, "topicsrv_router_skipped_total", label) == 1
    assert metric(c, "topicsrv_router_lag", label) == 0
    assert metric(c, "topicsrv_router_cursor", label) == 3
    assert metric(c, "topicsrv_router_retries_total", label) == 0
    assert metric(c, "topicsrv_router_source_trimmed_total", label) == 0
    text = c.get("/metrics").body.decode()
    for family, kind in (("topicsrv_router_lag", "gauge"), ("topicsrv_router_blocked", "gauge"),
                         ("topicsrv_router_forwarded_total", "counter")):
        assert f"# TYPE {family} {kind}" in text
    c.delete(f"/v0/routers/{topic}")
    assert metric(c, "topicsrv_router_lag", label) is None


def test_a_filter_longer_than_any_tag_is_refused_and_list_stays_small(c: Client, topic: str) -> None:
    """Issue 23 item 8: tags are at most 256 bytes (UTF-8), so an Eq value or a Glob prefix
    past that can never match: 400 naming `filter`, no router and no topic created. At the
    limit it is accepted, and the router list stays a small answer."""
    src = f"{topic}.src"
    too_long = [["tag", "Eq", "x" * 257], ["tag", "Glob", "x" * 257 + "*"],
                ["tag", "Eq", "é" * 129], ["tag", "Eq", "x" * (10 << 20)]]
    for flt in too_long:
        r = c.put(f"/v0/routers/{topic}-big", {"source": src, "dest": f"{topic}.d", "filter": flt})
        assert (r.status, r.code, r.json["error"]["detail"]["field"]) == (
            400, "invalid_request", "filter"), r
    assert c.get(f"/v0/routers/{topic}-big").status == 404
    assert c.get(f"/v0/topics/{src}").status == 404
    put(c, f"{topic}-eq", src, f"{topic}.eq", filter=["tag", "Eq", "é" * 128])  # 256 bytes
    put(c, f"{topic}-glob", src, f"{topic}.glob", filter=["tag", "Glob", "x" * 256 + "*"])
    write(c, src, {"data": 1, "tag": "é" * 128}, {"data": 2, "tag": "x" * 256})
    assert caught_up(c, f"{topic}-eq", 1)["forwarded"] == 1
    assert caught_up(c, f"{topic}-glob", 1)["forwarded"] == 1
    listed = c.get("/v0/routers")
    assert listed.status == 200
    mine = [x for x in listed.json["routers"] if x["name"].startswith(topic)]
    assert len(mine) == 2 and all(len(json.dumps(x)) < 2048 for x in mine)
