"""Keyspace notifications of the keyspace (bus/keyspace.py, resp/commands/keyevents_strings.py):
`expired` from the active expiry cycle on a fake clock, lazy `expired` before a command's own
events, HTTP writes and deletes of topics, RESP and HTTP on one bus. The event sequence of a
string/key script against redis-server is compat/test_keyspace_events.py."""

from __future__ import annotations

import json
import urllib.request

import trio
import trio.testing

from tests.resp.conftest import InProc, frame, read_until
from topicsrv.bus import Message, Subscriber
from topicsrv.bus.keyspace import parse_flags
from topicsrv.clock import FakeClock
from topicsrv.context import ServerConfig, make_context
from topicsrv.engine.keyspace import strings as ops
from topicsrv.tasks.expiry import expire_keys


class Box(Subscriber):
    """A bus subscriber that records (channel, payload) and never fills up."""

    def __init__(self) -> None:
        super().__init__()
        self.got: list[tuple[bytes, bytes]] = []

    def encode(self, msg: Message, pattern: bytes | None) -> bytes:
        self.got.append((msg.channel, msg.payload))
        return b""

    def pending(self) -> int:
        return 0

    def enqueue(self, data: bytes) -> None:
        pass

    def cut(self, reason: str) -> None:
        raise AssertionError(reason)


def test_expired_from_the_active_cycle_on_a_fake_clock() -> None:
    clock = FakeClock()
    ctx = make_context(ServerConfig(http_port=None, resp_port=None, storage=False), clock)
    box = Box()
    ctx.bus.psubscribe(box, b"__key*__:*")
    ctx.bus.keyspace.flags = parse_flags("KEA")
    ks = ctx.engine.keyspace
    now = clock.now_ms()
    ops.put(ks, [("late", b"1")], now + 2000)
    ops.put(ks, [("early", b"1")], now + 1000)
    ops.put(ks, [("keep", b"1")], 0)
    box.got.clear()

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(expire_keys, ctx.engine)
            await trio.sleep(1)  # ten ticks: nothing is due yet
            assert box.got == []
            clock.advance(1000)
            await trio.sleep(0.2)
            assert box.got == [(b"__keyspace@0__:early", b"expired"),
                               (b"__keyevent@0__:expired", b"early")]
            clock.advance(1000)
            await trio.sleep(0.2)
            nursery.cancel_scope.cancel()

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    assert [p for _, p in box.got] == [b"expired", b"early", b"expired", b"late"]
    assert sorted(ks.strings) == ["keep"]  # no lookup ran: the cycle alone removed them
    assert ks.stats["expired_keys"] == 2


def test_no_event_when_off_and_expired_before_the_command(srv: tuple[InProc, FakeClock]) -> None:
    s, clock = srv
    box = Box()
    s.ctx.bus.psubscribe(box, b"__key*__:*")
    c = s.connect()
    c.sendall(frame(b"SET", b"a", b"1", b"PX", b"500") + frame(b"INCR", b"n")
              + frame(b"DEL", b"n"))
    assert read_until(c, b":1\r\n:1\r\n") == b"+OK\r\n:1\r\n:1\r\n"
    assert box.got == []  # off by default
    c.sendall(frame(b"CONFIG", b"SET", b"notify-keyspace-events", b"KEA$n"))
    assert read_until(c, b"+OK\r\n") == b"+OK\r\n"
    clock.advance(501)
    c.sendall(frame(b"SET", b"a", b"2", b"XX") + frame(b"SET", b"a", b"3", b"NX"))
    assert read_until(c, b"+OK\r\n") == b"$-1\r\n+OK\r\n"
    assert [(ch.rpartition(b":")[2], p) for ch, p in box.got if ch.startswith(b"__keyspace")] \
        == [(b"a", b"expired"), (b"a", b"new"), (b"a", b"set")]


def _http(port: int, method: str, path: str, body: dict | None = None) -> dict:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, method=method,
                                 headers={"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=5) as resp:
        out: dict = json.loads(resp.read())
        return out


def test_http_writes_and_deletes_fire_xadd_new_del(srv: tuple[InProc, FakeClock]) -> None:
    s, _ = srv
    assert s.http_port
    sub = s.connect()
    sub.sendall(frame(b"PSUBSCRIBE", b"__keyevent@0__:*"))
    read_until(sub, b":1\r\n")
    c = s.connect()
    c.sendall(frame(b"CONFIG", b"SET", b"notify-keyspace-events", b"KEAn"))
    read_until(c, b"+OK\r\n")
    rec = {"records": [{"data": {"i": 1}}, {"data": {"i": 2}}],
           "config": {"idempotency_window_ms": 60_000}}
    _http(s.http_port, "POST", "/v0/topics/ht", rec)
    _http(s.http_port, "POST", "/v0/topics/ht", {"records": [{"data": 3}]})
    replay = dict(rec, idempotency_key="k1")
    _http(s.http_port, "POST", "/v0/topics/ht", replay)
    _http(s.http_port, "POST", "/v0/topics/ht", replay)  # a duplicate: no event
    _http(s.http_port, "DELETE", "/v0/topics/ht")
    c.sendall(frame(b"PUBLISH", b"__keyevent@0__:end", b"x"))
    got = read_until(sub, b"$18\r\n__keyevent@0__:end\r\n$1\r\nx\r\n")
    events = [line for line in got.split(b"\r\n")
              if line.startswith(b"__keyevent@0__:") and line != b"__keyevent@0__:*"]
    assert [e.rpartition(b":")[2] for e in events] == [
        b"new", b"xadd", b"xadd", b"xadd", b"xadd", b"xadd", b"del", b"end"]
    assert got.count(b"$2\r\nht\r\n") == 7


def test_xgroup_create_mkstream_fires_new(inproc: InProc) -> None:
    sub, c = inproc.connect(), inproc.connect()
    sub.sendall(frame(b"PSUBSCRIBE", b"__keyspace@0__:g*"))
    read_until(sub, b":1\r\n")
    c.sendall(frame(b"CONFIG", b"SET", b"notify-keyspace-events", b"Ktn")
              + frame(b"XGROUP", b"CREATE", b"g1", b"grp", b"$", b"MKSTREAM")
              + frame(b"XGROUP", b"CREATE", b"g1", b"grp2", b"$", b"MKSTREAM")
              + frame(b"XGROUP", b"CREATE", b"g2", b"grp", b"$")
              + frame(b"PUBLISH", b"__keyspace@0__:gend", b"x"))
    got = read_until(sub, b"gend\r\n$1\r\nx\r\n")
    msgs = [line for line in got.split(b"\r\n") if line in (b"new", b"xgroup-create", b"x")]
    assert msgs == [b"new", b"xgroup-create", b"xgroup-create", b"x"]
