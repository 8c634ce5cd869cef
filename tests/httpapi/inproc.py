"""An in-process server for HTTP tests that also need the RESP front, the queue and router
services and a FakeClock: both fronts run with trio in a background thread, the engine reads
the FakeClock, so lease deadlines, nack delays and ages move only when a test says.
The conftest's `srv` (one per module) and `c` (a client per test) fixtures are built on it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from conftest import run_in_thread
from topicsrv.clock import FakeClock
from topicsrv.context import ServerConfig, ServerContext

from .conftest import Client


@dataclass
class Srv:
    ctx: ServerContext
    clock: FakeClock
    http_port: int
    resp_port: int

    def client(self) -> Client:
        return Client(self.http_port)


def start_server(**config: Any) -> tuple[Srv, Any]:
    config.setdefault("heartbeat_s", 0.05)  # streams re-check often; a test may ask for 30 s
    cfg = ServerConfig(http_port=0, resp_port=0, storage=False, **config)
    clock = FakeClock()
    ctx, stop = run_in_thread(cfg, clock)
    return Srv(ctx, clock, ctx.addresses["http"][1], ctx.addresses["resp"][1]), stop
