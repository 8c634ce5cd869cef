"""Effective-priority delivery end to end (docs/priority.md), for every kind of waiter.

When more readers are ready than one pass serves, every reply or event for a higher-P_eff
reader is handed to its socket before any for a lower one. The tests assert that ORDER, as the
server records it (`Notifier.trace`: one entry per delivery, taken once the bytes are handed
to the socket), never latencies: nothing here depends on how fast the machine is, and the same
tests run on the compiled and the pure build (`make test` runs this module with TOPICS_PURE=1).

Every round makes both topics ready in one step (MULTI/EXEC: the low one's append first, so
the order of the writes cannot be what orders the deliveries), then reads every socket.
"""

from __future__ import annotations

import re
import selectors
import socket
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import orjson
import pytest
import redis

from tests.httpapi.conftest import SSE, Client, wait_until
from tests.httpapi.inproc import Srv, start_server
from tests.httpapi.test_http_queues import produce
from tests.resp.conftest import frame
from topicsrv.engine.queues.priority import AGE_CAP_MS
from topicsrv.notify import PASS_BUDGET

WATCHERS = 60
ROUNDS = 12
RECORD = re.compile(rb'event: record\ndata: \{"topic":"[a-z0-9]+",.*?"data":\{"r":"(\d+)"\}')
CONTENT_LENGTH = re.compile(rb"\r\ncontent-length: (\d+)\r\n", re.I)


@pytest.fixture(scope="module")
def servers() -> Iterator[dict[str, Srv]]:
    made = {io: start_server(heartbeat_s=30, resp_io=io) for io in ("reactor", "tasks")}
    for s, _ in made.values():
        # A pass that outlives its tick (a turn stuck on a slow socket) lets the next one
        # start: the one exception to the order (tests/notify/test_scheduler.py covers it). A busy test
        # machine can stall the server for that long; here it must not change the order.
        s.ctx.notifier.tick_s = 30.0
    yield {io: s for io, (s, _) in made.items()}
    for _, stop in made.values():
        stop()


@pytest.fixture(scope="module")
def srv(servers: dict[str, Srv]) -> Srv:
    return servers["reactor"]


def connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=10)


def make_ready(srv: Srv, lo: str, hi: str, appends: int = 1, value: int = 0) -> None:
    """Both topics change in one step (one EXEC), the low one first."""
    r = redis.Redis(port=srv.resp_port, socket_timeout=10)
    try:
        pipe = r.pipeline(transaction=True)
        for topic in (lo, hi):
            for _ in range(appends):
                pipe.xadd(topic, {"r": value})
        pipe.execute()
    finally:
        r.close()


def read_all(socks: dict[socket.socket, bytes], complete: Callable[[bytes], bool]) -> None:
    """Read every socket until `complete(its bytes)`, at most 10 s in all."""
    sel = selectors.DefaultSelector()
    pending = {s for s, buf in socks.items() if not complete(buf)}
    for s in pending:
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ)
    try:
        wait_until(lambda: _read_some(sel, socks, pending, complete))
    finally:
        sel.close()
        for s in socks:
            s.setblocking(True)


def _read_some(sel: selectors.BaseSelector, socks: dict[socket.socket, bytes],
               pending: set[socket.socket], complete: Callable[[bytes], bool]) -> bool:
    for key, _ in sel.select(0.1):
        s = key.fileobj
        assert isinstance(s, socket.socket)
        chunk = s.recv(1 << 20)
        assert chunk, "a waiter's connection closed"
        socks[s] += chunk
        if complete(socks[s]):
            pending.discard(s)
            sel.unregister(s)
    return not pending


def delivered_in_order(srv: Srv, hi: str, lo: str, n: int) -> list[int]:
    """The round's deliveries, as written: every high one first. The passes they came in."""
    trace = srv.ctx.notifier.trace
    assert trace is not None
    wait_until(lambda: len(trace) >= 2 * n)  # the last entries are taken just after the send
    assert [t for _, t in trace] == [hi] * n + [lo] * n, trace
    return [p for p, _ in trace]


