"""HTTP test helpers: a tiny JSON client and an SSE reader over the standard library only."""

from __future__ import annotations

import base64
import http.client
import json
import re
import socket
import time
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

if TYPE_CHECKING:
    from .inproc import Srv


class Reply:
    def __init__(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.status = status
        self.headers = headers
        self.body = body

    @property
    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def code(self) -> str | None:
        try:
            return self.json["error"]["code"]  # type: ignore[no-any-return]
        except (ValueError, KeyError, TypeError):
            return None

    def __repr__(self) -> str:
        return f"Reply({self.status}, {self.body[:300]!r})"


class Client:
    """One keep-alive connection to the server."""

    def __init__(self, port: int, token: str | None = None, timeout: float = 30.0) -> None:
        self.port = port
        self.token = token
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)

    def request(self, method: str, path: str, body: Any = None, *, raw: bytes | None = None,
                headers: dict[str, str] | None = None) -> Reply:
        hdrs = dict(headers or {})
        if self.token is not None:
            hdrs.setdefault("Authorization", f"Bearer {self.token}")
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        if data is not None:
            hdrs.setdefault("Content-Type", "application/json")
        self.conn.request(method, path, body=data, headers=hdrs)
        resp = self.conn.getresponse()
        out = resp.read()
        return Reply(resp.status, {k.lower(): v for k, v in resp.getheaders()}, out)

    def get(self, path: str, **kw: Any) -> Reply:
        return self.request("GET", path, **kw)

    def put(self, path: str, body: Any = None, **kw: Any) -> Reply:
        return self.request("PUT", path, body, **kw)

    def post(self, path: str, body: Any = None, **kw: Any) -> Reply:
        return self.request("POST", path, body, **kw)

    def delete(self, path: str, **kw: Any) -> Reply:
        return self.request("DELETE", path, **kw)

    def write(self, topic: str, *datas: Any, **extra: Any) -> Reply:
        r = self.post(f"/v0/topics/{topic}", {"records": [{"data": d} for d in datas], **extra})
        assert r.status == 200, r
        return r

    def diff(self, topic: str, from_seq: int = 0, **extra: Any) -> dict[str, Any]:
        r = self.post(f"/v0/topics/{topic}/diff", {"from_seq": from_seq, **extra})
        assert r.status == 200, r
        return r.json  # type: ignore[no-any-return]

    def close(self) -> None:
        self.conn.close()


class SSE:
    """A raw SSE subscription: `next_event()` returns dict(id, event, data) or {"comment"}."""

    def __init__(self, port: int, path: str, headers: dict[str, str] | None = None,
                 timeout: float = 10.0) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
        self.conn.request("GET", path, headers=headers or {})
        self.resp = self.conn.getresponse()
        self.status = self.resp.status

    def next_event(self) -> dict[str, Any]:
        ev: dict[str, Any] = {}
        while True:
            line = self.resp.readline()
            if not line:
                raise EOFError("stream ended")
            text = line.decode().rstrip("\n")
            if text == "":
                if ev:
                    return ev
                continue
            if text.startswith(":"):
                ev.setdefault("comment", text[1:].strip())
                continue
            key, _, value = text.partition(": ")
            ev[key] = json.loads(value) if key == "data" else value
            if key == "id":
                ev["cursor"] = decode_cursor(value)

    def frames(self, n: int) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        while len(out) < n:
            ev = self.next_event()
            if "event" in ev:
                out.append(ev)
        return out

    def close(self) -> None:
        sock = self.conn.sock
        if sock is not None:
            sock.shutdown(socket.SHUT_RDWR)
        self.conn.close()


def metric(client: Client, name: str, labels: str = "") -> float | None:
    """One sample of GET /metrics, parsed by prometheus_client (`labels` as in the exposition,
    in any order, e.g. '{topic="t",state="ready"}')."""
    want = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', labels))
    text = client.get("/metrics").body.decode()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and sample.labels == want:
                return float(sample.value)
    return None


def wait_until(check: Any, timeout: float = 10.0) -> None:
    """Poll `check()` until it holds (tests wait on a condition, never on a fixed sleep)."""
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.005)


def decode_cursor(value: str) -> dict[str, int]:
    return json.loads(base64.urlsafe_b64decode(value + "=" * (-len(value) % 4)))  # type: ignore[no-any-return]


def raw_exchange(port: int, data: bytes, timeout: float = 10.0, until_close: bool = True) -> bytes:
    """Send raw bytes; read until the server closes (or the timeout)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(data)
        chunks = []
        try:
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                chunks.append(chunk)
                if not until_close:
                    break
        except TimeoutError:
            pass
        return b"".join(chunks)


@pytest.fixture
def ready_server(server: Any) -> Any:
    """The shared server, once it has finished recovery (/v0/ready is 200)."""
    server.wait_ready()
    return server


@pytest.fixture
def client(ready_server: Any) -> Iterator[Client]:
    c = Client(ready_server.http_port)
    yield c
    c.close()


@pytest.fixture
def topic() -> str:
    return "t-" + uuid.uuid4().hex[:12]


@pytest.fixture
def connect(ready_server: Any) -> Iterator[Any]:
    """`connect(token=None)` opens another keep-alive client to the shared server."""
    made: list[Client] = []

    def make(token: str | None = None, port: int | None = None) -> Client:
        c = Client(port or ready_server.http_port, token)
        made.append(c)
        return c

    yield make
    for c in made:
        c.close()


@pytest.fixture
def watch(ready_server: Any) -> Iterator[Any]:
    """`watch(path, headers=None, port=None)` opens an SSE stream (closed at teardown)."""
    yield from sse_opener(ready_server.http_port)


def sse_opener(default_port: int) -> Iterator[Any]:
    """The body of an SSE-opening fixture: yields `make(path, headers=None, port=None)`, then
    closes every stream it opened."""
    made: list[SSE] = []

    def make(path: str, headers: dict[str, str] | None = None, port: int | None = None) -> SSE:
        s = SSE(port or default_port, path, headers)
        made.append(s)
        return s

    yield make
    for s in made:
        try:
            s.close()
        except OSError:
            pass


@pytest.fixture
def raw(ready_server: Any) -> Any:
    """`raw(bytes)` sends raw bytes to the shared server and returns everything it answers."""
    return lambda data, **kw: raw_exchange(ready_server.http_port, data, **kw)


@pytest.fixture(scope="module")
def srv() -> Iterator[Srv]:
    """An in-process server with both fronts and a FakeClock (inproc.py), one per module."""
    from .inproc import start_server  # inproc imports this module's Client
    s, stop = start_server()
    yield s
    stop()


@pytest.fixture
def c(srv: Srv) -> Iterator[Client]:
    client = srv.client()
    yield client
    client.close()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Give each schemathesis item (test_openapi_fuzz.py, one per API operation) a node id of
    its own. schemathesis 4 names them `test...[GET /v0/...]` but leaves every one the
    function's bare node id under pytest 9, and pytest-xdist keys its work by node id: with
    `-n 2` (make test) 27 of the 28 operations were dropped without a word."""
    from _pytest import nodes  # the node id's own type, private since pytest 9

    for item in items:
        label = getattr(item, "operation_label", None)
        if isinstance(label, str) and not item.nodeid.endswith("]"):
            nodeid = f"{item.nodeid}[{label}]"
            coerce = getattr(nodes, "coerce_node_id", None)
            if coerce is not None:
                item._id = coerce(nodeid)  # type: ignore[attr-defined]
            else:  # pytest 8
                item._nodeid = nodeid
