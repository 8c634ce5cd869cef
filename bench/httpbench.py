"""HTTP workloads against topicsrv (no Redis peer): batched writes, diff paging, SSE fan-out.

Rule 1: one keep-alive connection per client (stdlib http.client, orjson bodies), so the
numbers measure the server, not connection setup.
Rule 2: the SSE watchers are raw sockets read by one selector loop in this process; a frame
is counted when its `event: record` line arrives (heartbeats and tombstones are not counted).
Rule 3: every workload checks it saw every record it wrote; a short count is an error, not a
fast result.
"""

from __future__ import annotations

import argparse
import http.client
import selectors
import socket
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from bench.respbench import VALUE, Measure
from bench.sizes import SIZES

# `python -m bench.httpbench` rows: (size key of bench.sizes.SIZES, run against an HTTP port)
ROWS: dict[str, tuple[str, Callable[[int, int], Measure]]] = {
    "write": ("http_records", lambda port, n: write_batches(port, "hd", n)),
    "diff": ("http_records", lambda port, n: diff_paging(port, "hd", n)),  # after "write"
    "sse": ("sse", lambda port, n: sse_fanout(port, "sse", n)),
}

DATA = VALUE.decode()


class Http:
    def __init__(self, port: int) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        payload = orjson.dumps(body) if body is not None else None
        headers = {"Content-Type": "application/json"} if payload is not None else {}
        self.conn.request(method, path, body=payload, headers=headers)
        resp = self.conn.getresponse()
        raw = resp.read()
        return resp.status, (orjson.loads(raw) if raw else None)

    def ok(self, method: str, path: str, body: Any = None) -> Any:
        status, reply = self.call(method, path, body)
        if status >= 300:
            raise RuntimeError(f"{method} {path} -> {status} {reply}")
        return reply

    def close(self) -> None:
        self.conn.close()


def post_batches(h: Http, topic: str, records: int, batch: int = 1000) -> float:
    """POST `records` 100-byte records in batches of `batch`; seconds until the last ack."""
    body = orjson.dumps({"records": [{"data": DATA}] * batch})
    done = 0
    t0 = time.perf_counter()
    while done < records:
        n = min(batch, records - done)
        payload = body if n == batch else orjson.dumps({"records": [{"data": DATA}] * n})
        h.conn.request("POST", f"/v0/topics/{topic}", body=payload,
                       headers={"Content-Type": "application/json"})
        resp = h.conn.getresponse()
        raw = resp.read()
        if resp.status >= 300:
            raise RuntimeError(f"write -> {resp.status} {raw[:300]!r}")
        done += n
    return time.perf_counter() - t0


def write_batches(port: int, topic: str, records: int, batch: int = 1000) -> Measure:
    """POST batches of `batch` x 100-byte records until `records` were written."""
    h = Http(port)
    h.ok("PUT", f"/v0/topics/{topic}", {})
    elapsed = post_batches(h, topic, records, batch)
    h.close()
    calls = (records + batch - 1) // batch
    return Measure(calls / elapsed, records / elapsed, elapsed, calls)


def diff_paging(port: int, topic: str, records: int, limit: int = 1000) -> Measure:
    """Page through the topic from the start with `diff` until caught up."""
    h = Http(port)
    from_seq = 0
    seen = calls = 0
    t0 = time.perf_counter()
    while True:
        reply = h.ok("POST", f"/v0/topics/{topic}/diff", {"from_seq": from_seq, "limit": limit})
        calls += 1
        seen += len(reply["records"])
        from_seq = reply["next_from_seq"]
        if reply["caught_up"]:
            break
    elapsed = time.perf_counter() - t0
    h.close()
    if seen < records:
        raise RuntimeError(f"diff paging saw {seen} of {records} records")
    return Measure(calls / elapsed, seen / elapsed, elapsed, calls)


