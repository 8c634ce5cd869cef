"""Pub/sub over HTTP: publish, SSE subscriptions, and the bus shared with RESP (both ways)."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest

from tests.httpapi.conftest import SSE, Client, metric, wait_until
from tests.resp.conftest import InProc, frame, read_until, start_inproc


@pytest.fixture(params=["reactor", "tasks"])
def both(request: pytest.FixtureRequest) -> Iterator[InProc]:
    srv, stop = start_inproc(http=True, resp_io=request.param, heartbeat_s=0.2)
    yield srv
    stop()


def sse(srv: InProc, path: str, **kw: Any) -> SSE:
    assert srv.http_port is not None
    s = SSE(srv.http_port, path, **kw)
    assert s.status == 200
    return s


def subscribed(srv: InProc, channel: bytes, n: int = 1) -> None:
    wait_until(lambda: srv.ctx.bus.numsub(channel) == n)


def test_http_publish_reaches_resp_and_sse(both: InProc) -> None:
    assert both.http_port is not None
    http = Client(both.http_port)
    resp = both.connect()
    resp.sendall(frame(b"SUBSCRIBE", b"orders/eu"))
    read_until(resp, b":1\r\n")
    stream = sse(both, "/v0/channels/orders%2Feu/subscribe")
    subscribed(both, b"orders/eu", 2)
    r = http.post("/v0/channels/orders%2Feu/publish", {"id": 7})
    assert r.status == 200 and r.json["receivers"] == 2
    want = b'*3\r\n$7\r\nmessage\r\n$9\r\norders/eu\r\n$9\r\n{"id": 7}\r\n'
    assert read_until(resp, want) == want  # the body bytes as sent
    (ev,) = stream.frames(1)
    assert ev == {"event": "message",
                  "data": {"channel": "orders/eu", "pattern": None, "message": {"id": 7}}}
    r = http.post("/v0/channels/orders%2Feu/publish", raw=b"\x00raw",
                  headers={"Content-Type": "application/octet-stream"})
    assert r.json["receivers"] == 2
    (ev,) = stream.frames(1)
    assert ev["data"]["message"] == "\x00raw"
    stream.close()
    resp.close()


def test_resp_publish_reaches_sse_patterns_in_order(both: InProc) -> None:
    stream = sse(both, "/v0/channels/subscribe?patterns=news.*,x?&channels=plain")
    wait_until(lambda: both.ctx.bus.numpat() == 2 and both.ctx.bus.numsub(b"plain") == 1)
    pub = both.connect()
    pub.sendall(frame(b"PUBLISH", b"news.eu", b"1") + frame(b"PUBLISH", b"xy", b"two")
                + frame(b"PUBLISH", b"plain", b"[3]") + frame(b"PUBLISH", b"other", b"4"))
    assert read_until(pub, b":1\r\n:1\r\n:1\r\n:0\r\n") == b":1\r\n:1\r\n:1\r\n:0\r\n"
    got = [ev["data"] for ev in stream.frames(3)]
    assert got == [{"channel": "news.eu", "pattern": "news.*", "message": 1},
                   {"channel": "xy", "pattern": "x?", "message": "two"},
                   {"channel": "plain", "pattern": None, "message": [3]}]
    stream.close()
    wait_until(lambda: both.ctx.bus.numpat() == 0)  # the stream left the bus


def test_heartbeat_and_no_receivers(both: InProc) -> None:
    assert both.http_port is not None
    stream = sse(both, "/v0/channels/quiet/subscribe")
    assert stream.next_event() == {"comment": "hb"}
    r = Client(both.http_port).post("/v0/channels/nobody/publish", {"a": 1})
    assert r.json["receivers"] == 0
    stream.close()


def test_publish_body_rules(both: InProc) -> None:
    assert both.http_port is not None
    http = Client(both.http_port)
    r = http.post("/v0/channels/c/publish", raw=b"{not json",
                  headers={"Content-Type": "application/json"})
    assert r.status == 400 and r.code == "invalid_json"
    r = http.post("/v0/channels/c/publish", raw=b"hi", headers={"Content-Type": "text/plain"})
    assert r.status == 415
    assert http.get("/v0/channels/c/publish").status == 405
    assert http.get("/v0/channels/subscribe").status == 400


def test_tokens_reader_subscribes_not_publishes() -> None:
    srv, stop = start_inproc(http=True, token="full", read_token="ro")
    try:
        assert srv.http_port is not None
        assert Client(srv.http_port).post("/v0/channels/c/publish", {}).status == 401
        ro = Client(srv.http_port, token="ro")
        r = ro.post("/v0/channels/c/publish", {})
        assert r.status == 403 and r.code == "forbidden"
        s = sse(srv, "/v0/channels/c/subscribe", headers={"Authorization": "Bearer ro"})
        subscribed(srv, b"c")
        assert Client(srv.http_port, token="full").post("/v0/channels/c/publish",
                                                         "x").json["receivers"] == 1
        assert s.frames(1)[0]["data"]["message"] == "x"
        s.close()
    finally:
        stop()


def test_slow_sse_subscriber_is_cut_at_the_limit() -> None:
    srv, stop = start_inproc(http=True)
    try:
        assert srv.http_port is not None
        srv.ctx.bus.limits.hard = 256 << 10
        srv.ctx.bus.limits.soft = 0
        raw = socket.create_connection(("127.0.0.1", srv.http_port))
        raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        raw.sendall(b"GET /v0/channels/big/subscribe HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        subscribed(srv, b"big")
        pub = srv.connect()
        payload = b"x" * 8192
        pipeline = frame(b"PUBLISH", b"big", payload) * 50
        for _ in range(20):  # 8 MB published; the stream never reads
            pub.sendall(pipeline)
            replies = b""
            while len(replies) < 200:  # 50 four-byte replies, `:1` until the cut, then `:0`
                replies += pub.recv(200 - len(replies))
            if srv.ctx.bus.stats.slow_disconnects:
                break
        assert srv.ctx.bus.stats.slow_disconnects == 1
        assert srv.ctx.bus.stats.dropped >= 1
        assert srv.ctx.bus.numsub(b"big") == 0
        raw.settimeout(5)
        got = b""
        while chunk := raw.recv(65536):  # the server ended the stream: EOF after what it sent
            got += chunk
        assert got.startswith(b"HTTP/1.1 200")
        raw.close()
    finally:
        stop()


def test_metrics_and_status_count_the_bus(both: InProc) -> None:
    assert both.http_port is not None
    http = Client(both.http_port)
    stream = sse(both, "/v0/channels/subscribe?patterns=m*")
    wait_until(lambda: both.ctx.bus.numpat() == 1)
    for _ in range(3):
        assert http.post("/v0/channels/metric/publish", 1).json["receivers"] == 1
    assert http.post("/v0/channels/zzz/publish", 1).json["receivers"] == 0
    stream.frames(3)
    assert metric(http, "topicsrv_pubsub_patterns") == 1
    assert metric(http, "topicsrv_pubsub_messages_published_total") == 4
    assert metric(http, "topicsrv_pubsub_messages_delivered_total") == 3
    assert metric(http, "topicsrv_pubsub_slow_subscriber_disconnects_total") == 0
    pubsub = http.get("/v0/status").json["server"]["pubsub"]
    assert pubsub == {"channels": 0, "patterns": 1, "published": 4, "delivered": 3,
                      "dropped": 0, "slow_disconnects": 0}
    stream.close()
