"""String keys (issue 25): GET/SET throughput with redis-benchmark and memory per string key.

Rule 1: both servers get the same keys and values: `KEYS` distinct names `key:<12 digits>`
(redis-benchmark's `__rand_int__` form, so `-r KEYS` GETs hit keys that exist) holding
100-byte values, loaded with redis-py pipelines of 1000 SETs.
Rule 2: throughput rows are redis-benchmark `-c 50` with `-r KEYS` random keys: SET of a
100-byte value and GET, at P1 and P16. The GET/SET P1 target is the PING P1 ratio of the same
run (what one round trip costs here, bench/__main__.py); P16's is 0.5.
Rule 3 (keys created, reported without a target): SET of a 100-byte value to
`new:<12 digits>` names drawn from NEW_KEYS (10^9) at P16, after the rows above: nearly every
SET creates its key, on both servers, so the row shows what making a key costs beside
overwriting one (docs/performance.md, "Keys created").
Rule 4: memory per key is the RSS growth of a fresh server (bench/memory.py Rule 1) over the
load of N keys, divided by N; DBSIZE must be N afterwards.
"""

from __future__ import annotations

import time
from typing import Any

from bench.procs import Proc
from bench.respbench import Measure, client, redis_benchmark

VALUE = b"v" * 100
KEYS = 100_000


def key(i: int) -> bytes:
    return b"key:%012d" % i


def load(port: int, n: int, value: bytes = VALUE) -> float:
    """SET key:<i> value for i < n in pipelines of 1000 (Rule 1); returns seconds."""
    r = client(port)
    t0 = time.perf_counter()
    for start in range(0, n, 1000):
        p = r.pipeline(transaction=False)
        for i in range(start, min(n, start + 1000)):
            p.set(key(i), value)
        p.execute()
    seconds = time.perf_counter() - t0
    r.close()
    return seconds


def keyed(port: int, command: list[str], requests: int, pipeline: int, keys: int = KEYS) -> Measure:
    """Rule 2's client: redis-benchmark -c 50 with `__rand_int__` in `command` ranging over
    `keys` (also the list and hash rows', bench/collbench.py)."""
    return redis_benchmark(port, command, requests=requests, pipeline=pipeline,
                           extra=("-r", str(keys)))


def set_bench(port: int, requests: int, pipeline: int, keys: int = KEYS) -> Measure:
    return keyed(port, ["SET", "key:__rand_int__", VALUE.decode()], requests, pipeline, keys)


def get_bench(port: int, requests: int, pipeline: int, keys: int = KEYS) -> Measure:
    return keyed(port, ["GET", "key:__rand_int__"], requests, pipeline, keys)


NEW_KEYS = 1_000_000_000  # Rule 3 (redis-benchmark's -r is an int)


def new_keys_bench(port: int, requests: int, pipeline: int) -> Measure:
    """Rule 3: a SET that creates its key, nearly every time."""
    return keyed(port, ["SET", "new:__rand_int__", VALUE.decode()], requests, pipeline, NEW_KEYS)


def memory_per_key(proc: Proc, n: int) -> dict[str, Any]:
    """Rule 4, on a fresh server started for this measurement only."""
    assert proc.resp_port is not None
    r = client(proc.resp_port)
    time.sleep(0.5)
    before = proc.rss()
    seconds = load(proc.resp_port, n)
    size = r.dbsize()
    if size != n:
        raise RuntimeError(f"{proc.name}: DBSIZE = {size}, expected {n}")
    time.sleep(0.5)
    after = proc.rss()
    r.close()
    return {"keys": n, "rss_before": before, "rss_after": after,
            "rss_per_key": (after - before) / n, "load_seconds": seconds}
