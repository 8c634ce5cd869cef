"""Lists and hashes (issue 35): LPUSH/RPOP/HSET/HGET throughput, BRPOP consumers fed by LPUSH
producers, and resident memory per element, the same workloads on redis-server and topicsrv.

Rule 1: the throughput rows use the string rows' client and key distribution
(bench/stringbench.py Rule 2, `stringbench.keyed`): redis-benchmark `-c 50 -r KEYS`, the
100-byte value, P1 and P16. Both servers are loaded first with the same keys in the
`__rand_int__` form: `list:<12 digits>` holding `PRELOAD` elements each (so that every RPOP
of the run finds an element: the pops of both RPOP rows average 6 a list against 10 + the
LPUSH rows' 6 there) and `hash:<12 digits>` holding the field `f` (100 B) and nine 10-byte
fields (a small hash, as an object mapper writes).
Rule 2: the durability pairing is the string rows' (bench/procs.py Rule 3; docs/performance.md
"String keys"): topicsrv with its default `--keyspace-durability disk` (every change
journaled to the WAL, no fsync per write) against redis-server with persistence off, so
topicsrv does the journal's work on top of redis-server's.
Rule 3: BRPOP: one redis-benchmark with `-c consumers` clients sending `BRPOP q 0` (each its
next one when the last is answered) and, once `INFO clients` shows them all blocked, one with
`-c producers` clients sending `LPUSH q <100 B>`, `elements` requests each. The rate is
`elements` over the time from the producers' start until the consumers' last reply; `q` is
empty afterwards (every element delivered once).
Rule 4: memory per element: a fresh server's RSS growth (bench/memory.py Rule 1) over one
fill, divided by the elements: one list of N 10-byte elements (RPUSH of 1000 a command), or
H hashes x 10 fields of 10-byte values (one HSET of a whole hash a command); redis-py
pipelines of 100 commands; LLEN / DBSIZE checked afterwards, redis-server's own
`used_memory` growth reported beside.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Callable
from typing import Any

from bench.memory import settle_rss
from bench.procs import Proc
from bench.respbench import Measure, client, redis_benchmark
from bench.stringbench import VALUE, keyed

PRELOAD = 10
KEYS = 100_000  # `-r` of the throughput rows in `make bench` (sizes.py str_keys)
SMALL = b"v" * 10
ROWS: dict[str, list[str]] = {  # Rule 1: the throughput rows, in the order they run
    "LPUSH": ["LPUSH", "list:__rand_int__", VALUE.decode()],
    "RPOP": ["RPOP", "list:__rand_int__"],
    "HSET": ["HSET", "hash:__rand_int__", "f", VALUE.decode()],
    "HGET": ["HGET", "hash:__rand_int__", "f"],
}


def hash_fields(first: bytes) -> dict[bytes, bytes]:
    return {b"f": first, **{b"f%d" % j: SMALL for j in range(1, 10)}}


def load(port: int, keys: int) -> float:
    """Rule 1's keys on one server, in pipelines of 1000 commands; returns seconds."""

    def queue(p: Any, i: int) -> None:
        p.rpush(b"list:%012d" % i, *[VALUE] * PRELOAD)
        p.hset(b"hash:%012d" % i, mapping=hash_fields(VALUE))

    return load_keys(port, keys, queue)


def load_keys(port: int, keys: int, queue: Callable[[Any, int], None], per: int = 2) -> float:
    """`queue(pipeline, i)` for i < keys, pipelines of 1000 `i`, each writing `per` keys (DBSIZE
    checked afterwards); returns seconds. Also bench/zsetbench.py's and bench/writefloor.py's."""
    r = client(port)
    t0 = time.perf_counter()
    for start in range(0, keys, 1000):
        p = r.pipeline(transaction=False)
        for i in range(start, min(keys, start + 1000)):
            queue(p, i)
        p.execute()
    seconds = time.perf_counter() - t0
    size = r.dbsize()
    r.close()
    if size != per * keys:
        raise RuntimeError(f"DBSIZE = {size} after loading, expected {per * keys}")
    return seconds


