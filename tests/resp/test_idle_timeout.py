"""The idle-client rule of `CONFIG SET timeout` (topicsrv/resp/server.py Rule 5) on explicit
clocks: who is idle, who is not (blocked, replies unsent, already killed), and 0 = never. The
sweep on real sockets is compat/test_server.py::test_idle_clients_are_closed_after_timeout."""

from __future__ import annotations

from topicsrv.resp.commands.base import Client
from topicsrv.resp.server import idle_clients


def _client(cid: int, last: float, **state: object) -> Client:
    c = Client(id=cid, last_interaction=last)
    for name, value in state.items():
        setattr(c, name, value)
    return c


def test_only_clients_idle_past_the_timeout_are_chosen() -> None:
    now = 1000.0
    fresh = _client(1, now - 5)
    exactly = _client(2, now - 10)  # Redis: idle > timeout, not >=
    idle = _client(3, now - 10.5)
    blocked = _client(4, now - 60, blocked=True)  # inside XREAD BLOCK: its own timeout rules
    writing = _client(5, now - 60, out_pending=4096)  # a reply still going out
    killed = _client(6, now - 60, killed=True)
    clients = [fresh, exactly, idle, blocked, writing, killed]
    assert idle_clients(clients, now, 10) == [idle]
    assert idle_clients(clients, now, 0) == []  # the default: never
    assert idle_clients(clients, now + 1000, 10) == [fresh, exactly, idle]
