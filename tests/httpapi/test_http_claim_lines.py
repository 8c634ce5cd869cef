"""A claim's `wait_ms` waits in the same line as TOPIC.CLAIM BLOCK and `/v0/work` streams
(topicsrv/notify/lines.py, issue 40): one job makes one waiting claimer ready, whichever front
it came from, first come first served."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from tests.resp.conftest import frame, read_until

from .conftest import Client, sse_opener, wait_until
from .inproc import Srv
from .test_http_queues import claim, produce


@pytest.fixture
def streams(srv: Srv) -> Iterator[Any]:
    yield from sse_opener(srv.http_port)


@pytest.fixture
def q(c: Client, topic: str) -> str:
    assert c.put(f"/v0/topics/{topic}", {"type": "queue"}).status == 201
    return topic


def stats(srv: Srv) -> dict[str, int]:
    return srv.ctx.notifier.statistics()


def test_http_and_resp_claimers_wait_in_one_line_and_each_job_serves_the_next(
        srv: Srv, c: Client, q: str) -> None:
    box: dict[str, list[dict[str, Any]]] = {}

    def poll(node: str) -> None:
        poller = srv.client()
        try:
            box[node] = claim(poller, q, node, wait_ms=30_000)
        finally:
            poller.close()

    h0 = threading.Thread(target=poll, args=("h0",))
    h0.start()
    wait_until(lambda: srv.ctx.notifier.armed(q) == 1)
    r1 = socket.create_connection(("127.0.0.1", srv.resp_port), timeout=10)
    r1.sendall(frame(b"TOPIC.CLAIM", q.encode(), b"r1", b"BLOCK", b"0"))
    wait_until(lambda: srv.ctx.notifier.armed(q) == 2)
    h2 = threading.Thread(target=poll, args=("h2",))
    h2.start()
    wait_until(lambda: srv.ctx.notifier.armed(q) == 3)
    try:
        before = stats(srv)
        produce(c, q, 1)
        h0.join(15)
        assert [j["$seq"] for j in box["h0"]] == [1] and "h2" not in box
        assert srv.ctx.notifier.armed(q) == 2
        produce(c, q, 1, start=1)
        assert b'{"n":1}\r\n:2\r\n' in read_until(r1, b"}\r\n:2\r\n")  # job 2: data, seq 2
        produce(c, q, 1, start=2)
        h2.join(15)
        assert [j["$seq"] for j in box["h2"]] == [3]
        after = stats(srv)
        assert after["wakeups"] - before["wakeups"] == 3
        assert after["served"] - before["served"] == 3 and after["served_empty"] == before["served_empty"]
    finally:
        r1.close()
        h0.join(15)
        h2.join(15)


def test_a_waiting_http_claimer_gone_before_its_job_takes_nothing(srv: Srv, c: Client, q: str) -> None:
    r = redis.Redis(port=srv.resp_port, socket_timeout=10)
    body = b'{"node": "gone", "wait_ms": 30000}'
    with socket.create_connection(("127.0.0.1", srv.http_port), timeout=5) as s:
        s.sendall(b"POST /v0/topics/%b/claim HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                  b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%b"
                  % (q.encode(), len(body), body))
        wait_until(lambda: srv.ctx.notifier.armed(q) == 1)
    wait_until(lambda: srv.ctx.notifier.armed(q) == 0)  # its connection's end left the line
    try:
        produce(c, q, 1)
        got = r.execute_command("TOPIC.CLAIM", q, "here")
        assert got[0][2] == 1 and got[0][5] == 1  # seq 1, first delivery
    finally:
        r.close()


def test_one_job_wakes_one_of_many_waiting_job_streams(srv: Srv, c: Client, q: str,
                                                        streams: Any) -> None:
    """A stream whose one slot is taken leaves the line (it waits for an ack instead)."""
    opened = [streams(f"/v0/work?topics={q}&node=w{i}&max_in_flight=1") for i in range(12)]
    wait_until(lambda: stats(srv)["parked"] == 12)
    before = stats(srv)
    produce(c, q, 1)
    wait_until(lambda: stats(srv)["parked"] == 11 and srv.ctx.notifier.armed(q) == 12)
    assert stats(srv)["wakeups"] - before["wakeups"] == 1
    produce(c, q, 2, start=1)
    wait_until(lambda: stats(srv)["parked"] == 9 and srv.ctx.notifier.armed(q) == 12)
    # two streams made ready for the two jobs, and the full one's wait for a free slot, which
    # hears every change of its queue
    assert stats(srv)["wakeups"] - before["wakeups"] == 1 + 2 + 1
    assert len(opened) == 12
