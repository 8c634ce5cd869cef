"""Error codes of API.md section 0 and hostile input, over real sockets to a real server.

After every bad request the server must still answer, and no partial write may exist.
"""

from __future__ import annotations

import http.client
import json
import socket
import time
from typing import Any

import pytest

from tests.httpapi.conftest import metric, wait_until


def assert_error_shape(r: Any, status: int, code: str) -> None:
    assert r.status == status, r
    err = r.json["error"]
    assert err["code"] == code and isinstance(err["message"], str) and err["message"]
    assert set(err) <= {"code", "message", "detail"}
    assert b"Traceback" not in r.body


def test_invalid_json(client: Any, topic: str) -> None:
    for raw in (b"{not json", b'{"records": [', b"\xff\xfe", b'{"a":1}{"b":2}', b"[1,2"):
        r = client.post(f"/v0/topics/{topic}", raw=raw)
        assert_error_shape(r, 400, "invalid_json")
    assert client.get(f"/v0/topics/{topic}").status == 404


def test_body_must_be_an_object(client: Any, topic: str) -> None:
    for body in ([1], "x", 5, None):
        r = client.post(f"/v0/topics/{topic}/diff", raw=json.dumps(body).encode())
        assert_error_shape(r, 400, "invalid_request")


def test_invalid_topic_name(client: Any) -> None:
    for name in ("-leading-dash", "sp%20ace", "a" * 256, "bad!name", "%C3%A9"):
        r = client.put(f"/v0/topics/{name}", {})
        assert_error_shape(r, 400, "invalid_topic_name")
        r = client.post(f"/v0/topics/{name}", {"records": [{"data": 1}]})
        assert_error_shape(r, 400, "invalid_topic_name")


def test_not_found_and_method_not_allowed(client: Any, topic: str) -> None:
    for path in ("/v0", "/v0/nope", "/v0/topics/a/b/c", "/v1/topics"):  # "/" is the status page
        assert_error_shape(client.get(path), 404, "not_found")
    r = client.request("PATCH", f"/v0/topics/{topic}")
    assert_error_shape(r, 405, "method_not_allowed")
    assert r.headers["allow"] == "DELETE, GET, POST, PUT"
    r = client.get(f"/v0/topics/{topic}/diff")
    assert_error_shape(r, 405, "method_not_allowed")
    assert r.headers["allow"] == "POST"
    r = client.post("/v0/health")
    assert r.status == 405 and r.headers["allow"] == "GET"


def test_router_and_queue_routes_exist(client: Any, topic: str) -> None:
    # routers (tests/httpapi/test_http_routers.py): a missing router is router_not_found
    for method in ("GET", "DELETE"):
        assert_error_shape(client.request(method, f"/v0/routers/{topic}"), 404, "router_not_found")
    assert client.get("/v0/routers").status == 200
    # queue routes exist (tests/httpapi/test_http_queues.py): a missing queue is topic_not_found
    for method, path in (("POST", f"/v0/topics/{topic}/claim"), ("POST", f"/v0/topics/{topic}/ack"),
                         ("GET", f"/v0/work?topics={topic}&node=w")):
        body = {"node": "w", "seqs": [1]} if path.endswith("/ack") else {"node": "w"}
        r = client.request(method, path, body=body if method != "GET" else None)
        assert_error_shape(r, 404, "topic_not_found")


def test_topic_not_found_everywhere(client: Any) -> None:
    name = "missing-topic-for-404"
    for method, path, body in (("GET", f"/v0/topics/{name}", None),
                               ("DELETE", f"/v0/topics/{name}", None),
                               ("POST", f"/v0/topics/{name}/diff", {"from_seq": 0}),
                               ("POST", f"/v0/topics/{name}/delete", {"before_seq": 3}),
                               ("GET", f"/v0/topics/{name}/watch", None),
                               ("GET", f"/v0/watch?topics={name}", None)):
        r = client.request(method, path, body=body)
        assert_error_shape(r, 404, "topic_not_found")


def test_negative_and_huge_numbers(client: Any, topic: str) -> None:
    client.write(topic, 1)
    for body in ({"from_seq": -1}, {"from_seq": 10**30}, {"limit": -3}, {"limit": 10**12},
                 {"max_bytes": -1}, {"wait_ms": True}, {"from_seq": 1e3}):
        r = client.post(f"/v0/topics/{topic}/diff", body)
        assert r.status == 400 and r.code in ("invalid_request", "invalid_json"), (body, r)
    for body in ({"cap_records": -1}, {"ttl_ms": 10**40}, {"seq_base": -2}):
        r = client.put(f"/v0/topics/{topic}", body)
        assert r.status == 400, (body, r)
    r = client.post(f"/v0/topics/{topic}/delete", {"before_seq": -4})
    assert_error_shape(r, 400, "invalid_request")
    assert client.get(f"/v0/topics/{topic}").json["count"] == 1


def _status_line(data: bytes) -> int:
    return int(data.split(b" ", 2)[1])


def test_body_too_large_refused_from_content_length(server: Any, client: Any, topic: str) -> None:
    with socket.create_connection(("127.0.0.1", server.http_port), timeout=10) as s:
        s.sendall(f"POST /v0/topics/{topic} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json"
                  f"\r\nContent-Length: {(64 << 20) + 1}\r\n\r\n".encode())
        s.sendall(b'{"records":[')  # the server answers without waiting for the 64 MiB
        data = s.recv(65536)
    assert _status_line(data) == 413
    body = json.loads(data.split(b"\r\n\r\n", 1)[1])
    assert body["error"]["code"] == "body_too_large"
    assert client.get(f"/v0/topics/{topic}").status == 404
    assert client.get("/v0/health").status == 200


