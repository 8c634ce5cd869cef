"""An in-process server for HTTP tests that also need the RESP front, the queue and router
services and a FakeClock: both fronts run with trio in a background thread, the engine reads
the FakeClock, so lease deadlines, nack delays and ages move only when a test says.
The conftest's `srv` (one per module) and `c` (a client per test) fixtures are built on it."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from functools import partial
from typing import Any

import trio

from topicsrv import server
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
    box: dict[str, Any] = {}
    ready = threading.Event()

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            box["cancel"] = nursery.cancel_scope
            box["token"] = trio.lowlevel.current_trio_token()
            box["ctx"] = await nursery.start(partial(server.run, cfg, clock=clock,
                                                     handle_signals=False))
            ready.set()

    thread = threading.Thread(target=trio.run, args=(main,), daemon=True)
    thread.start()
    assert ready.wait(10)
    ctx: ServerContext = box["ctx"]

    def stop() -> None:
        trio.from_thread.run_sync(box["cancel"].cancel, trio_token=box["token"])
        thread.join(10)

    return Srv(ctx, clock, ctx.addresses["http"][1], ctx.addresses["resp"][1]), stop
