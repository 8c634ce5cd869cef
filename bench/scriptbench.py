"""Lua scripting (issue 27): EVALSHA of a small script, one GET and one INCR, at P1 and P16.

Rule 1: the script is loaded with SCRIPT LOAD on each server; both must answer the same SHA1
(the script's text is the same), which `load` checks.
Rule 2: redis-benchmark `-c 50 -r KEYS` runs `EVALSHA <sha> 1 n:__rand_int__`: the GET and
the INCR touch one key of at most KEYS counters, created by the first INCR.
Rule 3 (alternation): `rounds` rounds on the same pair, redis-server and topicsrv back to
back, which one goes first alternating between rounds; the row is the median of the
per-round ratios (each round's ratio is kept for the report).
Rule 4: after the runs, the counters on both servers sum to the number of EVALSHAs made
(`total`): a script that failed would leave a smaller sum, so errors cannot pass for speed.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass, field

from bench.respbench import Measure, client, redis_benchmark

SCRIPT = "redis.call('GET', KEYS[1]) return redis.call('INCR', KEYS[1])"
KEYS = 10_000


def load(port: int) -> str:
    """SCRIPT LOAD (Rule 1); returns the SHA1."""
    r = client(port)
    sha = r.script_load(SCRIPT)
    r.close()
    return str(sha)


def evalsha_bench(port: int, sha: str, requests: int, pipeline: int, keys: int = KEYS) -> Measure:
    return redis_benchmark(port, ["EVALSHA", sha, "1", "n:__rand_int__"], requests=requests,
                           pipeline=pipeline, extra=("-r", str(keys)))


def total(port: int) -> int:
    """The sum of the counters (Rule 4)."""
    r = client(port)
    n = 0
    for key in r.scan_iter(match="n:*", count=1000):
        n += int(r.get(key) or 0)
    r.close()
    return n


@dataclass
class Rounds:
    redis: list[float] = field(default_factory=list)
    topicsrv: list[float] = field(default_factory=list)

    def ratios(self) -> list[float]:
        return [t / r for r, t in zip(self.redis, self.topicsrv, strict=True)]

    def median(self) -> tuple[float, float]:
        """(redis ops/s, topicsrv ops/s): the redis median and it times the median ratio."""
        red = statistics.median(self.redis)
        return red, red * statistics.median(self.ratios())


def run(redis_port: int, top_port: int, rounds: int, requests: dict[int, int],
        log: Callable[[str], None] = lambda _: None) -> dict[int, Rounds]:
    """Rules 1-4 for each pipeline depth in `requests` (depth -> EVALSHAs per run)."""
    sha = load(redis_port)
    if load(top_port) != sha:
        raise RuntimeError("SCRIPT LOAD answered different SHA1s")
    out = {p: Rounds() for p in requests}
    made = 0
    for i in range(rounds):
        for p, n in requests.items():
            order = [(redis_port, out[p].redis), (top_port, out[p].topicsrv)]
            for port, cells in order if i % 2 == 0 else reversed(order):
                log(f"EVALSHA P{p} round {i + 1} on port {port}")
                cells.append(evalsha_bench(port, sha, n, p).ops_per_s)
            made += n
    for port in (redis_port, top_port):
        got = total(port)
        if got != made:
            raise RuntimeError(f"port {port}: counters sum to {got}, {made} EVALSHAs were sent")
    return out