def test_high_priority_watchers_are_served_first_and_low_ones_get_everything(srv: Srv) -> None:
    c = Client(srv.http_port)
    assert c.put("/v0/topics/phi", {"priority": 1000}).status == 201
    assert c.put("/v0/topics/plo", {"priority": -500}).status == 201
    socks: dict[socket.socket, bytes] = {}
    topic_of: dict[socket.socket, str] = {}
    for topic in ("phi", "plo"):
        for _ in range(WATCHERS):
            s = connect(srv.http_port)
            s.sendall(b"GET /v0/topics/%b/watch HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" % topic.encode())
            socks[s], topic_of[s] = b"", topic
    n = srv.ctx.notifier
    contended = n.contended_passes
    passes: list[list[int]] = []
    try:
        for rnd in range(ROUNDS):
            wait_until(lambda: n.armed("phi") == WATCHERS and n.armed("plo") == WATCHERS)
            n.trace = []
            make_ready(srv, "plo", "phi", value=rnd)
            read_all(socks, lambda buf, k=rnd + 1: len(RECORD.findall(buf)) >= k)
            passes.append(delivered_in_order(srv, "phi", "plo", WATCHERS))
            n.trace = None
    finally:
        n.trace = None
        for s in socks:
            s.close()
        c.close()
    # every watcher, low priority included, got every record, in order
    assert all([int(m) for m in RECORD.findall(buf)] == list(range(ROUNDS)) for buf in socks.values())
    # 120 ready on two topics: pass 1 is 32 high, pass 2 the 28 high left then 4 low (two
    # steps), pass 3 the 56 low (one topic: one uncontended pass)
    assert n.contended_passes - contended == 2 * ROUNDS
    for p in passes:
        first = p[0]
        assert p == [first] * PASS_BUDGET + [first + 1] * PASS_BUDGET + [first + 2] * (2 * WATCHERS - 2 * PASS_BUDGET)
    bands = n.latency
    # P_eff: 1000 + 500 (recency, the watchers consume it) and -500 + 500
    assert sum(bands[2]) >= WATCHERS * ROUNDS and sum(bands[1]) >= WATCHERS * ROUNDS
    text = Client(srv.http_port).get("/metrics").body.decode()
    assert '# TYPE topicsrv_delivery_latency_seconds histogram' in text
    assert f'topicsrv_delivery_latency_seconds_count{{band="ge500"}} {sum(bands[2])}' in text


# ---- every other kind of waiter ----------------------------------------------------------------


def http_complete(buf: bytes) -> bool:
    end = buf.find(b"\r\n\r\n")
    m = CONTENT_LENGTH.search(buf, 0, end + 2)
    return m is not None and len(buf) - end - 4 >= int(m.group(1))


def resp_complete(buf: bytes) -> bool:
    return buf.endswith(b"+PONG\r\n")  # the PING sent behind the blocking command


def http_post(path: str, body: dict[str, Any]) -> bytes:
    data = orjson.dumps(body)
    return (b"POST %b HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n%b" % (path.encode(), len(data), data))


@dataclass(frozen=True)
class Kind:
    """One kind of waiter: how its topics are made, what a waiter sends to block, how to tell
    its reply is all in, and over which front."""

    queue: bool
    request: Callable[[Srv, str, int], bytes]
    complete: Callable[[bytes], bool]
    resp: bool  # the waiter is a RESP client (its I/O path is parametrized)
    rounds: int = 3
    stream: bool = False  # one request, a stream of frames
    groups: bool = False


def _head(srv: Srv, topic: str) -> int:
    return int(srv.ctx.engine.get(topic).head_seq)


KINDS: dict[str, Kind] = {
    "diff": Kind(False, lambda srv, t, i: http_post(f"/v0/topics/{t}/diff", {
        "from_seq": _head(srv, t), "wait_ms": 60_000}), http_complete, resp=False),
    "claim": Kind(True, lambda srv, t, i: http_post(f"/v0/topics/{t}/claim", {
        "node": f"n{i}", "max": 1, "wait_ms": 60_000}), http_complete, resp=False),
    "work": Kind(True, lambda srv, t, i: (
        b"GET /v0/work?topics=%b&node=w%d&max_in_flight=1 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
        % (t.encode(), i)), lambda buf: b"event: job" in buf, resp=False, rounds=1, stream=True),
    "xread": Kind(False, lambda srv, t, i: frame(b"XREAD", b"BLOCK", b"0", b"STREAMS", t.encode(), b"$")
                  + frame(b"PING"), resp_complete, resp=True),
    "xreadgroup": Kind(False, lambda srv, t, i: frame(
        b"XREADGROUP", b"GROUP", b"g%d" % i, b"c", b"BLOCK", b"0", b"STREAMS", t.encode(), b">")
        + frame(b"PING"), resp_complete, resp=True, groups=True),
    "topic.claim": Kind(True, lambda srv, t, i: frame(
        b"TOPIC.CLAIM", t.encode(), b"n%d" % i, b"BLOCK", b"60000") + frame(b"PING"),
        resp_complete, resp=True),
}
CASES = [(k, io) for k, kind in KINDS.items() for io in (("reactor", "tasks") if kind.resp else ("reactor",))]


