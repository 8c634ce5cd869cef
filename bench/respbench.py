"""RESP workloads, run identically against redis-server and topicsrv.

Rule 1: the same client binary / library and the same arguments drive both servers; only the
port differs. A workload returns a `Measure` (ops/s and records/s), never a ratio: ratios
are computed by the caller from two measures of the same run.
Rule 2: raw server speed comes from `redis-benchmark` (C client, `--csv`), what Python users
see comes from redis-py (hiredis parser when installed).
Rule 3: a workload that fails on one server (e.g. a command it does not implement yet) is
reported as an error string for that cell, it does not abort the run.
Rule 4 (who bounds a row): `redis_benchmark` also returns the CPU the client spent
(`client_cpu_s`, its rusage once it was waited for); with the server's own CPU over the same
run, `Measure.busy` says how much of a core each side kept busy. At P1 on two cores one of
them is the bottleneck: a side near 100% bounds the row, and the other waits on it.
"""

from __future__ import annotations

import csv
import io
import resource
import shutil
import subprocess
import time
from dataclasses import dataclass
from typing import Any

import redis

VALUE = b"x" * 100  # the 100-byte record payload used everywhere


@dataclass(frozen=True, slots=True)
class Measure:
    ops_per_s: float
    records_per_s: float
    seconds: float
    ops: int
    p50_ms: float | None = None
    p99_ms: float | None = None
    client_cpu_s: float | None = None  # the client process's user + system CPU (Rule 4)

    def busy(self, cpu_s: float) -> float:
        """`cpu_s` (CPU seconds spent during the run) as a share of one core over the run's
        wall time: 1.0 = one core busy all along (Rule 4)."""
        return cpu_s / self.seconds if self.seconds > 0 else 0.0

    def busy_text(self, server_cpu_s: float) -> str:
        """Rule 4 in words: `server 68%, client 99%` (the client part when it was measured)."""
        text = f"server {self.busy(server_cpu_s):.0%}"
        if self.client_cpu_s is not None:
            text += f", client {self.busy(self.client_cpu_s):.0%}"
        return text


def _children_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def redis_benchmark(port: int, command: list[str], *, requests: int, clients: int = 50,
                    pipeline: int = 1, records_per_op: int = 1, timeout: float = 600.0,
                    extra: tuple[str, ...] = ()) -> Measure:
    """Run `redis-benchmark --csv` with one custom command; parse its single result row.
    `extra`: more redis-benchmark options (e.g. `-r N` for `__rand_int__` keys)."""
    exe = shutil.which("redis-benchmark")
    if exe is None:
        raise RuntimeError("redis-benchmark is not installed (run scripts/ensure-tools.sh)")
    args = [exe, "-h", "127.0.0.1", "-p", str(port), "-c", str(clients), "-n", str(requests),
            "-P", str(pipeline), "--csv", *extra, *command]
    c0, t0 = _children_cpu(), time.perf_counter()
    out = subprocess.run(args, capture_output=True, timeout=timeout, check=False)
    elapsed = time.perf_counter() - t0
    client_cpu = _children_cpu() - c0  # the run waited for it: it is counted now
    rows = [r for r in csv.reader(io.StringIO(out.stdout.decode(errors="replace"))) if r]
    data = [r for r in rows if r[0] != "test"]
    if out.returncode != 0 or not data:
        err = (out.stderr or out.stdout).decode(errors="replace").strip().splitlines()
        raise RuntimeError(f"redis-benchmark failed: {err[-1] if err else out.returncode}")
    header = next((r for r in rows if r[0] == "test"), None)
    row = dict(zip(header, data[-1], strict=False)) if header else {"rps": data[-1][1]}
    rps = float(row["rps"])
    p50 = float(row["p50_latency_ms"]) if "p50_latency_ms" in row else None
    p99 = float(row["p99_latency_ms"]) if "p99_latency_ms" in row else None
    return Measure(rps, rps * records_per_op, elapsed, requests, p50, p99, client_cpu)


def client(port: int) -> redis.Redis:
    return redis.Redis(host="127.0.0.1", port=port, socket_timeout=120)


def load_stream(port: int, key: str, entries: int, value: bytes = VALUE) -> float:
    """Append `entries` 100-byte entries to `key` with redis-benchmark (-P 16); returns seconds."""
    t0 = time.perf_counter()
    redis_benchmark(port, ["XADD", key, "*", "f", value.decode()], requests=entries,
                    clients=50, pipeline=16)
    return time.perf_counter() - t0


def id_at(port: int, key: str, position: int, page: int = 1000) -> bytes:
    """The id of the entry at 0-based `position` in `key` (found by paging XRANGE)."""
    r = client(port)
    cursor: Any = b"-"
    seen = 0
    while True:
        batch: Any = r.xrange(key, min=cursor, max="+", count=page)
        if cursor != b"-":
            batch = batch[1:]  # XRANGE is inclusive: drop the entry we resumed from
        if not batch:
            raise RuntimeError(f"{key} has only {seen} entries")
        if seen + len(batch) > position:
            entry_id: bytes = batch[position - seen][0]
            return entry_id
        seen += len(batch)
        cursor = batch[-1][0]


def py_xadd_pipelined(port: int, key: str, records: int, batch: int = 100) -> Measure:
    r = client(port)
    t0 = time.perf_counter()
    done = 0
    while done < records:
        pipe = r.pipeline(transaction=False)
        n = min(batch, records - done)
        for _ in range(n):
            pipe.xadd(key, {b"f": VALUE})
        pipe.execute()
        done += n
    elapsed = time.perf_counter() - t0
    return Measure(done / batch / elapsed, done / elapsed, elapsed, done // batch)


def py_xread_paging(port: int, key: str, entries: int, count: int = 100) -> Measure:
    r = client(port)
    last: Any = "0-0"
    seen = calls = 0
    t0 = time.perf_counter()
    while seen < entries:
        reply: Any = r.xread({key: last}, count=count)
        calls += 1
        if not reply:
            break
        batch = reply[0][1]
        seen += len(batch)
        last = batch[-1][0]
    elapsed = time.perf_counter() - t0
    if seen < entries:
        raise RuntimeError(f"XREAD paging saw {seen} of {entries} entries")
    return Measure(calls / elapsed, seen / elapsed, elapsed, calls)


def py_group_loop(port: int, key: str, entries: int, count: int = 10) -> Measure:
    """XREADGROUP COUNT 10 + XACK until `entries` entries were delivered and acknowledged."""
    r = client(port)
    r.xgroup_create(key, "bench", id="0")
    seen = loops = 0
    t0 = time.perf_counter()
    while seen < entries:
        reply: Any = r.xreadgroup("bench", "c1", {key: ">"}, count=count)
        loops += 1
        if not reply or not reply[0][1]:
            break
        ids = [entry_id for entry_id, _ in reply[0][1]]
        acked = r.xack(key, "bench", *ids)
        if acked != len(ids):
            raise RuntimeError(f"XACK acknowledged {acked} of {len(ids)}")
        seen += len(ids)
    elapsed = time.perf_counter() - t0
    if seen < entries:
        raise RuntimeError(f"XREADGROUP delivered {seen} of {entries} entries")
    return Measure(loops / elapsed, seen / elapsed, elapsed, loops)
