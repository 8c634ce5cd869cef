"""An in-process RESP server (trio in a background thread) for fast socket-level tests.

`start_inproc(clock=FakeClock(), http=True)` gives the engine a fake clock and also serves
the HTTP front on the same context (both fronts over one engine, as `topicsrv serve`); the
claims service (cohorts, long polls, the dead-letter mover) and the routers service (the
forwarding workers) always run, as in server.run.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import trio

from topicsrv.clock import Clock, FakeClock
from topicsrv.context import ServerConfig, ServerContext, make_context
from topicsrv.http.server import serve_http
from topicsrv.resp.server import serve_resp


@dataclass
class InProc:
    ctx: ServerContext
    port: int
    http_port: int | None = None

    def connect(self, timeout: float = 5.0) -> socket.socket:
        s = socket.create_connection(("127.0.0.1", self.port), timeout=timeout)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return s


RESP_IO = ["reactor", "tasks"]  # both I/O paths of the RESP front run the socket tests


def start_inproc(clock: Clock | None = None, http: bool = False, **config: Any) -> tuple[InProc, Any]:
    config.setdefault("resp_io", os.environ.get("TOPICS_RESP_IO", "reactor"))
    cfg = ServerConfig(http_port=0 if http else None, resp_port=0, storage=False, **config)
    ctx = make_context(cfg, clock)
    ready = threading.Event()
    box: dict[str, Any] = {}

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            box["cancel"] = nursery.cancel_scope
            box["token"] = trio.lowlevel.current_trio_token()
            await nursery.start(ctx.claims_service().run)
            await nursery.start(ctx.routers_service().run)
            nursery.start_soon(ctx.lazyfree.run)  # as topicsrv/server.py
            _, port = await nursery.start(serve_resp, ctx)
            box["port"] = port
            if http:
                _, box["http_port"] = await nursery.start(serve_http, ctx)
            ready.set()

    thread = threading.Thread(target=trio.run, args=(main,), daemon=True)
    thread.start()
    assert ready.wait(10)

    def stop() -> None:
        trio.from_thread.run_sync(box["cancel"].cancel, trio_token=box["token"])
        thread.join(10)

    return InProc(ctx, box["port"], box.get("http_port")), stop


@pytest.fixture(params=RESP_IO)
def inproc(request: pytest.FixtureRequest) -> Iterator[InProc]:
    srv, stop = start_inproc(resp_io=request.param)
    yield srv
    stop()


@pytest.fixture(params=RESP_IO)
def srv(request: pytest.FixtureRequest) -> Iterator[tuple[InProc, FakeClock]]:
    """Both fronts in-process, the engine on a FakeClock, once per RESP I/O path (modules
    that need another server define their own `srv`)."""
    clock = FakeClock()
    s, stop = start_inproc(clock=clock, http=True, resp_io=request.param)
    yield s, clock
    stop()


def frame(*args: bytes) -> bytes:
    return b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%b\r\n" % (len(a), a) for a in args)


def read_until(sock: socket.socket, want: bytes, timeout: float = 5.0) -> bytes:
    deadline = time.monotonic() + timeout
    buf = b""
    while want not in buf:
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        chunk = sock.recv(65536)
        if not chunk:
            break
        buf += chunk
    return buf


def wait_for(pred: Callable[[], bool], timeout: float = 5.0) -> None:
    """Poll `pred` until it holds (the server works in another thread); fail after `timeout`."""
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(0.01)


def info_field(srv: InProc, name: str) -> int:
    """One `INFO clients` field, read over a fresh connection."""
    w = srv.connect()
    try:
        w.sendall(frame(b"INFO", b"clients"))
        text = read_until(w, b"\r\n\r\n").decode()
    finally:
        w.close()
    line = next(x for x in text.splitlines() if x.startswith(name + ":"))
    return int(line.split(":")[1])


def read_to_eof(sock: socket.socket, timeout: float = 5.0) -> bytes:
    deadline = time.monotonic() + timeout
    buf = b""
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the server did not close the connection")
        sock.settimeout(left)
        chunk = sock.recv(65536)
        if not chunk:
            return buf
        buf += chunk
