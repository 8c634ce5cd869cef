"""Another client's worst PING stall while the keyspace is saved (issue 35): topicsrv's
checkpoint against redis-server's BGSAVE, the same data on both.

Rule 1: each server is fresh and gets the same keyspace through the same pipelined commands:
`keys` string keys of 100 bytes, then `elements` collection elements, half in lists and half in
hashes (10-byte values), `per_key` elements per collection key.
Rule 2: a prober thread PINGs in a loop on its own connection (one PING in flight) and keeps
every round trip. The save is asked for by `BGSAVE` on another connection (topicsrv: a
checkpoint, its keyspace written by a forked child, storage/forksave.py, or with
`--topicsrv-args "--checkpoint-fork no"` in parts between other clients' commands,
storage/keyspacesave.py; redis-server: a forked child) and is over when
INFO persistence's `rdb_bgsave_in_progress` is 0 again. The row is the longest PING round trip
from the BGSAVE until then, and the same over as long a window with no save (the floor the
machine gives); the ratio is topicsrv's over redis-server's (target ≤ 2×).
Rule 2b: a sampler thread reads, every 50 ms of the save, the server's RSS, its forked
child's RSS and the child's Private_Dirty (the pages copied on write since the fork); the
peaks are reported beside the stall, with the load average before and after the run.
Rule 3: redis-server saves to its own temporary folder (`--save ""` keeps it from saving on its
own); topicsrv runs with its default `--keyspace-durability disk` and a checkpoint interval far
longer than the run, so the only checkpoint is the one asked for.

Run alone: `python -m bench.ckptbench [--keys N] [--elements N]` (defaults: 1M and 10M, the
issue's sizes; `make bench` runs them; bench-quick runs 100k and 1M).
"""

from __future__ import annotations

import argparse
import os
import socket
import threading
import time
from dataclasses import dataclass
from typing import Any

from bench.procs import Proc, Procs, children, rss_bytes


@dataclass
class Result:
    keys: int
    elements: int
    rss_mb: float
    load_s: float
    save_s: float
    stall_ms: float  # worst PING round trip during the save
    floor_ms: float  # worst PING round trip over as long a window with no save
    pings: int  # PINGs answered during the save
    fork_usec: int
    parent_peak_mb: float = 0.0  # the server's RSS, highest during the save (Rule 2b)
    child_peak_mb: float = 0.0  # its child's RSS, highest
    child_dirty_mb: float = 0.0  # its child's Private_Dirty, highest: the copied pages
    cow_mb: float = 0.0  # INFO persistence rdb_last_cow_size, as the server reports it
    worst_at_s: float = 0.0  # when the worst PING of the save was sent, after the BGSAVE


class _Conn:
    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""

    def send(self, *cmds: list[bytes]) -> None:
        out = []
        for cmd in cmds:
            out.append(b"*%d\r\n" % len(cmd))
            for a in cmd:
                out.append(b"$%d\r\n%s\r\n" % (len(a), a))
        self.sock.sendall(b"".join(out))

    def _line(self) -> bytes:
        while b"\r\n" not in self.buf:
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise ConnectionError("server closed the connection")
            self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\r\n")
        return line

    def reply(self) -> Any:
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind in (b"+", b":"):
            return rest
        if kind == b"-":
            raise RuntimeError(rest.decode())
        if kind == b"$":
            n = int(rest)
            if n < 0:
                return None
            while len(self.buf) < n + 2:
                self.buf += self.sock.recv(1 << 20)
            data, self.buf = self.buf[:n], self.buf[n + 2:]
            return data
        if kind == b"*":
            return [self.reply() for _ in range(int(rest))]
        raise RuntimeError(f"unexpected reply {line!r}")

    def call(self, *cmd: bytes) -> Any:
        self.send(list(cmd))
        return self.reply()

    def close(self) -> None:
        self.sock.close()


