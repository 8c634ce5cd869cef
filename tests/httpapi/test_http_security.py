"""Hostile requests of issue 10: path spellings around the token (1), cross-site writes and DNS
rebinding (11), JSON too deep for the encoder (15) and integers wider than 64 bits (16).

Each test states what a user sees: the status and error code, and that nothing changed.
"""

from __future__ import annotations

import http.client
import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from topicsrv.cli import build_parser
from topicsrv.context import ServerConfig, make_context
from topicsrv.http import app
from topicsrv.http.guards import parse_allowed_hosts
from topicsrv.http.protocol import Request, Response
from topicsrv.http.router import resolve, segments

TOKEN = "s3cret"


@pytest.fixture(scope="module")
def token_server(tmp_path_factory: Any) -> Iterator[Any]:
    from conftest import ServerProcess  # the repository's root conftest

    srv = ServerProcess(tmp_path_factory.mktemp("sec") / "data", "--token", TOKEN).start()
    yield srv
    srv.stop()


def send(port: int, method: str, path: str, body: bytes | None = None, *,
         token: str | None = None, host: str | None = "127.0.0.1",
         ctype: str | None = "application/json") -> tuple[int, dict[str, Any] | None]:
    """One request with the path sent exactly as given (no normalisation by the client)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        if host is not None:
            conn.putheader("Host", host)
        if token is not None:
            conn.putheader("Authorization", f"Bearer {token}")
        if body is not None:
            if ctype is not None:
                conn.putheader("Content-Type", ctype)
            conn.putheader("Content-Length", str(len(body)))
        conn.endheaders(body)
        resp = conn.getresponse()
        data = resp.read() if not resp.getheader("content-type", "").startswith(
            "text/event-stream") else b""
        try:
            return resp.status, orjson.loads(data) if data else None
        except orjson.JSONDecodeError:
            return resp.status, None  # /metrics is text
    finally:
        conn.close()


def code(doc: dict[str, Any] | None) -> str | None:
    return None if doc is None else doc.get("error", {}).get("code")


# ---- 1. canonical paths only, auth before routing --------------------------------------

ROUTES = [  # (method, canonical path, body)
    ("GET", "/v0/health", None), ("GET", "/v0/ready", None), ("GET", "/metrics", None),
    ("GET", "/v0/status", None), ("GET", "/v0/status/stream", None),
    ("GET", "/v0/topics", None), ("GET", "/v0/topics/k", None),
    ("PUT", "/v0/topics/k", b'{"ttl_ms": 5}'), ("DELETE", "/v0/topics/k", None),
    ("POST", "/v0/topics/k", b'{"records": [{"data": 1}]}'),
    ("POST", "/v0/topics/k/diff", b'{"from_seq": 0}'),
    ("POST", "/v0/topics/k/delete", b'{"before_seq": 99}'),
    ("GET", "/v0/topics/k/watch", None), ("GET", "/v0/watch?topics=k", None),
    ("POST", "/v0/topics/k/claim", b'{"node": "w"}'),
    ("POST", "/v0/topics/k/ack", b'{"node": "w", "seqs": [1]}'),
    ("POST", "/v0/topics/k/nack", b'{"node": "w", "seqs": [1]}'),
    ("POST", "/v0/topics/k/extend", b'{"node": "w", "seqs": [1]}'),
    ("GET", "/v0/work?topics=k&node=w", None),
]


def spellings(target: str) -> list[str]:
    """Non-canonical spellings of a path: each would reach the same route if normalised."""
    path, sep, query = target.partition("?")
    parts = path[1:].split("/")
    first, rest = parts[0], "/".join(parts[1:])
    variants = [
        "/" + path,                                        # //v0/topics/k
        path + "/",                                        # trailing slash
        "/./" + path[1:],                                  # /./v0/...
        f"/{first}/zz/../{rest}" if rest else f"/zz/../{first}",  # dot-dot back to the route
        f"/{first}/%2e/{rest}" if rest else f"/%2e/{first}",      # encoded dot segment
        "/" + path[1:].replace("/", "%2F"),                # %2F for every separator
        "/" + path[1:].replace("/", "%2f", 1),            # %2f for the first one
        "/" + path[1].upper() + path[2:],                  # /V0/... or /Metrics
        path.replace("o", "%6F", 1),                       # an encoded letter
        path + "/.",
    ]
    if rest:
        variants.append(f"/{first}//{rest}")               # doubled inner slash
    return [v + sep + query for v in dict.fromkeys(variants) if v != path]


def assert_refused_without_side_effect(port: int, token: str | None) -> None:
    status, _ = send(port, "POST", "/v0/topics/k", b'{"records": [{"data": 0}]}', token=token)
    assert status == 200
    before = send(port, "GET", "/v0/topics/k?touch=false", token=token)[1]
    assert before is not None
    for method, target, body in ROUTES:
        for variant in spellings(target):
            status, doc = send(port, method, variant, body, token=token)
            assert (status, code(doc)) in ((404, "not_found"), (400, "invalid_topic_name")), (
                method, variant, status, doc)
    after = send(port, "GET", "/v0/topics/k?touch=false", token=token)[1]
    assert after is not None
    assert (after["epoch"], after["head_seq"], after["count"], after["config"]) == (
        before["epoch"], before["head_seq"], before["count"], before["config"])


def test_no_spelling_of_a_path_reaches_a_route_with_a_token(token_server: Any) -> None:
    assert_refused_without_side_effect(token_server.http_port, TOKEN)


def test_no_spelling_of_a_path_reaches_a_route_without_a_token(ready_server: Any) -> None:
    assert_refused_without_side_effect(ready_server.http_port, None)


def test_without_the_token_every_path_and_spelling_is_401(token_server: Any) -> None:
    port = token_server.http_port
    assert send(port, "POST", "/v0/topics/k", b'{"records": [{"data": 1}]}', token=TOKEN)[0] == 200
    targets = ["//", "/nope", "/v0", "/v0/nothing-here", "*"]
    for method, target, body in ROUTES:
        targets += [target, *spellings(target)]
        for t in [target, *spellings(target)]:
            status, doc = send(port, method, t, body)
            assert (status, code(doc)) == (401, "unauthorized"), (method, t, status, doc)
    for t in targets[:5]:
        assert send(port, "GET", t)[0] == 401
        assert send(port, "GET", t, token="wrong")[0] == 401
    # the one exception: GET / is the static status page (it asks for the token itself)
    assert send(port, "GET", "/")[0] == 200
    for method in ("POST", "PUT", "DELETE", "HEAD"):
        assert send(port, method, "/")[0] == 401, method
    # the doubled slash of the issue, verbatim: the topic is still there
    assert send(port, "DELETE", "//v0/topics/k")[0] == 401
    assert send(port, "GET", "//metrics")[0] == 401
    state = send(port, "GET", "/v0/topics/k?touch=false", token=TOKEN)[1]
    assert state is not None and state["count"] >= 1


def test_router_sees_raw_segments() -> None:
    assert segments("/v0/topics/a%3Ab") == ["v0", "topics", "a%3Ab"]
    assert resolve("GET", "/v0/topics/a%3Ab").params == {"topic": "a:b"}  # names may be encoded
    for bad in ("//v0/health", "/v0/health/", "/v0/./health", "/v0/%2E%2E/v0/health", "",
                "v0/health", "http://h/v0/health"):
        assert segments(bad) is None, bad


# ---- 11. cross-site writes: Content-Type and Host ---------------------------------------


def test_a_body_must_be_declared_json(client: Any, topic: str) -> None:
    port = client.port
    body = b'{"records": [{"data": 1}]}'
    for ctype in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data",
                  None, "application/jsonp", "text/json", "application/json, text/plain"):
        for method, path in (("POST", f"/v0/topics/{topic}"), ("PUT", f"/v0/topics/{topic}"),
                             ("POST", f"/v0/topics/{topic}/diff"),
                             ("POST", f"/v0/topics/{topic}/delete"),
                             ("POST", f"/v0/topics/{topic}/claim"),
                             ("POST", f"/v0/topics/{topic}/ack")):
            status, doc = send(port, method, path, body, ctype=ctype)
            assert (status, code(doc)) == (415, "unsupported_media_type"), (ctype, method, doc)
            assert "application/json" in doc["error"]["message"]  # type: ignore[index]
    assert client.get(f"/v0/topics/{topic}").status == 404  # nothing was created
    for ctype in ("application/json", "application/json; charset=utf-8", "Application/JSON"):
        assert send(port, "POST", f"/v0/topics/{topic}", body, ctype=ctype)[0] == 200
    # no body, no Content-Type needed
    assert send(port, "DELETE", f"/v0/topics/{topic}", ctype=None)[0] == 200
    assert send(port, "PUT", f"/v0/topics/{topic}", ctype=None)[0] == 201
    # routing errors come first
    assert send(port, "POST", "/v0/nothing", body, ctype="text/plain")[0] == 404


def test_foreign_host_names_are_refused(client: Any, topic: str) -> None:
    port = client.port
    client.write(topic, 1)
    for host in ("evil.example", f"evil.example:{port}", "127.0.0.1.evil.example",
                 "localhost.evil.example:80", "", "user@127.0.0.1", "127.0.0.1:80, evil.example",
                 "[::2]", "0.0.0.0"):
        status, doc = send(port, "DELETE", f"/v0/topics/{topic}", host=host)
        assert (status, code(doc)) == (403, "forbidden"), (host, doc)
        assert doc["error"]["detail"] == {"reason": "host_not_allowed", "host": host}  # type: ignore[index]
        assert "--allowed-hosts" in doc["error"]["message"]  # type: ignore[index]
    assert client.get(f"/v0/topics/{topic}").json["count"] == 1
    for host in (f"127.0.0.1:{port}", "127.0.0.1", "localhost", f"LocalHost:{port}", "[::1]",
                 f"[::1]:{port}"):
        assert send(port, "GET", f"/v0/topics/{topic}", host=host)[0] == 200, host


def test_http_1_0_without_host_is_served(ready_server: Any) -> None:
    with socket.create_connection(("127.0.0.1", ready_server.http_port), timeout=10) as s:
        s.sendall(b"GET /v0/health HTTP/1.0\r\n\r\n")
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    assert data.startswith(b"HTTP/1.1 200")


def _ctx(tmp_path: Path, **kw: Any) -> Any:
    ctx = make_context(ServerConfig(data_dir=tmp_path, http_port=0, resp_port=None, **kw))
    ctx.ready = True
    return ctx


async def _status(ctx: Any, host: str, local: str | None = None) -> int:
    req = Request("GET", "/v0/health", "/v0/health", {}, {"host": host}, b"", local)
    resp = await app.dispatch(ctx, req)
    assert isinstance(resp, Response)
    return resp.status


async def test_bound_and_arrival_addresses_and_allowed_hosts(tmp_path: Path) -> None:
    wildcard = _ctx(tmp_path, bind="0.0.0.0")
    assert await _status(wildcard, "10.1.2.3:7070", local="10.1.2.3") == 200
    assert await _status(wildcard, "10.9.9.9:7070", local="10.1.2.3") == 403
    assert await _status(wildcard, "0.0.0.0:7070", local="10.1.2.3") == 403
    v6 = _ctx(tmp_path, bind="::")
    assert await _status(v6, "[fd00::5]:7070", local="fd00::5") == 200
    assert await _status(v6, "10.0.0.7", local="::ffff:10.0.0.7") == 200
    bound = _ctx(tmp_path, bind="10.1.2.3")
    assert await _status(bound, "10.1.2.3") == 200
    assert await _status(bound, "topics.internal") == 403
    named = _ctx(tmp_path, allowed_hosts=parse_allowed_hosts("Topics.Internal, fd00::1"))
    assert await _status(named, "topics.internal:443") == 200
    assert await _status(named, "[fd00::1]:7070") == 200
    assert await _status(named, "other.internal") == 403
    anyhost = _ctx(tmp_path, allowed_hosts=parse_allowed_hosts("*"))
    assert await _status(anyhost, "whatever.example") == 200


def test_allowed_hosts_flag(server_factory: Any) -> None:
    args = build_parser().parse_args(["serve", "--allowed-hosts", "a.example,*"])
    assert parse_allowed_hosts(args.allowed_hosts) == ("a.example", "*")
    srv = server_factory("--allowed-hosts", "topics.internal")
    assert send(srv.http_port, "GET", "/v0/health", host="topics.internal:8080")[0] == 200
    assert send(srv.http_port, "GET", "/v0/health", host="evil.example")[0] == 403


# ---- 15. JSON too deep for the encoder -------------------------------------------------


def test_deep_json_is_400_never_500(client: Any, topic: str) -> None:
    def nest(depth: int) -> str:
        return "[" * depth + "]" * depth

    ok = client.post(f"/v0/topics/{topic}", raw=f'{{"records": [{{"data": {nest(254)}}}]}}'.encode())
    assert ok.status == 200, ok
    for depth in (255, 256, 300, 600, 1019, 1023, 1024, 1100):
        for body in (f'{{"records": [{{"data": {nest(depth)}}}]}}',
                     f'{{"records": [{{"data": 1, "meta": {nest(depth)}}}]}}',
                     f'{{"records": [{{"data": 1}}], "config": {{"ttl_ms": {nest(depth)}}}}}',
                     nest(depth)):
            r = client.post(f"/v0/topics/{topic}", raw=body.encode())
            assert r.status == 400 and r.code in ("invalid_json", "invalid_request"), (depth, r)
        r = client.post(f"/v0/topics/{topic}/diff", raw=f'{{"node": {nest(depth)}}}'.encode())
        assert r.status == 400, (depth, r)
        r = client.post(f"/v0/topics/{topic}/delete", raw=f'{{"match": {nest(depth)}}}'.encode())
        assert r.status == 400, (depth, r)
    r = client.post(f"/v0/topics/{topic}", raw=f'{{"records": [{{"data": {nest(300)}}}]}}'.encode())
    assert r.code == "invalid_json" and r.json["error"]["detail"] == {"field": "records[0].data"}
    assert client.get(f"/v0/topics/{topic}").json["count"] == 1  # only the 254-deep one


# ---- 16. integers beyond 64 bits -------------------------------------------------------


def test_integers_beyond_64_bits_are_refused_not_rounded(client: Any, topic: str) -> None:
    for text, field in (("12345678901234567890123", "records[0].data"),
                        ("18446744073709551616", "records[0].data"),
                        ("-9223372036854775809", "records[0].data"),
                        ('{"a": [1, 99999999999999999999]}', "records[0].data.a[1]"),
                        ("9" * 40, "records[0].data")):
        r = client.post(f"/v0/topics/{topic}", raw=f'{{"records": [{{"data": {text}}}]}}'.encode())
        assert (r.status, r.code) == (400, "invalid_request"), (text, r)
        assert r.json["error"]["detail"] == {"field": field}
        assert "64-bit" in r.json["error"]["message"] and "string" in r.json["error"]["message"]
    r = client.post(f"/v0/topics/{topic}", raw=b'{"records": [{"data": 1}], '
                    b'"config": {"ttl_ms": 123456789012345678901234567890}}')
    assert r.status == 400
    assert client.get(f"/v0/topics/{topic}").status == 404  # nothing was written
    # the edges of the range, long digit strings and long fractions are stored exactly
    exact = (b'{"records": [{"data": [18446744073709551615, -9223372036854775808, '
             b'"12345678901234567890123", 0.12345678901234567890123]}]}')
    assert client.post(f"/v0/topics/{topic}", raw=exact).status == 200
    body = client.post(f"/v0/topics/{topic}/diff", {"from_seq": 0}).body
    assert b'"data":[18446744073709551615,-9223372036854775808,"12345678901234567890123",' in body
    assert json.loads(body)["records"][0]["data"][0] == 18446744073709551615