def throughput(port: int, name: str, requests: int, pipeline: int, keys: int) -> Measure:
    return keyed(port, ROWS[name], requests=requests, pipeline=pipeline, keys=keys)


def _blocked(port: int) -> int:
    r = client(port)
    try:
        return int(r.info("clients")["blocked_clients"])
    finally:
        r.close()


def brpop(port: int, elements: int, consumers: int = 20, producers: int = 20,
          timeout: float = 600.0) -> Measure:
    """Rule 3; `ops` and the rates count elements delivered."""
    exe = shutil.which("redis-benchmark")
    if exe is None:
        raise RuntimeError("redis-benchmark is not installed (run scripts/ensure-tools.sh)")
    base = [exe, "-h", "127.0.0.1", "-p", str(port), "-n", str(elements), "--csv"]
    cons = subprocess.Popen([*base, "-c", str(consumers), "BRPOP", "q", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while _blocked(port) < consumers:
            if cons.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{consumers} BRPOP consumers not blocked: "
                                   f"{cons.stderr.read().decode()[-300:] if cons.stderr else ''}")
            time.sleep(0.02)
        t0 = time.perf_counter()
        redis_benchmark(port, ["LPUSH", "q", VALUE.decode()], requests=elements,
                               clients=producers, timeout=timeout)
        cons.wait(timeout)
        seconds = time.perf_counter() - t0
    finally:
        if cons.poll() is None:
            cons.kill()
            cons.wait()
    if cons.returncode != 0:
        raise RuntimeError(f"BRPOP redis-benchmark exited {cons.returncode}")
    r = client(port)
    left = r.llen("q")
    r.close()
    if left:
        raise RuntimeError(f"{left} elements left in q after {elements} BRPOPs")
    return Measure(elements / seconds, elements / seconds, seconds, elements)


def fill_memory(proc: Proc, fill: Callable[[Any], None], count: Callable[[Any], int],
                elements: int) -> dict[str, Any]:
    """Rule 4's measurement around one fill: `fill(pipeline)` queues the commands (executing
    the pipeline whenever it holds 100), `count(client)` reads back how many elements the
    server holds, which must be `elements`; also bench/zsetbench.py's."""
    assert proc.resp_port is not None
    r = client(proc.resp_port)
    redis = proc.name == "redis-server"
    used0 = r.info("memory")["used_memory"] if redis else 0
    before = settle_rss(proc)
    t0 = time.perf_counter()
    p = r.pipeline(transaction=False)
    fill(p)
    p.execute()
    seconds = time.perf_counter() - t0
    got = count(r)
    if got != elements:
        raise RuntimeError(f"{proc.name}: {got} elements after the fill, expected {elements}")
    after = settle_rss(proc)
    out = {"elements": elements, "rss_before": before, "rss_after": after,
           "rss_per_element": (after - before) / elements, "fill_seconds": seconds}
    if redis:
        out["used_memory_per_element"] = (r.info("memory")["used_memory"] - used0) / elements
    r.close()
    return out


def memory(proc: Proc, kind: str, n: int) -> dict[str, Any]:
    """Rule 4 on a fresh server: `kind` "list" (n elements) or "hash" (n hashes x 10 fields);
    the per-element figures are per list element or per hash field."""

    def fill(p: Any) -> None:
        if kind == "list":
            for start in range(0, n, 1000):
                p.rpush("biglist", *[b"e%09d" % i for i in range(start, min(n, start + 1000))])
                if len(p) == 100:
                    p.execute()
            return
        for i in range(n):
            p.hset(b"h:%09d" % i, mapping=hash_fields(SMALL))
            if len(p) == 100:
                p.execute()

    if kind == "list":
        return fill_memory(proc, fill, lambda r: r.llen("biglist"), n)
    return fill_memory(proc, fill, lambda r: 10 * r.dbsize(), 10 * n)
