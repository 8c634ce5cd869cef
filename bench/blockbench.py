"""Thousands of blocked clients (issue 40), the same workloads on redis-server and topicsrv.

Rule 1: each server is fresh (started for this phase), and runs the four workloads in order:
  memory   RSS growth per client while `group` connections are blocked in
           `XREADGROUP GROUP g c<i> COUNT 1 BLOCK 0 STREAMS bq >` (connection included);
  ping     with those readers blocked, a writer sends 20 XADDs (P1, one after the other, each
           serving one reader) while another client PINGs in a loop: the PINGs' round trips
           during the XADDs (median and max);
  cpu      the server's CPU per XADD (all its threads, /proc/<pid>/task/*/schedstat, ns) for
           `xadds` XADDs P1 to a key with `cpu` readers blocked (each XADD serves one, and the
           run ends once every served reader holds its entry), against the same XADDs to a
           key nobody waits on;
  fanout   `fanout` connections in `XREAD BLOCK 0 STREAMS bf $`; one XADD while another
           client PINGs in a loop: the stall is the longest PING round trip from the XADD
           until the last reader holds the entry (the fan-out's completion, also reported).
Rule 2: the same durability work on both servers (bench/queuebench.py Rule 3): redis-server
runs without persistence, so topicsrv's streams are made `DURABILITY ephemeral` first (no WAL;
a consumer group's deliveries are not logged either). The client side is raw sockets with the
same bytes for both servers; the bench
raises its open-file limit to the hard limit (the servers it starts inherit it), and a
server reports its blocked clients through `INFO clients` (`blocked_clients`), which is
what every wait for "all blocked" polls.
"""

from __future__ import annotations

import resource
import selectors
import socket
import statistics
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.procs import Proc