@pytest.mark.parametrize(("name", "io"), CASES, ids=[f"{k}-{io}" for k, io in CASES])
def test_every_kind_of_waiter_is_delivered_in_priority_order(
        servers: dict[str, Srv], name: str, io: str) -> None:
    kind, srv = KINDS[name], servers[io]
    n = srv.ctx.notifier
    each = PASS_BUDGET + 8  # 80 ready: pass 1 is 32 high, pass 2 the 8 high left then 24 low
    hi, lo = f"{name.replace('.', '')}hi{io[0]}", f"{name.replace('.', '')}lo{io[0]}"
    c = Client(srv.http_port)
    for topic, prio in ((hi, 1000), (lo, -500)):
        assert c.put(f"/v0/topics/{topic}", {"priority": prio, **({"type": "queue"} if kind.queue else {})}).status == 201
    r = redis.Redis(port=srv.resp_port, socket_timeout=10)
    if kind.groups:
        for topic in (hi, lo):
            for i in range(each):
                r.xgroup_create(topic, f"g{i}", "$")
    port = srv.resp_port if kind.resp else srv.http_port
    waiters = {(topic, i): connect(port) for topic in (hi, lo) for i in range(each)}
    try:
        for rnd in range(kind.rounds):
            socks = {s: b"" for s in waiters.values()}
            if rnd == 0 or not kind.stream:
                for (topic, i), s in waiters.items():
                    s.sendall(kind.request(srv, topic, i))
            wait_until(lambda: n.armed(hi) == each and n.armed(lo) == each)
            n.trace = []
            make_ready(srv, lo, hi, appends=each if kind.queue else 1)  # a job for every claimer
            read_all(socks, kind.complete)
            passes = delivered_in_order(srv, hi, lo, each)
            n.trace = None
            assert passes[0] + 1 == passes[PASS_BUDGET] == passes[each]  # the mixed pass
    finally:
        n.trace = None
        for s in waiters.values():
            s.close()
        r.close()
        c.close()


def test_work_takes_the_higher_priority_queue_first_and_the_lower_within_the_bound(srv: Srv) -> None:
    c = Client(srv.http_port)
    assert c.put("/v0/topics/wlo", {"type": "queue", "priority": -500}).status == 201
    assert c.put("/v0/topics/whi", {"type": "queue", "priority": 1000}).status == 201
    produce(c, "wlo", 5)
    produce(c, "whi", 50)
    s = SSE(srv.http_port, "/v0/work?topics=wlo,whi&node=W&max_in_flight=2")
    seen: list[str] = []

    def take(k: int) -> list[dict[str, Any]]:
        jobs = [f["data"] for f in s.frames(k)]
        seen.extend(j["topic"] for j in jobs)
        for j in jobs:
            r = c.post(f"/v0/topics/{j['topic']}/ack",
                       {"node": "W", "seqs": [j["$seq"]], "lease_ids": [j["lease_id"]]})
            assert r.status == 200, r
        return jobs

    try:
        for _ in range(4):  # while the high queue has a backlog it fills every free slot
            take(2)
        assert seen == ["whi"] * 8
        # the acks above already refilled both slots from the high queue; the low one has now
        # been passed over for the bound: it is served by the next claim
        srv.clock.advance(AGE_CAP_MS)
        take(2)
        jobs = take(2)
        assert seen[:10] == ["whi"] * 10
        assert "wlo" in [j["topic"] for j in jobs], seen
    finally:
        s.close()
        c.close()
