"""Wake-up latency of a blocked reader: the common case the delivery scheduler must not slow
(docs/priority.md; issue 14). One reader waits, one writer appends, and the clock runs from
the append being sent to the reader holding the record.

Rule 1 (XREAD BLOCK, both servers): a reader connection sends `XREAD BLOCK 0 STREAMS wk <id>`
with the last ID it holds, 1 ms later a writer connection sends `XADD wk * v r<i>`; the round
ends when the reader's socket holds `r<i>`. Raw sockets on both sides, so no client library
cost is measured, and the same bytes go to redis-server and topicsrv.
Rule 2 (SSE, topicsrv only): a `GET /v0/topics/wk/watch` stream stays open; each round POSTs
one record with a unique value and ends when its frame arrives on the stream.
Rule 3: the result is the median over `rounds` round trips, reported as wake-ups per second
(1 / median) so that, as in every other row, a higher ratio is better; p50/p99 in ms too.
"""

from __future__ import annotations

import socket
import statistics
import time

import orjson

from bench.httpbench import Http
from bench.respbench import Measure


def _cmd(*args: str) -> bytes:
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        b = a.encode()
        out.append(b"$%d\r\n%b\r\n" % (len(b), b))
    return b"".join(out)


def _read_until(sock: socket.socket, marker: bytes, buf: bytes = b"") -> bytes:
    while marker not in buf:
        chunk = sock.recv(65536)
        if not chunk:
            raise RuntimeError("connection closed while waiting for a wake-up")
        buf += chunk
    return buf


def _measure(lat: list[float]) -> Measure:
    lat.sort()
    p50 = statistics.median(lat)
    return Measure(1 / p50, 1 / p50, sum(lat), len(lat), p50 * 1e3, lat[int(len(lat) * 0.99) - 1] * 1e3)


def xread_block(port: int, rounds: int, key: str = "wk") -> Measure:
    """Rule 1."""
    reader = socket.create_connection(("127.0.0.1", port), timeout=30)
    writer = socket.create_connection(("127.0.0.1", port), timeout=30)
    lat: list[float] = []
    try:
        writer.sendall(_cmd("DEL", key))
        _read_until(writer, b"\r\n")
        last = "0-0"
        for i in range(rounds):
            reader.sendall(_cmd("XREAD", "BLOCK", "0", "STREAMS", key, last))
            time.sleep(0.001)  # let the reader block first
            marker = f"r{i}x"
            t0 = time.perf_counter()
            writer.sendall(_cmd("XADD", key, "*", "v", marker))
            got = _read_until(reader, marker.encode() + b"\r\n")
            lat.append(time.perf_counter() - t0)
            reply = _read_until(writer, b"\r\n")
            last = reply.split(b"\r\n")[1].decode()  # $n\r\n<id>\r\n
            del got
    finally:
        reader.close()
        writer.close()
    return _measure(lat)


def sse_wake(port: int, rounds: int, topic: str = "wk-sse") -> Measure:
    """Rule 2."""
    h = Http(port)
    h.ok("PUT", f"/v0/topics/{topic}", {})
    stream = socket.create_connection(("127.0.0.1", port), timeout=30)
    lat: list[float] = []
    try:
        stream.sendall(b"GET /v0/topics/%b/watch HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" % topic.encode())
        buf = _read_until(stream, b"\r\n\r\n")
        for i in range(rounds):
            marker = f"w{i}x"
            body = orjson.dumps({"records": [{"data": marker}]})
            t0 = time.perf_counter()
            h.conn.request("POST", f"/v0/topics/{topic}", body=body,
                           headers={"Content-Type": "application/json"})
            buf = _read_until(stream, b'"' + marker.encode() + b'"', buf)
            lat.append(time.perf_counter() - t0)
            buf = buf[buf.index(marker.encode()):]
            resp = h.conn.getresponse()
            resp.read()
    finally:
        stream.close()
        h.ok("DELETE", f"/v0/topics/{topic}")
        h.conn.close()
    return _measure(lat)
