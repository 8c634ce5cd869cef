"""Who may connect (topicsrv/admission.py): protected mode, maxclients, accept failures.

Protected mode is about non-loopback clients; these tests never leave the loopback range. An
in-process server is told that only 127.0.0.1 counts as local (`trusted_nets`), and a client
that binds 127.0.0.2 as its source address then plays the remote peer.
"""

from __future__ import annotations

import errno
import http.client
import json
import logging
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import trio
import trio.testing

from conftest import run_in_thread
from topicsrv.admission import DENIED_TEXT, Admission, is_loopback
from topicsrv.server import ServerConfig, ServerContext, _warn_exposed

REMOTE = "127.0.0.2"  # a loopback address the server is told to treat as remote


class Running:
    def __init__(self, ctx: ServerContext) -> None:
        self.ctx = ctx
        self.resp_port = ctx.addresses["resp"][1]
        self.http_port = ctx.addresses["http"][1]

    def resp(self, source: str = "127.0.0.1") -> socket.socket:
        s = socket.create_connection(("127.0.0.1", self.resp_port), timeout=5,
                                     source_address=(source, 0))
        return s

    def http(self, method: str, path: str, *, source: str = "127.0.0.1",
             headers: dict[str, str] | None = None, body: bytes | None = None
             ) -> tuple[int, Any]:
        conn = http.client.HTTPConnection("127.0.0.1", self.http_port, timeout=5,
                                          source_address=(source, 0))
        try:
            conn.request(method, path, body=body, headers=headers or {})
            resp = conn.getresponse()
            data = resp.read()
            return resp.status, json.loads(data) if data else None
        finally:
            conn.close()


def start(**cfg: Any) -> tuple[Running, Any]:
    ctx, stop = run_in_thread(ServerConfig(http_port=0, resp_port=0, storage=False, **cfg))
    return Running(ctx), stop


@pytest.fixture
def server_with(request: pytest.FixtureRequest) -> Iterator[Any]:
    stops: list[Any] = []

    def make(**cfg: Any) -> Running:
        srv, stop = start(**cfg)
        stops.append(stop)
        return srv

    yield make
    for stop in stops:
        stop()


def read_all(s: socket.socket) -> bytes:
    out = b""
    while True:
        try:
            chunk = s.recv(65536)
        except ConnectionResetError:
            break
        if not chunk:
            break
        out += chunk
    return out


def roundtrip(s: socket.socket, data: bytes) -> bytes:
    s.sendall(data)
    return s.recv(65536)


# ---- protected mode ----------------------------------------------------------------------


def test_loopback_addresses() -> None:
    assert is_loopback("127.0.0.1") and is_loopback("127.9.9.9") and is_loopback("::1")
    assert is_loopback("::ffff:127.0.0.1")
    assert not is_loopback("10.0.0.5") and not is_loopback("192.168.1.2")
    assert not is_loopback("::ffff:10.0.0.5") and not is_loopback("2001:db8::1")
    assert not is_loopback(REMOTE, ("127.0.0.1/32",)) and is_loopback("127.0.0.1", ("127.0.0.1/32",))


@pytest.mark.parametrize("resp_io", ["reactor", "tasks"])
def test_protected_mode_denies_remote_resp_clients_without_a_password(server_with: Any,
                                                                      resp_io: str) -> None:
    srv = server_with(trusted_nets=("127.0.0.1/32",), resp_io=resp_io)
    local = srv.resp()
    assert roundtrip(local, b"XADD keep * f v\r\n").startswith(b"$")
    remote = srv.resp(source=REMOTE)
    remote.sendall(b"FLUSHALL\r\nDEL keep\r\n")  # a remote client's commands never run
    answer = read_all(remote)
    assert answer == b"-" + DENIED_TEXT.encode() + b"\r\n"
    assert roundtrip(local, b"EXISTS keep\r\n") == b":1\r\n"
    assert srv.ctx.admission.rejected_denied == 1


def test_protected_mode_denies_remote_http_clients_without_a_token(server_with: Any) -> None:
    srv = server_with(trusted_nets=("127.0.0.1/32",))
    status, body = srv.http("DELETE", "/v0/topics/x", source=REMOTE)
    assert status == 403 and body["error"]["code"] == "denied"
    assert "--token" in body["error"]["message"]
    assert srv.http("GET", "/v0/health")[0] == 200


def test_a_credential_opens_its_front_to_remote_clients(server_with: Any) -> None:
    srv = server_with(trusted_nets=("127.0.0.1/32",), requirepass="pw", token="tk")
    remote = srv.resp(source=REMOTE)
    assert roundtrip(remote, b"PING\r\n").startswith(b"-NOAUTH")
    assert roundtrip(remote, b"AUTH pw\r\nPING\r\n").startswith(b"+OK\r\n")
    assert srv.http("GET", "/v0/topics", source=REMOTE)[0] == 401
    status, _ = srv.http("GET", "/v0/topics", source=REMOTE,
                         headers={"Authorization": "Bearer tk"})
    assert status == 200


