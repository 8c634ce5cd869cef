"""One huge command must not stall every other client (issue 10 item 9), on both RESP I/O
paths of a real server process: while one client sends an XADD of 1M arguments (13 MB), a
PING client measures its worst round trip. Before the fix the record was encoded on the event
loop in one go and every client waited ~0.7 s (Redis: 84 ms for the whole command); now the
parse is cheaper per chunk, the command gets turns of its own and the encoding runs off the
loop, and the worst PING stays around 0.06 s.

The bound is relative, so that a faster or slower (or busier) machine cannot flip it: the
command's work comes in turns, so no PING waits for more than a share of the whole command
(one step of the whole command would make a PING wait for nearly all of it)."""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

import pytest

from tests.resp.conftest import frame, read_until

ARGS = 1_000_000
# the worst PING wait < half the whole command's time: in turns it is ~1/20, in one step ~1/1;
# 1/4 failed once on a loaded 2-core machine (two test workers, each with its servers)
STALL_SHARE = 2


@pytest.mark.parametrize("io", ["reactor", "tasks"])
def test_a_huge_xadd_does_not_stall_other_clients(server_factory: Any, io: str) -> None:
    srv = server_factory("--resp-io", io, "--no-storage")
    payload = frame(b"XADD", b"big", b"*", *([b""] * ARGS))
    worst = [0.0]
    pings = [0]
    stop = threading.Event()
    ready = threading.Event()

    def pinger() -> None:
        s = socket.create_connection(("127.0.0.1", srv.resp_port), timeout=30)
        while not stop.is_set():
            t = time.perf_counter()
            s.sendall(b"PING\r\n")
            assert read_until(s, b"+PONG\r\n", timeout=30) == b"+PONG\r\n"
            worst[0] = max(worst[0], time.perf_counter() - t)
            pings[0] += 1
            ready.set()
            time.sleep(0.002)
        s.close()

    th = threading.Thread(target=pinger, daemon=True)
    th.start()
    assert ready.wait(10)
    big = socket.create_connection(("127.0.0.1", srv.resp_port), timeout=60)
    try:
        t0 = time.perf_counter()
        big.sendall(payload)
        reply = read_until(big, b"\r\n", timeout=60)
        took = time.perf_counter() - t0
        time.sleep(0.1)  # the tail of the work (freeing 1M arguments) happens after the reply
    finally:
        stop.set()
        th.join(30)
        big.close()
    assert reply.startswith(b"$") and reply.endswith(b"-1\r\n")  # the record was written
    assert pings[0] > 10
    assert worst[0] < took / STALL_SHARE, (
        f"a PING waited {worst[0]:.3f} s behind the big XADD (the whole of it: {took:.3f} s)")
