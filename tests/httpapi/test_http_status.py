"""The status page's data: GET /v0/status (a bounded snapshot), /v0/status/stream (SSE) and the
page itself (static, CSP by hash, the one route without the token); topicsrv/http/status.py.
The page running in a real browser is tests/integration/test_status_browser.py."""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from conftest import run_in_thread
from topicsrv.context import ServerConfig, ServerContext

from .conftest import SSE, Client, wait_until
from .inproc import Srv, start_server

TOKEN = "st-s3cret"


@pytest.fixture(scope="module")
def srv() -> Iterator[Srv]:
    s, stop = start_server(status_slot_s=0.05)
    yield s
    stop()


def test_snapshot_shows_topics_groups_queues_and_routers(srv: Srv, c: Client) -> None:
    assert c.put("/v0/topics/s-q", {"type": "queue", "priority": 700}).status == 201
    c.write("s-q", *range(4))
    assert c.post("/v0/topics/s-q/claim", {"node": "w", "max": 1}).status == 200
    assert c.put("/v0/routers/s-r", {"source": "s-log", "dest": "s-copy"}).status in (200, 201)
    c.write("s-log", *range(6))
    r = redis.Redis(port=srv.resp_port)
    r.xgroup_create("s-log", "g1", id="0")
    r.xreadgroup("g1", "alice", {"s-log": ">"}, count=2)
    r.close()
    wait_until(lambda: c.get("/v0/status").json["routers"][0]["lag"] == 0)
    snap = c.get("/v0/status?top=200").json
    topics = {t["name"]: t for t in snap["topics"]}
    q, log = topics["s-q"], topics["s-log"]
    assert q["queue"] == {"ready": 3, "in_flight": 1, "delayed": 0, "dead_lettered": 0,
                          "oldest_ready_age_ms": q["queue"]["oldest_ready_age_ms"]}
    assert q["effective_priority"] >= 700 and q["durability"] == "disk"
    assert (log["head_seq"], log["earliest_seq"], log["count"]) == (6, 1, 6)
    assert log["groups"] == [{"name": "g1", "lag": 4, "pending": 2, "consumers": 1}]
    assert topics["s-copy"]["count"] == 6
    router = snap["routers"][0]
    assert (router["name"], router["source"], router["dest"], router["status"]) == \
        ("s-r", "s-log", "s-copy", "caught_up")
    assert snap["storage"] is None and snap["server"]["topics"] == len(srv.ctx.engine.topics)


def test_snapshot_is_bounded(srv: Srv, c: Client) -> None:
    for i in range(6):
        c.write(f"s-many{i}", *range(i + 1))
    snap = c.get("/v0/status?top=2").json
    assert len(snap["topics"]) == 2
    rest = snap["others"]
    assert rest["topics"] == len(srv.ctx.engine.topics) - 2
    assert rest["count"] + sum(t["count"] for t in snap["topics"]) == \
        sum(t.count for t in srv.ctx.engine.topics.values())
    assert all(len(t["writes"]) in (0, 60) for t in snap["topics"])  # a ring, never more
    for bad in ("0", "201", "x"):
        assert c.get(f"/v0/status?top={bad}").code == "invalid_request"
    assert c.get("/v0/status/stream?interval_ms=10").code == "invalid_request"


def test_rates_come_from_the_sampler(srv: Srv, c: Client) -> None:
    c.write("s-rate", *range(50))

    def rated() -> bool:  # a snapshot may be up to CACHE_S old, a rate one slot
        return any(t["name"] == "s-rate" and sum(t["writes"]) == 50
                   for t in c.get("/v0/status").json["topics"])

    wait_until(rated)
    c.diff("s-rate", 0)
    wait_until(lambda: any(t["name"] == "s-rate" and sum(t["reads"]) == 50
                           for t in c.get("/v0/status").json["topics"]))


def test_reading_the_status_changes_nothing(srv: Srv, c: Client) -> None:
    c.write("s-quiet", 1)
    c.get("/v0/status?top=199")  # (a fresh snapshot: this `top` was not asked for before)
    before = c.get("/v0/topics/s-quiet?touch=false").json["last_read_ts"]
    srv.clock.advance(5000)
    c.get("/v0/status")
    assert c.get("/v0/topics/s-quiet?touch=false").json["last_read_ts"] == before


def test_the_stream_pushes_new_numbers(srv: Srv, c: Client) -> None:
    c.write("s-live", 1)
    s = SSE(srv.http_port, "/v0/status/stream?interval_ms=250")
    try:
        assert s.status == 200
        first = s.frames(1)[0]
        assert first["event"] == "status" and "id" not in first
        for _ in range(20):  # the first snapshot may be up to CACHE_S old
            if any(t["name"] == "s-live" and t["head_seq"] == 1 for t in first["data"]["topics"]):
                break
            first = s.frames(1)[0]
        else:
            raise AssertionError("the stream never showed the topic")
        c.write("s-live", 2, 3)
        for _ in range(20):
            ev = s.frames(1)[0]
            if any(t["name"] == "s-live" and t["head_seq"] == 3 for t in ev["data"]["topics"]):
                break
        else:
            raise AssertionError("the stream never showed the new head_seq")
        assert srv.ctx.metrics.http.sse_streams >= 1
    finally:
        s.close()


def test_the_page_is_static_and_allows_only_its_own_script(srv: Srv, c: Client) -> None:
    c.write("s-secret-name", 1)
    r = c.get("/")
    assert r.status == 200 and r.headers["content-type"] == "text/html; charset=utf-8"
    page = r.body
    assert b"s-secret-name" not in page  # the page holds no data
    csp = r.headers["content-security-policy"]
    for tag in ("script", "style"):
        m = re.search(rf"<{tag}>(.*?)</{tag}>".encode(), page, re.S)
        assert m is not None
        digest = base64.b64encode(hashlib.sha256(m.group(1)).digest()).decode()
        assert f"{tag}-src 'sha256-{digest}'" in csp
    assert "default-src 'none'" in csp and "form-action 'none'" in csp
    assert "connect-src 'self'" in csp and "frame-ancestors 'none'" in csp
    assert r.headers["x-frame-options"] == "DENY" and r.headers["cache-control"] == "no-store"
    assert b"http://" not in page.replace(b"http://www.w3.org/2000/svg", b"")  # no external asset
    assert b"https://" not in page


@pytest.fixture(scope="module")
def token_ctx() -> Iterator[ServerContext]:
    ctx, stop = run_in_thread(ServerConfig(http_port=0, resp_port=None, storage=False,
                                           token=TOKEN))
    yield ctx
    stop()


def test_with_a_token_only_the_page_is_open(token_ctx: ServerContext) -> None:
    port = token_ctx.addresses["http"][1]
    anon: Any = Client(port)
    assert anon.get("/").status == 200
    assert anon.get("/v0/status").status == 401
    assert SSE(port, "/v0/status/stream").status == 401
    assert anon.get("/?token=x").status == 200  # a query changes nothing
    authed = Client(port, TOKEN)
    assert authed.get("/v0/status").json["server"]["topics"] == 0
    s = SSE(port, "/v0/status/stream", headers={"Authorization": f"Bearer {TOKEN}"})
    try:
        assert s.status == 200 and s.frames(1)[0]["event"] == "status"
    finally:
        s.close()
