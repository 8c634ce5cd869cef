"""Cross-site requests (issue 23 item 2): a page of another origin changes nothing on any route.

`GET /v0/work` claims jobs, and a browser sends a GET cross-site with no preflight (`fetch` in
`no-cors` mode). The guard (topicsrv/http/guards.py Rule 1b) refuses a request whose `Origin`
is another origin or whose `Sec-Fetch-Site` says another site, with 403 `forbidden`
(`detail.reason: "cross_site"`); same-origin requests and clients that send neither header
keep working. Each test states what a user sees: the status, the code, and that the queue's
jobs were neither leased nor dead-lettered.
"""

from __future__ import annotations

from typing import Any

import pytest

from .conftest import SSE, Client
from .inproc import Srv

CROSS = [  # headers a browser sends for a request made by a page of another origin
    {"Origin": "http://evil.example"},
    {"Origin": "null"},  # sandboxed iframe, file:// page
    {"Origin": "http://127.0.0.1:1"},  # another local server (another port)
    {"Sec-Fetch-Site": "cross-site"},  # no-cors GET: Chrome sends no Origin
    {"Sec-Fetch-Site": "same-site"},  # localhost:3000 -> localhost:PORT
]


@pytest.fixture
def q(c: Client, topic: str) -> str:
    r = c.put(f"/v0/topics/{topic}", {"type": "queue", "lease_ms": 30_000, "max_deliveries": 3})
    assert r.status == 201, r
    r = c.post(f"/v0/topics/{topic}", {"records": [{"data": i} for i in range(5)]})
    assert r.status == 200, r
    return topic


def queue_state(c: Client, q: str) -> dict[str, Any]:
    state = c.get(f"/v0/topics/{q}?touch=false").json
    return {k: state["queue"][k] for k in ("ready", "in_flight", "dead_lettered")}


@pytest.mark.parametrize("headers", CROSS)
def test_a_cross_site_work_stream_is_refused_and_claims_nothing(
        srv: Srv, c: Client, q: str, headers: dict[str, str]) -> None:
    for _ in range(4):  # more than max_deliveries: before the fix all 5 jobs dead-lettered
        s = SSE(srv.http_port, f"/v0/work?topics={q}&node=evil&max_in_flight=1000", headers)
        try:
            assert s.status == 403
            body = s.resp.read()
        finally:
            s.close()
        assert b'"code":"forbidden"' in body and b'"reason":"cross_site"' in body, body
    assert queue_state(c, q) == {"ready": 5, "in_flight": 0, "dead_lettered": 0}


@pytest.mark.parametrize("headers", CROSS)
def test_every_state_changing_route_refuses_a_cross_site_request(
        c: Client, q: str, headers: dict[str, str]) -> None:
    tries = [
        ("POST", f"/v0/topics/{q}", {"records": [{"data": "x"}]}),
        ("POST", f"/v0/topics/{q}/claim", {"node": "evil", "max": 5}),
        ("POST", f"/v0/topics/{q}/delete", {"before_seq": 99}),
        ("PUT", "/v0/topics/made-cross-site", {"type": "log"}),
        ("DELETE", f"/v0/topics/{q}", None),
        ("PUT", "/v0/routers/xr", {"source": q, "dest": "made-by-router"}),
        ("GET", f"/v0/topics/{q}", None),  # reads are refused too: no route is special
    ]
    for method, path, body in tries:
        r = c.request(method, path, body, headers=headers)
        assert (r.status, r.code, r.json["error"]["detail"]["reason"]) == (
            403, "forbidden", "cross_site"), (method, path, r)
    assert c.get(f"/v0/topics/{q}").json["head_seq"] == 5
    assert queue_state(c, q) == {"ready": 5, "in_flight": 0, "dead_lettered": 0}
    names = {t["topic"] for t in c.get("/v0/topics").json["topics"]}
    assert {"made-cross-site", "made-by-router"}.isdisjoint(names)
    assert c.get("/v0/routers/xr").status == 404


def test_same_origin_pages_and_clients_without_origin_keep_working(
        srv: Srv, c: Client, q: str) -> None:
    own = {"Origin": f"http://127.0.0.1:{srv.http_port}", "Sec-Fetch-Site": "same-origin"}
    r = c.post(f"/v0/topics/{q}/claim", {"node": "page", "max": 1}, headers=own)
    assert r.status == 200 and [j["$seq"] for j in r.json["jobs"]] == [1], r
    typed = {"Sec-Fetch-Site": "none"}  # the user typed the URL
    assert c.get(f"/v0/topics/{q}", headers=typed).status == 200
    assert c.post(f"/v0/topics/{q}/claim", {"node": "curl", "max": 1}).json["jobs"][0][
        "$seq"] == 2  # no Origin at all: curl, SDKs, workers
    s = SSE(srv.http_port, f"/v0/work?topics={q}&node=worker&max_in_flight=1")
    try:
        assert s.status == 200
    finally:
        s.close()
    # the status page itself may be linked from anywhere: static, no data
    cross_link = c.get("/", headers={"Sec-Fetch-Site": "cross-site"})
    assert cross_link.status == 200 and cross_link.headers["content-type"].startswith("text/html")