def _load(c: _Conn, keys: int, elements: int, per_key: int) -> None:
    value = b"v" * 100
    batch = 1000
    for base in range(0, keys, batch):
        c.send(*[[b"MSET", *[x for j in range(base, min(base + batch, keys))
                              for x in (b"key:%d" % j, value)]]])
        c.reply()
    colls = max(1, elements // per_key)
    chunk = 500
    for k in range(colls):
        cmds = []
        for start in range(0, per_key, chunk):
            n = min(chunk, per_key - start)
            if k % 2 == 0:
                cmds.append([b"RPUSH", b"list:%d" % k, *[b"e%09d" % (start + i) for i in range(n)]])
            else:
                cmds.append([b"HSET", b"hash:%d" % k, *[x for i in range(n)
                                                          for x in (b"f%d" % (start + i), b"v%09d" % i)]])
        c.send(*cmds)
        for _ in cmds:
            c.reply()


def _in_progress(c: _Conn) -> bool:
    info = c.call(b"INFO", b"persistence")
    return b"rdb_bgsave_in_progress:1" in info


def _fork_usec(c: _Conn) -> int:
    for line in c.call(b"INFO", b"stats").split(b"\r\n"):
        if line.startswith(b"latest_fork_usec:"):
            return int(line.split(b":")[1])
    return 0


class _Prober(threading.Thread):
    def __init__(self, port: int) -> None:
        super().__init__(daemon=True)
        self.conn = _Conn(port)
        self.rtts: list[tuple[float, float]] = []  # (sent at, round trip)
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            t0 = time.perf_counter()
            self.conn.call(b"PING")
            self.rtts.append((t0, time.perf_counter() - t0))

    def worst(self, since: float, until: float) -> tuple[float, int]:
        got = [rtt for t0, rtt in self.rtts if since <= t0 <= until]
        return (max(got) if got else 0.0), len(got)

    def worst_at(self, since: float, until: float) -> float:
        """When the worst PING of the window was sent, in seconds after `since`."""
        got = [(rtt, t0) for t0, rtt in self.rtts if since <= t0 <= until]
        return max(got)[1] - since if got else 0.0


def _private_dirty(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Private_Dirty:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


class _Sampler(threading.Thread):
    """Rule 2b."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.stop = threading.Event()
        self.parent = self.child = self.dirty = 0

    def run(self) -> None:
        while not self.stop.wait(0.05):
            try:
                self.parent = max(self.parent, rss_bytes(self.pid))
                for kid in children(self.pid):
                    self.child = max(self.child, rss_bytes(kid))
                    self.dirty = max(self.dirty, _private_dirty(kid))
            except (OSError, RuntimeError):
                continue  # the child ended between the listing and the read


def _cow_size(c: _Conn) -> int:
    for line in c.call(b"INFO", b"persistence").split(b"\r\n"):
        if line.startswith(b"rdb_last_cow_size:"):
            return int(line.split(b":")[1])
    return 0


def run(proc: Proc, keys: int, elements: int, per_key: int = 50_000, log: Any = print) -> Result:
    port = proc.resp_port
    assert port is not None
    c = _Conn(port)
    t0 = time.perf_counter()
    _load(c, keys, elements, per_key)
    load_s = time.perf_counter() - t0
    while _in_progress(c):  # a save the load itself started (none expected)
        time.sleep(0.05)
    log(f"  {proc.name}: loaded {keys} keys + {elements} elements in {load_s:.1f}s, "
        f"rss {proc.rss() / 1e6:.0f} MB")
    prober = _Prober(port)
    prober.start()
    time.sleep(0.5)
    sampler = _Sampler(proc.pid)
    sampler.start()
    start = time.perf_counter()
    c.call(b"BGSAVE")
    time.sleep(0.001)
    while _in_progress(c) or time.perf_counter() - start < 0.05:
        time.sleep(0.002)
    end = time.perf_counter()
    sampler.stop.set()
    sampler.join()
    time.sleep(0.2)
    quiet_start = time.perf_counter()
    time.sleep(max(end - start, 0.5))
    quiet_end = time.perf_counter()
    prober.stop.set()
    prober.join()
    stall, pings = prober.worst(start, end)
    floor, _ = prober.worst(quiet_start, quiet_end)
    res = Result(keys, elements, proc.rss() / 1e6, load_s, end - start, stall * 1e3, floor * 1e3,
                 pings, _fork_usec(c), sampler.parent / 1e6, sampler.child / 1e6,
                 sampler.dirty / 1e6, _cow_size(c) / 1e6, prober.worst_at(start, end))
    prober.conn.close()
    c.close()
    log(f"  {proc.name}: save {res.save_s:.2f}s, worst PING {res.stall_ms:.1f} ms during "
        f"(at +{res.worst_at_s:.2f}s) "
        f"({res.pings} PINGs), {res.floor_ms:.1f} ms without, fork {res.fork_usec} us; "
        f"during the save: server RSS peak {res.parent_peak_mb:.0f} MB, child RSS peak "
        f"{res.child_peak_mb:.0f} MB, child copied {res.child_dirty_mb:.0f} MB "
        f"(reported cow {res.cow_mb:.0f} MB)")
    return res


def compare(keys: int, elements: int, log: Any = print,
            procs: Procs | None = None, extra: tuple[str, ...] = ()) -> dict[str, Result]:
    """Rules 1-3 on a fresh redis-server, then a fresh topicsrv; `procs`: the registry the
    servers are recorded in (the caller's, as `python -m bench` does), else a new one."""
    own = procs is None
    reg = procs if procs is not None else Procs()
    out: dict[str, Result] = {}
    try:
        red = reg.start_redis()
        out["redis-server"] = run(red, keys, elements, log=log)
        reg.stop(red)
        top = reg.start_topicsrv(extra=("--checkpoint-interval-ms", "3600000", *extra))
        out["topicsrv"] = run(top, keys, elements, log=log)
        reg.stop(top)
    finally:
        if own:
            reg.stop_all()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--elements", type=int, default=10_000_000)
    ap.add_argument("--topicsrv-args", default="",
                    help="extra serve flags for topicsrv, e.g. '--checkpoint-fork no'")
    args = ap.parse_args()
    load0 = os.getloadavg()
    res = compare(args.keys, args.elements, extra=tuple(args.topicsrv_args.split()))
    load1 = os.getloadavg()
    red, top = res["redis-server"], res["topicsrv"]
    ratio = top.stall_ms / red.stall_ms if red.stall_ms else float("inf")
    print(f"checkpoint stall: topicsrv {top.stall_ms:.1f} ms vs redis-server BGSAVE "
          f"{red.stall_ms:.1f} ms = {ratio:.2f}x (target <= 2x); floors {top.floor_ms:.1f} / "
          f"{red.floor_ms:.1f} ms; rss {top.rss_mb:.0f} / {red.rss_mb:.0f} MB; load average "
          f"{load0[0]:.2f} before, {load1[0]:.2f} after (1 min)")


if __name__ == "__main__":
    main()