def test_protected_mode_is_per_front(server_with: Any) -> None:
    srv = server_with(trusted_nets=("127.0.0.1/32",), token="tk")  # HTTP has a token, RESP not
    assert read_all(srv.resp(source=REMOTE)).startswith(b"-DENIED")
    status, _ = srv.http("GET", "/v0/topics", source=REMOTE, headers={"Authorization": "Bearer tk"})
    assert status == 200


def test_protected_mode_no_serves_everyone(server_with: Any) -> None:
    srv = server_with(trusted_nets=("127.0.0.1/32",), protected_mode=False)
    assert roundtrip(srv.resp(source=REMOTE), b"PING\r\n") == b"+PONG\r\n"
    assert srv.http("GET", "/v0/topics", source=REMOTE)[0] == 200


def test_startup_warns_about_what_protected_mode_refuses(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, "topicsrv")
    _warn_exposed(ServerConfig(bind="0.0.0.0", token="t"))
    text = caplog.text
    assert "RESP binds 0.0.0.0 but has no --requirepass" in text and "HTTP" not in text
    caplog.clear()
    _warn_exposed(ServerConfig(bind="0.0.0.0", protected_mode=False))
    assert "protected mode is off" in caplog.text
    caplog.clear()
    _warn_exposed(ServerConfig(bind="127.0.0.1"))
    assert caplog.text == ""


# ---- maxclients --------------------------------------------------------------------------


@pytest.mark.parametrize("resp_io", ["reactor", "tasks"])
def test_maxclients_refuses_in_words_and_frees_the_slot_on_close(server_with: Any,
                                                                  resp_io: str) -> None:
    srv = server_with(maxclients=3, resp_io=resp_io)
    held = [srv.resp() for _ in range(3)]
    for s in held:
        assert roundtrip(s, b"PING\r\n") == b"+PONG\r\n"
    extra = srv.resp()
    assert read_all(extra) == b"-ERR max number of clients reached\r\n"
    status, body = srv.http("GET", "/v0/health")  # one limit over both fronts
    assert status == 503 and body["error"]["code"] == "too_many_clients"
    held.pop().close()
    for _ in range(100):  # the server notices the close on its own schedule
        s = srv.resp()
        s.sendall(b"PING\r\n")
        reply = s.recv(100)
        if reply == b"+PONG\r\n":
            break
        s.close()
        trio_sleep_ms(20)
    else:
        pytest.fail("a freed slot was never reused")
    assert srv.ctx.admission.rejected_maxclients >= 2
    info = roundtrip(held[0], b"INFO clients\r\n")
    assert b"maxclients:3" in info


def trio_sleep_ms(ms: int) -> None:
    threading.Event().wait(ms / 1000)


def test_maxclients_is_sized_to_the_open_file_limit() -> None:
    code = (
        "import resource, logging, sys\n"
        "logging.basicConfig(stream=sys.stdout, level=logging.WARNING, format='%(message)s')\n"
        "resource.setrlimit(resource.RLIMIT_NOFILE, (300, 300))\n"
        "from topicsrv.admission import size_maxclients, RESERVED_FDS\n"
        "print('got', size_maxclients(10000), 300 - RESERVED_FDS)\n"
        "print('small', size_maxclients(50))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         timeout=60).stdout
    got = next(line for line in out.splitlines() if line.startswith("got")).split()
    assert got[1] == got[2]
    assert "maxclients 10000 needs 10128 file descriptors but the limit is 300" in out
    assert "small 50" in out


class _FailingListener(trio.abc.Listener[trio.SocketStream]):
    """accept() fails with EMFILE, like a process at its open-file limit."""

    def __init__(self) -> None:
        self.calls = 0

    async def accept(self) -> trio.SocketStream:
        self.calls += 1
        await trio.lowlevel.checkpoint()
        raise OSError(errno.EMFILE, "Too many open files")

    async def aclose(self) -> None:
        await trio.lowlevel.checkpoint()


async def test_accept_failures_are_logged_once_per_interval_without_a_traceback(
        caplog: pytest.LogCaptureFixture, autojump_clock: trio.testing.MockClock) -> None:
    caplog.set_level(logging.INFO, "topicsrv")
    gate = Admission(10)
    listener = _FailingListener()

    async def never(stream: trio.SocketStream) -> None:
        raise AssertionError("no stream is ever accepted")

    with trio.move_on_after(25):  # virtual seconds: the mock clock jumps through the backoffs
        await gate.serve([listener], never, name="RESP", has_credential=lambda: False,
                         refuse=lambda reason: b"")  # type: ignore[list-item]
    records = [r for r in caplog.records if "accept failed" in r.getMessage()]
    assert len(records) == 3  # at 0 s, 10 s and 20 s
    assert all(r.exc_info is None for r in records)
    assert "EMFILE" in records[0].getMessage()
    assert listener.calls >= 200  # it kept trying every 0.1 s
    assert gate.accept_errors == listener.calls
