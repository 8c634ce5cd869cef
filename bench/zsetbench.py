"""Sets and sorted sets (issue 36): SADD/SISMEMBER/ZADD/ZRANGEBYSCORE/ZPOPMIN throughput,
resident memory per member, and RQ jobs/s, the same workloads on redis-server and topicsrv.

Rule 1: the throughput rows use the list and hash rows' client and key distribution
(bench/collbench.py Rule 1, `stringbench.keyed`: redis-benchmark `-c 50 -r KEYS`, P1 and
P16). Both servers are loaded first with the same keys in the `__rand_int__` form:
`set:<12 digits>` holding the member `m` and nine 10-byte members (so every SISMEMBER of the
run hits), and `zset:<12 digits>` holding `ZPRELOAD` 10-byte members scored 0..15 (so every
ZRANGEBYSCORE ... LIMIT 0 10 returns 10 members, and the pops of both ZPOPMIN rows, 1.2 a
key in quick mode and 6 in full, average well under the 16 + the ZADD rows' adds there).
SADD and ZADD add `m:__rand_int__` (a random member of the key's `-r` range, so mostly new
members) with a random score. The durability pairing is the list and hash rows'
(collbench Rule 2): topicsrv `--keyspace-durability disk` against redis-server with
persistence off.
Rule 2: memory per member: a fresh server's RSS growth (bench/memory.py Rule 1) over one
fill, divided by the members: one sorted set of N members of 10 bytes scored by their index
(ZADD of 1000 members a command), S sets x 10 members of 10 bytes, or S sets x 10 integers
(one SADD of a whole set a command); redis-py pipelines of 100 commands; ZCARD / DBSIZE checked afterwards,
redis-server's own `used_memory` growth reported beside.
Rule 3: RQ jobs/s: on a fresh server of each kind (topicsrv `--keyspace-durability fsync`,
redis-server `--appendonly yes --appendfsync always`: every acknowledged write on disk on
both), `jobs` `operator.mul` jobs are enqueued (timed apart), then one `rq.SimpleWorker`
burst on this process runs them all; the rate is jobs over the burst's wall time. Afterwards
the queue must be empty and every job in the finished registry with its result. The
worker's signal handlers (it installs SIGINT/SIGTERM ones) are put back after the burst, so
bench/procs.py Rule 2 still holds.
"""

from __future__ import annotations

import operator
import signal
import time
from typing import Any

from bench.collbench import fill_memory, load_keys
from bench.procs import Proc
from bench.respbench import Measure, client
from bench.stringbench import keyed

ZPRELOAD = 16
SMALL = b"v" * 10
ROWS: dict[str, list[str]] = {  # Rule 1: the throughput rows, in the order they run
    "SADD": ["SADD", "set:__rand_int__", "m:__rand_int__"],
    "SISMEMBER": ["SISMEMBER", "set:__rand_int__", "m"],
    "ZADD": ["ZADD", "zset:__rand_int__", "__rand_int__", "m:__rand_int__"],
    "ZRANGEBYSCORE": ["ZRANGEBYSCORE", "zset:__rand_int__", "-inf", "+inf", "LIMIT", "0", "10"],
    "ZPOPMIN": ["ZPOPMIN", "zset:__rand_int__"],
}


def set_members(i: int | None = None) -> list[bytes]:
    """Rule 1's preloaded set (`i` None: `m` and nine 10-byte members) or set `i` of Rule 2's
    fill (ten 10-byte members of its own, not integers: `a<i>` ... `j<i>`)."""
    if i is None:
        return [b"m", *(b"m%09d" % j for j in range(1, 10))]
    return [b"%c%09d" % (97 + j, i) for j in range(10)]


def int_members(i: int) -> list[bytes]:
    """Set `i` of Rule 2's integer fill: ten ids of its own, 10 * i ... 10 * i + 9 (an intset
    on both servers; 32-bit integers past the first 3,276 sets)."""
    return [b"%d" % (10 * i + j) for j in range(10)]


def load(port: int, keys: int) -> float:
    """Rule 1's keys on one server, in pipelines of 1000 commands; returns seconds."""
    zset = {b"z%09d" % j: float(j) for j in range(ZPRELOAD)}

    def queue(p: Any, i: int) -> None:
        p.sadd(b"set:%012d" % i, *set_members())
        p.zadd(b"zset:%012d" % i, zset)

    return load_keys(port, keys, queue)


def throughput(port: int, name: str, requests: int, pipeline: int, keys: int) -> Measure:
    return keyed(port, ROWS[name], requests=requests, pipeline=pipeline, keys=keys)


def memory(proc: Proc, kind: str, n: int) -> dict[str, Any]:
    """Rule 2 on a fresh server: `kind` "zset" (one sorted set of n members), "set" (n sets
    x 10 members) or "intset" (n sets x 10 integers); the per-element figures are per
    member."""

    def fill(p: Any) -> None:
        if kind == "zset":
            for start in range(0, n, 1000):
                p.zadd("bigzset", {b"e%09d" % i: float(i) for i in range(start, min(n, start + 1000))})
                if len(p) == 100:
                    p.execute()
            return
        members = int_members if kind == "intset" else set_members
        for i in range(n):
            p.sadd(b"s:%09d" % i, *members(i))
            if len(p) == 100:
                p.execute()

    if kind == "zset":
        return fill_memory(proc, fill, lambda r: r.zcard("bigzset"), n)
    return fill_memory(proc, fill, lambda r: 10 * r.dbsize(), 10 * n)


def rq_jobs(port: int, jobs: int) -> dict[str, Any]:
    """Rule 3: the burst's jobs/s, and the enqueueing's beside it."""
    import rq  # a dev dependency (pyproject's dev extras)

    r = client(port)
    try:
        q = rq.Queue("bench", connection=r)
        t0 = time.perf_counter()
        enqueued = [q.enqueue(operator.mul, i, 3) for i in range(jobs)]
        enqueue_s = time.perf_counter() - t0
        saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGALRM)}
        try:
            worker = rq.SimpleWorker([q], connection=r)
            t0 = time.perf_counter()
            worker.work(burst=True, logging_level="ERROR")
            seconds = time.perf_counter() - t0
        finally:
            for s, handler in saved.items():
                signal.signal(s, handler)
        finished = set(q.finished_job_registry.get_job_ids())
        if q.count or len(finished) != jobs:
            raise RuntimeError(f"after the burst: {q.count} queued, {len(finished)} of {jobs} "
                               "finished")
        for i in (0, jobs - 1):
            job = enqueued[i]
            job.refresh()
            if job.return_value() != i * 3:
                raise RuntimeError(f"job {i} returned {job.return_value()!r}")
    finally:
        r.close()
    return {"jobs": jobs, "jobs_per_s": jobs / seconds, "seconds": seconds,
            "enqueue_per_s": jobs / enqueue_s}
