"""In-process tests of the sans-IO parts (protocol, router, frames, bodies) and of dispatch
paths a real process cannot reach on demand (not_ready, an unexpected exception)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import orjson
import pytest
import trio
from prometheus_client.core import CounterMetricFamily
from prometheus_client.parser import text_string_to_metric_families

from topicsrv import buildinfo
from topicsrv.context import ServerConfig, make_context
from topicsrv.engine.log.records import prepare_json
from topicsrv.errors import TopicsError
from topicsrv.http import app, metrics, sse
from topicsrv.http.handlers import diff_body
from topicsrv.http.protocol import CLOSED, NEED_DATA, Refusal, Request, Response, ServerProtocol
from topicsrv.http.router import ROUTES, Match, resolve
from topicsrv.http.server import serve_http

# ---- protocol ----------------------------------------------------------------------------


def test_pipelined_requests_come_out_one_at_a_time_in_order() -> None:
    proto = ServerProtocol(max_body=1024)
    proto.receive_data(b"POST /a HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 3\r\n\r\nabc"
                       b"GET /b?x=1&y=%20 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    first = proto.next_event()
    assert isinstance(first, Request)
    assert (first.method, first.path, first.body) == ("POST", "/a", b"abc")
    out = proto.respond(Response(200, b"{}"))
    assert out.startswith(b"HTTP/1.1 200 OK\r\n") and out.endswith(b"\r\n\r\n{}")
    second = proto.next_event()
    assert isinstance(second, Request)
    assert (second.path, second.query) == ("/b", {"x": "1", "y": " "})
    proto.respond(Response(404, b"{}"))
    assert proto.next_event() is NEED_DATA
    proto.receive_data(b"")
    assert proto.next_event() is CLOSED


def test_body_in_pieces_and_headers_folded() -> None:
    proto = ServerProtocol(max_body=1024)
    proto.receive_data(b"PUT /t HTTP/1.1\r\nHost: 127.0.0.1\r\nX-A: 1\r\nX-A: 2\r\nContent-Length: 4\r\n\r\nab")
    assert proto.next_event() is NEED_DATA
    proto.receive_data(b"cd")
    req = proto.next_event()
    assert isinstance(req, Request) and req.body == b"abcd" and req.headers["x-a"] == "1, 2"


def test_content_length_over_limit_is_refused_before_the_body() -> None:
    proto = ServerProtocol(max_body=10)
    proto.receive_data(b"POST /t HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 11\r\n\r\n")
    ev = proto.next_event()
    assert isinstance(ev, Refusal) and ev.status == 413
    assert b"connection: close" in ev.data and b'"body_too_large"' in ev.data
    assert proto.wants_close


def test_chunked_body_refused_when_it_crosses_the_limit() -> None:
    proto = ServerProtocol(max_body=10)
    proto.receive_data(b"POST /t HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n"
                       b"6\r\nabcdef\r\n")
    assert proto.next_event() is NEED_DATA
    proto.receive_data(b"6\r\nghijkl\r\n")
    ev = proto.next_event()
    assert isinstance(ev, Refusal) and ev.status == 413


def test_malformed_request_is_a_400_refusal() -> None:
    proto = ServerProtocol(max_body=10)
    proto.receive_data(b"NOT HTTP AT ALL\r\n\r\n")
    ev = proto.next_event()
    assert isinstance(ev, Refusal) and ev.status == 400
    assert json.loads(ev.data.split(b"\r\n\r\n")[1])["error"]["code"] == "invalid_request"


def test_expect_100_continue_is_answered() -> None:
    proto = ServerProtocol(max_body=100)
    proto.receive_data(b"POST /t HTTP/1.1\r\nHost: 127.0.0.1\r\nExpect: 100-continue\r\n"
                       b"Content-Length: 2\r\n\r\n")
    assert proto.next_event() is NEED_DATA
    assert proto.data_to_send().startswith(b"HTTP/1.1 100 ")


def test_connection_close_is_honoured() -> None:
    proto = ServerProtocol(max_body=100)
    proto.receive_data(b"GET /t HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
    assert isinstance(proto.next_event(), Request)
    proto.respond(Response(200, b"{}"))
    assert proto.wants_close


# ---- router ------------------------------------------------------------------------------


def test_router_table() -> None:
    assert resolve("POST", "/v0/topics/a.b:c-d_e/diff").handler == "diff"
    assert resolve("POST", "/v0/topics/a/diff").params == {"topic": "a"}
    assert resolve("GET", "/v0/watch").handler == "watch_many"
    with pytest.raises(TopicsError) as e:
        resolve("GET", "/v0/topics/a/diff")
    assert e.value.code == "method_not_allowed" and e.value.detail == {"allow": ["POST"]}
    for path in ("/v0/topics//diff", "/nope", "/v0/topics/a/b/c/d"):
        with pytest.raises(TopicsError) as e:
            resolve("GET", path)
        assert e.value.code == "not_found"
    with pytest.raises(TopicsError) as e:
        resolve("GET", "/v0/topics/-bad")
    assert e.value.code == "invalid_topic_name"
    assert resolve("GET", "/v0/routers/r1") == Match("get_router", {"router": "r1"})
    assert resolve("GET", "/v0/routers").handler == "list_routers"
    with pytest.raises(TopicsError) as e:
        resolve("POST", "/v0/routers/r1")
    assert e.value.code == "method_not_allowed"
    assert resolve("POST", "/v0/topics/q/claim") == Match("claim", {"topic": "q"})
    assert resolve("GET", "/v0/work").handler == "work"
    every = {h for r in ROUTES for h in r.methods.values()} - {"unavailable"}
    assert every - app.STREAMS == set(app.HANDLERS)


# ---- frames and bodies ---------------------------------------------------------------------


def test_cursor_ids_round_trip_without_padding() -> None:
    for cursors in ({"a": 1}, {"a": 0, "b.c": 123456789}, {"x": 2**63}):
        ident = sse.encode_id(cursors)
        assert b"=" not in ident and re.fullmatch(rb"[A-Za-z0-9_-]+", ident)
        assert sse.decode_id(ident.decode()) == cursors
    for bad in ("***", "WzFd", sse.encode_id({"a": -1}).decode()):  # WzFd = "[1]"
        with pytest.raises(TopicsError):
            sse.decode_id(bad)


def test_record_frame_keeps_the_stored_bytes() -> None:
    blob = prepare_json({"data": {"z": [1, 2]}, "tag": "t"}).encode(7, 1000)
    frame = sse.frame(b"record", sse.record_data(b'"tp"', blob), {"tp": 7})
    ident, event, data, *_ = frame.split(b"\n")
    assert ident == b"id: " + sse.encode_id({"tp": 7}) and event == b"event: record"
    assert data == b'data: {"topic":"tp",' + blob[1:]
    assert json.loads(data[6:]) == {"topic": "tp", "$seq": 7, "$ts": 1000, "$tag": "t",
                                    "data": {"z": [1, 2]}}
    assert frame.endswith(b"\n\n")


def test_diff_body_joins_records_verbatim() -> None:
    from topicsrv.engine.log.reads import ReadResult
    from topicsrv.engine.log.tombstone import Tombstone

    blobs = [prepare_json({"data": i}).encode(i, 5) for i in (3, 4)]
    tomb = Tombstone(gap_from=1, gap_to=2, reason="cap", missed_estimate=2, earliest_seq=3,
                     head_seq=4, ts=5)
    res = ReadResult(blobs, [3, 4], tomb, 4, 4, 3, 2)
    body = diff_body("t", res, 0.5)
    assert b",".join(blobs) in body
    assert list(orjson.loads(body)) == ["topic", "records", "tombstone", "next_from_seq",
                                        "head_seq", "earliest_seq", "caught_up", "lag",
                                        "performance"]
    assert orjson.loads(body)["tombstone"] == {"gap_from": 1, "gap_to": 2, "reason": "cap",
                                               "missed_estimate": 2, "earliest_seq": 3,
                                               "head_seq": 4}
    assert orjson.loads(body)["performance"] == {"server_total_ms": 0.5, "records_scanned": 2}


# ---- dispatch in-process -------------------------------------------------------------------


def _ctx(tmp_path: Path, **kw: Any) -> Any:
    return make_context(ServerConfig(data_dir=tmp_path, http_port=0, resp_port=None, **kw))


def _req(method: str, path: str, body: bytes = b"", headers: dict[str, str] | None = None) -> Request:
    return Request(method, path, path, {}, headers or {}, body)


async def test_ready_is_503_until_ctx_ready(tmp_path: Path) -> None:
    ctx = _ctx(tmp_path)
    resp = await app.dispatch(ctx, _req("GET", "/v0/ready"))
    assert isinstance(resp, Response) and resp.status == 503
    assert orjson.loads(resp.body)["error"]["code"] == "not_ready"
    ctx.ready = True
    resp = await app.dispatch(ctx, _req("GET", "/v0/ready"))
    assert isinstance(resp, Response) and resp.status == 200
    assert orjson.loads(resp.body)["build"] == buildinfo.describe()  # compiled or pure
    ctx.shutting_down = True
    resp = await app.dispatch(ctx, _req("GET", "/v0/ready"))
    assert isinstance(resp, Response) and orjson.loads(resp.body)["error"]["code"] == "shutting_down"


async def test_ready_lists_a_damaged_file_and_stays_200(tmp_path: Path) -> None:
    """http/ops.py Rule 1: recovered and serving is ready; a file the server runs without is
    listed in `damaged` with the command that replaces it (Storage Rule 5)."""
    from topicsrv.storage.store import Storage

    ctx = _ctx(tmp_path)
    ctx.ready = True
    resp = await app.dispatch(ctx, _req("GET", "/v0/ready"))
    assert isinstance(resp, Response) and orjson.loads(resp.body)["damaged"] == []
    ctx.storage = Storage(ctx.engine, tmp_path)
    ctx.storage.damaged["functions.json"] = "not valid JSON"
    resp = await app.dispatch(ctx, _req("GET", "/v0/ready"))
    assert isinstance(resp, Response) and resp.status == 200
    assert orjson.loads(resp.body)["damaged"] == [
        {"file": "functions.json", "problem": "not valid JSON", "repair": "FUNCTION FLUSH"}]


async def test_unexpected_exception_is_a_logged_500_and_the_server_keeps_serving(
    tmp_path: Path, monkeypatch: Any, caplog: Any
) -> None:
    async def boom(call: Any) -> Response:
        raise RuntimeError("secret internals")

    monkeypatch.setitem(app.HANDLERS, "list_topics", boom)
    ctx = _ctx(tmp_path)
    async with trio.open_nursery() as nursery:
        host, port = await nursery.start(serve_http, ctx)
        stream = await trio.open_tcp_stream(host, port)
        await stream.send_all(b"GET /v0/topics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
                              b"GET /v0/health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        data = b""
        while chunk := await stream.receive_some(65536):
            data += chunk
        await stream.aclose()
        nursery.cancel_scope.cancel()
    first, second = data.split(b"HTTP/1.1 ")[1:]
    assert first.startswith(b"500") and b'"code":"internal"' in first
    assert b"secret internals" not in first and b"Traceback" not in first
    assert second.startswith(b"200")
    assert "secret internals" in caplog.text


async def test_metrics_exposition_format(tmp_path: Path) -> None:
    ctx = _ctx(tmp_path)
    ctx.engine.write("m1", [prepare_json({"data": "abc"})])
    text = metrics.render_text(ctx)
    for line in text.splitlines():
        assert line.startswith("# HELP ") or line.startswith("# TYPE ") or re.fullmatch(
            r'[a-z_0-9]+(\{[a-z]+="[^"]*"(,[a-z]+="[^"]*")*\})? -?[0-9.e+-]+', line), line
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for f in text_string_to_metric_families(text) for s in f.samples}
    assert samples[("topicsrv_writes_total", ())] == 1
    assert samples[("topicsrv_bytes_written_total", ())] == 5
    assert samples[("topicsrv_topic_head_seq", (("topic", "m1"),))] == 1
    ctx.metrics.exporters[:] = [lambda: [CounterMetricFamily("extra_total", "x", value=3)]]
    assert "extra_total 3.0" in metrics.render_text(ctx)