def raise_nofile(need: int) -> None:
    """Rule 2: as many open files as the hard limit allows; an error if it is too low."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    if hard < need + 64:
        raise RuntimeError(f"open-file hard limit {hard} < {need + 64} (ulimit -Hn)")


def cmd(*args: str | bytes) -> bytes:
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        b = a.encode() if isinstance(a, str) else a
        out.append(b"$%d\r\n%b\r\n" % (len(b), b))
    return b"".join(out)


def cpu_ns(pid: int) -> int:
    """Rule 1: the CPU time of every thread of `pid` so far, in ns (schedstat's first field)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            pass  # a thread that ended meanwhile
    return total


class Conn:
    """One blocking client socket with a line-oriented reply reader (enough for our replies)."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=60)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""

    def call(self, *args: str | bytes) -> bytes:
        self.sock.sendall(cmd(*args))
        return self.reply()

    def reply(self) -> bytes:
        """One complete reply (a simple line, or an array/bulk read to its end by counting)."""
        while True:
            end = _complete(self.buf)
            if end:
                out, self.buf = self.buf[:end], self.buf[end:]
                return out
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                raise RuntimeError("connection closed")
            self.buf += chunk

    def info_int(self, field: str) -> int:
        text = self.call("INFO", "clients").decode()
        return int(text.split(field + ":", 1)[1].split()[0])

    def close(self) -> None:
        self.sock.close()


def _complete(buf: bytes, pos: int = 0) -> int:
    """The end of the RESP value at `pos` in `buf`, 0 when incomplete."""
    nl = buf.find(b"\r\n", pos)
    if nl < 0:
        return 0
    kind, head = buf[pos:pos + 1], buf[pos + 1:nl]
    end = nl + 2
    if kind in (b"+", b"-", b":", b"_"):
        return end
    n = int(head)
    if kind == b"$":
        if n < 0:
            return end
        return end + n + 2 if len(buf) >= end + n + 2 else 0
    if kind in (b"*", b"%"):
        if n < 0:
            return end
        for _ in range(n * (2 if kind == b"%" else 1)):
            end = _complete(buf, end)
            if not end:
                return 0
        return end
    raise RuntimeError(f"unexpected reply {buf[pos:pos + 40]!r}")


@contextmanager
def blocked(port: int, n: int, request: Any, admin: Conn) -> Iterator[list[socket.socket]]:
    """`n` clients blocked with `request(i)`; closed (and gone from the server) at the end."""
    before = admin.info_int("blocked_clients")
    socks: list[socket.socket] = []
    try:
        for i in range(n):
            s = socket.create_connection(("127.0.0.1", port), timeout=60)
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            s.sendall(request(i))
            socks.append(s)
        _until(lambda: admin.info_int("blocked_clients") >= before + n, f"{n} clients blocked")
        yield socks
    finally:
        for s in socks:
            s.close()
        _until(lambda: admin.info_int("blocked_clients") <= before, "blocked clients gone")


def _until(check: Any, what: str, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for: {what}")
        time.sleep(0.05)


def stream(proc: Proc, admin: Conn, key: str, group: bool = True) -> None:
    """Rule 2: the stream `key` (ephemeral on topicsrv), with group `g` at its end."""
    if proc.name == "topicsrv":
        admin.call("TOPIC.CREATE", key, "DURABILITY", "ephemeral")
    if group:
        admin.call("XGROUP", "CREATE", key, "g", "$", "MKSTREAM")


def _group_reader(i: int, key: str = "bq") -> bytes:
    return cmd("XREADGROUP", "GROUP", "g", f"c{i}", "COUNT", "1", "BLOCK", "0", "STREAMS", key, ">")


@dataclass
class Result:
    memory_per_client: float
    ping_p50_ms: float
    ping_max_ms: float
    pings: int
    cpu_none_us: float
    cpu_blocked_us: float
    stall_ms: float
    fanout_ms: float


def run(proc: Proc, group: int, cpu: int, xadds: int, fanout: int, log: Any = None) -> Result:
    """Rule 1 on a fresh server `proc`."""
    say = log or (lambda text: None)
    assert proc.resp_port is not None
    port = proc.resp_port
    raise_nofile(max(group, cpu, fanout) * 2)
    admin = Conn(port)
    try:
        for key in ("bq", "bn", "bc"):
            stream(proc, admin, key, group=key != "bn")
        stream(proc, admin, "bf", group=False)
        time.sleep(0.5)
        rss0 = proc.rss()
        say(f"{proc.name}: {group} blocked group readers")
        with blocked(port, group, _group_reader, admin):
            time.sleep(0.5)
            per_client = (proc.rss() - rss0) / group
            p50, pmax, pings = _ping_during_xadds(port, admin, 20)
        say(f"{proc.name}: CPU per XADD, none vs {cpu} blocked")
        none = _cpu_per_xadd(proc, admin, "bn", xadds)
        with blocked(port, cpu, lambda i: _group_reader(i, "bc"), admin) as socks:
            busy = _cpu_per_xadd(proc, admin, "bc", xadds, socks)
        say(f"{proc.name}: XREAD BLOCK fan-out to {fanout}")
        admin.call("XADD", "bf", "*", "v", "old")
        with blocked(port, fanout, lambda i: cmd("XREAD", "BLOCK", "0", "STREAMS", "bf", "$"),
                     admin) as socks:
            stall, done = _fanout(port, admin, socks)
        return Result(per_client, p50, pmax, pings, none, busy, stall, done)
    finally:
        admin.close()


def _ping_during_xadds(port: int, writer: Conn, n: int) -> tuple[float, float, int]:
    """Rule 1 `ping`: PING round trips (ms) while `n` XADDs run: median, max, how many."""
    with _pinging(port) as rtts:
        for i in range(n):
            writer.call("XADD", "bq", "*", "v", f"p{i}")
    if not rtts:
        raise RuntimeError("no PING completed during the XADDs")
    return statistics.median(rtts), max(rtts), len(rtts)


def _cpu_per_xadd(proc: Proc, writer: Conn, key: str, n: int,
                  readers: list[socket.socket] | None = None) -> float:
    """Rule 1 `cpu`: µs of server CPU per XADD (the served readers' replies included)."""
    c0 = cpu_ns(proc.pid)
    for i in range(n):
        writer.call("XADD", key, "*", "v", f"c{i}")
    if readers is not None:  # the first n blocked readers were served: wait for each reply
        for s in readers[:n]:
            buf = b""
            while b"\r\nv\r\n" not in buf:
                chunk = s.recv(1 << 16)
                if not chunk:
                    raise RuntimeError("a reader's connection closed")
                buf += chunk
    return (cpu_ns(proc.pid) - c0) / n / 1e3


def _fanout(port: int, writer: Conn, socks: list[socket.socket]) -> tuple[float, float]:
    """Rule 1 `fanout`: (the longest PING round trip during the fan-out, its completion), ms."""
    sel = selectors.DefaultSelector()
    bufs: dict[socket.socket, bytes] = {}
    for s in socks:
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ)
        bufs[s] = b""
    try:
        with _pinging(port) as rtts:
            t0 = time.perf_counter()
            writer.call("XADD", "bf", "*", "v", "new")
            left = len(socks)
            deadline = time.monotonic() + 300
            while left:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{left} readers never got the entry")
                for key, _ in sel.select(1.0):
                    s = key.fileobj
                    assert isinstance(s, socket.socket)
                    chunk = s.recv(1 << 16)
                    if not chunk:
                        raise RuntimeError("a reader's connection closed")
                    bufs[s] += chunk
                    if b"\r\nnew\r\n" in bufs[s]:
                        sel.unregister(s)
                        left -= 1
            done = (time.perf_counter() - t0) * 1e3
    finally:
        sel.close()
        for s in socks:
            s.setblocking(True)
    return max(rtts, default=0.0), done


@contextmanager
def _pinging(port: int) -> Iterator[list[float]]:
    """A client PINGing in a loop on its own thread: the round trips (ms) of the PINGs sent
    inside the block (the one in flight at its end included)."""
    pinger = Conn(port)
    rtts: list[float] = []
    stop = threading.Event()
    started = threading.Event()

    def loop() -> None:
        started.set()
        while not stop.is_set():
            t0 = time.perf_counter()
            pinger.call("PING")
            rtts.append((time.perf_counter() - t0) * 1e3)

    t = threading.Thread(target=loop, daemon=True)
    t.start()
    started.wait()
    try:
        yield rtts
    finally:
        stop.set()
        t.join(60)
        pinger.close()


if __name__ == "__main__":  # `python -m bench.blockbench [--quick]`: this phase alone
    import sys

    from bench.procs import Procs

    quick = "--quick" in sys.argv
    sizes = (2000, 1000, 500, 3000) if quick else (5000, 2000, 1000, 9000)
    procs = Procs()
    try:
        for start in (procs.start_redis, procs.start_topicsrv):
            p = start()
            res = run(p, *sizes, log=lambda text: print(text, file=sys.stderr, flush=True))
            print(p.name, asdict(res), flush=True)
            procs.stop(p)
    finally:
        procs.stop_all()