def _open_watch(port: int, topic: str, from_seq: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    sock.sendall(f"GET /v0/topics/{topic}/watch?from_seq={from_seq} HTTP/1.1\r\n"
                 f"Host: 127.0.0.1\r\nAccept: text/event-stream\r\n\r\n".encode())
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = sock.recv(65536)
        if not chunk:
            raise RuntimeError("watch connection closed before headers")
        head += chunk
    status = head.split(b"\r\n", 1)[0]
    if b" 200" not in status:
        raise RuntimeError(f"watch -> {status!r}")
    sock.setblocking(False)
    return sock


def sse_fanout(port: int, topic: str, records: int, watchers: int = 10,
               batch: int = 1000, timeout: float = 300.0) -> Measure:
    """`watchers` SSE clients on one topic; a writer posts `records`; rate = deliveries/s."""
    h = Http(port)
    state = h.ok("PUT", f"/v0/topics/{topic}", {})
    start = int(state.get("head_seq", 0))
    socks = [_open_watch(port, topic, start) for _ in range(watchers)]
    sel = selectors.DefaultSelector()
    counts = {s.fileno(): 0 for s in socks}
    tails = {s.fileno(): b"" for s in socks}
    for s in socks:
        sel.register(s, selectors.EVENT_READ)
    marker = b"event: record\n"
    body = orjson.dumps({"records": [{"data": DATA}] * batch})
    target = records
    written = 0
    t0 = time.perf_counter()
    try:
        while True:
            if written < records:
                n = min(batch, records - written)
                payload = body if n == batch else orjson.dumps({"records": [{"data": DATA}] * n})
                h.conn.request("POST", f"/v0/topics/{topic}", body=payload,
                               headers={"Content-Type": "application/json"})
                resp = h.conn.getresponse()
                resp.read()
                if resp.status >= 300:
                    raise RuntimeError(f"write -> {resp.status}")
                written += n
            for key, _ in sel.select(timeout=0 if written < records else 1.0):
                sock = key.fileobj
                assert isinstance(sock, socket.socket)
                try:
                    chunk = sock.recv(1 << 20)
                except BlockingIOError:
                    continue
                if not chunk:
                    raise RuntimeError("a watcher's connection closed")
                fd = sock.fileno()
                data = tails[fd] + chunk
                counts[fd] += data.count(marker)
                tails[fd] = data[-(len(marker) - 1):]
            if written >= records and all(c >= target for c in counts.values()):
                break
            if time.perf_counter() - t0 > timeout:
                raise RuntimeError(f"SSE watchers got {sorted(counts.values())} of {target}")
    finally:
        elapsed = time.perf_counter() - t0
        for s in socks:
            sel.unregister(s)
            s.close()
        h.close()
    delivered = sum(counts.values())
    return Measure(delivered / elapsed, delivered / elapsed, elapsed, delivered)


def ab_main(prog: str, rows: dict[str, tuple[str, Callable[[int, int], Measure]]],
            argv: list[str] | None = None) -> int:
    """`python -m <prog> [--rounds 3] [--sizes quick] [--rows a,b] [--against TREE]`: the rows
    (records/s) on a fresh topicsrv per round and tree, all rows in order on that server;
    with `--against TREE` that tree's server (its own .venv, bench/procs.py) runs in every
    round too, which tree goes first alternating; per-round values and NEW/OLD printed."""
    from bench import procs as procs_mod

    ap = argparse.ArgumentParser(prog=prog)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--sizes", choices=sorted(SIZES), default="quick")
    ap.add_argument("--rows", default=",".join(rows))
    ap.add_argument("--against", type=Path, help="a second source tree (the base of the A/B)")
    args = ap.parse_args(argv)
    trees: dict[str, Path | None] = {"this": None}
    if args.against:
        trees = {"base": args.against.resolve(), **trees}
    names = args.rows.split(",")
    got: dict[tuple[str, str], list[float]] = {(r, t): [] for r in names for t in trees}
    procs = procs_mod.Procs()
    procs_mod.install_signal_handlers()
    try:
        for rnd in range(args.rounds):
            order = list(trees.items())
            for tree, root in order[::-1] if rnd % 2 else order:
                top = procs.start_topicsrv(cwd=root)
                try:
                    for row in names:
                        key, fn = rows[row]
                        m = fn(top.http_port or 0, SIZES[args.sizes][key])
                        got[(row, tree)].append(m.records_per_s)
                        print(f"round {rnd + 1} {row} {tree}: {m.records_per_s:,.0f} rec/s",
                              flush=True)
                finally:
                    procs.stop(top)
    finally:
        procs.stop_all()
    for row in names:
        line = "  ".join(f"{t} {statistics.median(got[(row, t)]):,.0f} "
                         f"({', '.join(f'{x:,.0f}' for x in got[(row, t)])})" for t in trees)
        if "base" in trees:
            ab = [a / b for a, b in zip(got[(row, "this")], got[(row, "base")], strict=True)]
            line += f"  this/base {statistics.median(ab):.2f} ({', '.join(f'{x:.2f}' for x in ab)})"
        print(f"{row}: {line}")
    return 0


if __name__ == "__main__":
    raise SystemExit(ab_main("python -m bench.httpbench", ROWS))