def test_body_too_large_refused_while_streaming_chunked(server: Any, client: Any,
                                                        topic: str) -> None:
    chunk = b"x" * (1 << 20)
    refused = b""
    with socket.create_connection(("127.0.0.1", server.http_port), timeout=10) as s:
        s.sendall(f"POST /v0/topics/{topic} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                  f"Transfer-Encoding: chunked\r\n\r\n".encode())
        s.settimeout(0.01)
        try:
            for _ in range(80):
                s.sendall(b"%x\r\n%b\r\n" % (len(chunk), chunk))
                try:
                    refused += s.recv(65536)
                except TimeoutError:
                    continue
                if refused:
                    break
        except (BrokenPipeError, ConnectionResetError, TimeoutError):
            pass  # (a send that times out: the server stopped reading; its answer follows)
        s.settimeout(5)
        try:
            while b"\r\n\r\n" not in refused:
                more = s.recv(65536)
                if not more:
                    break
                refused += more
        except (TimeoutError, ConnectionResetError):
            pass
    assert refused, "no answer to an over-limit chunked body"
    assert _status_line(refused) == 413 and b"body_too_large" in refused
    assert client.get(f"/v0/topics/{topic}").status == 404


def test_client_disconnects_mid_body(server: Any, client: Any, topic: str) -> None:
    client.put(f"/v0/topics/{topic}", {})
    base = metric(client, "topicsrv_http_connections")
    body = json.dumps({"records": [{"data": i} for i in range(1000)]}).encode()
    with socket.create_connection(("127.0.0.1", server.http_port), timeout=10) as s:
        s.sendall(f"POST /v0/topics/{topic} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                  f"Content-Length: {len(body)}\r\n\r\n".encode() + body[: len(body) // 2])
        wait_until(lambda: metric(client, "topicsrv_http_connections") == base + 1)
    wait_until(lambda: metric(client, "topicsrv_http_connections") == base)  # it saw the close
    assert client.get("/v0/health").status == 200
    state = client.get(f"/v0/topics/{topic}").json
    assert state["head_seq"] == 0 and state["count"] == 0


def test_malformed_http_is_400_and_server_survives(raw: Any, client: Any) -> None:
    out = raw(b"GARBAGE\r\n\r\n")
    assert _status_line(out) == 400 and b"invalid_request" in out
    out = raw(b"GET /v0/health HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: nope\r\n\r\n")
    assert _status_line(out) == 400
    out = raw(b"GET /v0/health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + b"a" * 600_000 + b"\r\n\r\n")
    assert _status_line(out) == 400
    assert client.get("/v0/health").status == 200


def test_keep_alive_and_pipelining_answer_in_order(server: Any, client: Any, topic: str) -> None:
    body = json.dumps({"records": [{"data": "p"}]}).encode()
    reqs = (
        f"POST /v0/topics/{topic} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        .encode() + body
        + f"GET /v0/topics/{topic}?touch=false HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode()
        + b"GET /v0/nothing-here HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    with socket.create_connection(("127.0.0.1", server.http_port), timeout=10) as s:
        s.sendall(reqs)  # three requests in one send
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    parts = data.split(b"HTTP/1.1 ")[1:]
    assert [int(p[:3]) for p in parts] == [200, 200, 404]
    assert b'"seqs":[1]' in parts[0]
    assert b'"head_seq":1' in parts[1]
    # the same keep-alive connection serves many requests
    for _ in range(5):
        assert client.get("/v0/health").status == 200


def test_expect_100_continue(server: Any, topic: str) -> None:
    body = json.dumps({"records": [{"data": 1}]}).encode()
    with socket.create_connection(("127.0.0.1", server.http_port), timeout=10) as s:
        s.sendall(f"POST /v0/topics/{topic} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nExpect: 100-continue\r\n"
                  f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode())
        interim = s.recv(65536)
        assert interim.startswith(b"HTTP/1.1 100")
        s.sendall(body)
        rest = b""
        while chunk := s.recv(65536):
            rest += chunk
    assert rest.startswith(b"HTTP/1.1 200")


@pytest.fixture(scope="module")
def token_server(tmp_path_factory: Any) -> Any:
    from conftest import ServerProcess  # the repository's root conftest

    srv = ServerProcess(tmp_path_factory.mktemp("tok") / "data", "--token", "s3cret").start()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # /v0/ready needs the token too
        conn = http.client.HTTPConnection("127.0.0.1", srv.http_port, timeout=5)
        conn.request("GET", "/v0/ready", headers={"Authorization": "Bearer s3cret"})
        if conn.getresponse().status == 200:
            break
        time.sleep(0.05)
    yield srv
    srv.stop()


def test_unauthorized_without_or_with_wrong_token(token_server: Any, connect: Any) -> None:
    anon = connect(port=token_server.http_port)
    for path in ("/v0/health", "/v0/topics", "/metrics", "/v0/topics/x/watch"):
        r = anon.get(path)
        assert_error_shape(r, 401, "unauthorized")
        assert r.headers["www-authenticate"].startswith("Bearer")
    wrong = connect(token="nope", port=token_server.http_port)
    assert_error_shape(wrong.post("/v0/topics/x", {"records": [{"data": 1}]}), 401,
                       "unauthorized")
    good = connect(token="s3cret", port=token_server.http_port)
    assert good.post("/v0/topics/x", {"records": [{"data": 1}]}).status == 200
    assert good.get("/v0/topics/x").json["head_seq"] == 1
    assert good.get("/metrics").status == 200
