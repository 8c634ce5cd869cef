"""How long a big MULTI/EXEC freezes the other clients, topicsrv against redis-server (issue 23
item 7).

Rule 1: one client sends `pipeline(transaction=True)` of N `XADD k * f v` (redis-py: MULTI, N
queued XADDs, EXEC in one write); meanwhile another client sends PING after PING, each waiting
for its PONG, and the worst PING round trip while the transaction runs is the stall. EXEC is
atomic on both servers, so the stall is at least the time EXEC runs.
Rule 2: both servers run fresh (bench/procs.py) on the same machine in the same run, one
after the other; the row is the ratio of the worst stalls (topicsrv / redis-server), the
target at most 3 (issue 23). A latency ratio belongs here, never in `make test` (STYLE.md 11).

    .venv/bin/python -m bench.execstall [N] [ROUNDS] [TREE]

TREE runs topicsrv from another source tree (e.g. a `git worktree` of an older commit), to
compare before and after on the same machine.
"""

from __future__ import annotations

import sys
import threading
import time
from functools import partial
from pathlib import Path

import redis

from bench.procs import Procs, install_signal_handlers

TARGET = 3.0


def stall(port: int, n: int) -> tuple[float, float]:
    """(worst PING round trip while the transaction ran, the transaction's own time), s."""
    big = redis.Redis(port=port, socket_timeout=120)
    pinger = redis.Redis(port=port, socket_timeout=120)
    big.delete("k")
    pinger.ping()
    done = threading.Event()
    worst = [0.0]

    def ping() -> None:
        while not done.is_set():
            t0 = time.perf_counter()
            pinger.ping()
            worst[0] = max(worst[0], time.perf_counter() - t0)

    thread = threading.Thread(target=ping)
    pipe = big.pipeline(transaction=True)
    for _ in range(n):
        pipe.xadd("k", {"f": "v"})
    thread.start()
    t0 = time.perf_counter()
    replies = pipe.execute()
    took = time.perf_counter() - t0
    done.set()
    thread.join()
    assert len(replies) == n and big.xlen("k") == n
    big.close()
    pinger.close()
    return worst[0], took


def main(argv: list[str]) -> int:
    n = int(argv[0]) if argv else 300_000
    rounds = int(argv[1]) if len(argv) > 1 else 3
    tree = Path(argv[2]).resolve() if len(argv) > 2 else None
    install_signal_handlers()
    procs = Procs()
    try:
        results: dict[str, list[tuple[float, float]]] = {}
        for name, start in (("redis-server", procs.start_redis),
                            ("topicsrv", partial(procs.start_topicsrv, cwd=tree))):
            proc = start()
            assert proc.resp_port is not None
            results[name] = [stall(proc.resp_port, n) for _ in range(rounds)]
            procs.stop(proc)
        for name, rows in results.items():
            worst = min(r[0] for r in rows)  # the best of the rounds: the least noisy
            print(f"{name:13s} EXEC of {n} XADDs: worst PING stall {worst * 1000:8.1f} ms "
                  f"(rounds: {', '.join(f'{r[0] * 1000:.0f}' for r in rows)} ms; "
                  f"pipeline {min(r[1] for r in rows):.2f} s)")
        ratio = min(r[0] for r in results["topicsrv"]) / min(r[0] for r in results["redis-server"])
        print(f"ratio topicsrv / redis-server: {ratio:.2f} (target <= {TARGET})")
        return 0 if ratio <= TARGET else 1
    finally:
        procs.stop_all()


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
