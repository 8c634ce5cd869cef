"""Router workloads against one topicsrv process (no Redis peer): how fast records go through
routers, and what routers cost the source's writers.

Rule 1 (forwarding): a source is filled with N records of 100 bytes first (no router yet);
then `fanout` routers are created at once. A new router starts at the source's earliest seq,
so each forwards the whole retained log (created 0.2 s after the last fill write, so that
no writer counts as active and the workers run unpaced); the clock runs from the first PUT to the moment every
router reports `forwarded == N` and `lag == 0` (polled every 5 ms). The rate is N / elapsed:
source records through every router per second (`copies_per_s` = fanout x N / elapsed).
Rule 2 (source writes): N records are POSTed in batches of 1000 x 100 B to a topic with no
router and to a topic with 4 routers (4 dests), alternately, `rounds` times each; the best
round of each counts (the machine is shared). The clock stops at the last write's ack, not
when forwarding ends: routers are off the ack path, and this measures how much their work
in the same process slows the writers (with the default --forward-share, the workers take at
most 10% of the loop while clients write and catch up afterwards).
Rule 3: every workload checks what it measured (every router forwarded all N; every dest
holds N records) and raises otherwise, so a fast but wrong run never shows as a number.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from bench.httpbench import Http, ab_main, post_batches
from bench.respbench import Measure

BATCH = 1000
QUIET_S = 0.2


def _wait_forwarded(h: Http, names: list[str], records: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        states = [h.ok("GET", f"/v0/routers/{n}") for n in names]
        if all(s["forwarded"] >= records and s["lag"] == 0 for s in states):
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"routers did not catch up in {timeout:.0f} s: "
                               f"{[(s['name'], s['forwarded'], s['status']) for s in states]}")
        time.sleep(0.005)


def _check_dests(h: Http, dests: list[str], records: int) -> None:
    for d in dests:
        count = h.ok("GET", f"/v0/topics/{d}?touch=false")["count"]
        if count != records:
            raise RuntimeError(f"dest {d} holds {count} records, not {records}")


def _unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def forwarding(port: int, records: int, fanout: int, timeout: float = 600.0) -> Measure:
    """Rule 1: records/s through `fanout` routers created over a filled source."""
    h = Http(port)
    src = _unique(f"fwd{fanout}")
    h.ok("PUT", f"/v0/topics/{src}", {"cap_records": records})
    post_batches(h, src, records, BATCH)
    time.sleep(QUIET_S)  # Rule 1: no writer is active (tasks/routers.py Rule 6 would pace them)
    names = [f"{src}-r{i}" for i in range(fanout)]
    dests = [f"{src}.d{i}" for i in range(fanout)]
    t0 = time.perf_counter()
    for name, dest in zip(names, dests, strict=True):
        h.ok("PUT", f"/v0/routers/{name}", {"source": src, "dest": dest})
    _wait_forwarded(h, names, records, timeout)
    elapsed = time.perf_counter() - t0
    _check_dests(h, dests, records)
    for name in names:
        h.ok("DELETE", f"/v0/routers/{name}")
    for t in (src, *dests):
        h.ok("DELETE", f"/v0/topics/{t}")
    h.close()
    return Measure(fanout * records / elapsed, records / elapsed, elapsed, fanout)


def write_with_routers(port: int, records: int, routers: int) -> tuple[Measure, float]:
    """Rule 2, one round: (the writers' Measure, seconds until the routers caught up too)."""
    h = Http(port)
    src = _unique(f"w{routers}")
    h.ok("PUT", f"/v0/topics/{src}", {})
    names = [f"{src}-r{i}" for i in range(routers)]
    dests = [f"{src}.d{i}" for i in range(routers)]
    for name, dest in zip(names, dests, strict=True):
        h.ok("PUT", f"/v0/routers/{name}", {"source": src, "dest": dest})
    t0 = time.perf_counter()
    elapsed = post_batches(h, src, records, BATCH)
    if routers:
        _wait_forwarded(h, names, records, 600.0)
        _check_dests(h, dests, records)
    drained = time.perf_counter() - t0
    for name in names:
        h.ok("DELETE", f"/v0/routers/{name}")
    for t in (src, *dests):
        h.ok("DELETE", f"/v0/topics/{t}")
    h.close()
    calls = (records + BATCH - 1) // BATCH
    return Measure(calls / elapsed, records / elapsed, elapsed, calls), drained


def write_ratio(port: int, records: int, rounds: int = 2) -> dict[str, Any]:
    """Rule 2: the best of `rounds` alternating runs with 0 and with 4 routers."""
    best: dict[int, Measure] = {}
    drained: dict[int, float] = {}
    for _ in range(rounds):
        for n in (0, 4):
            m, d = write_with_routers(port, records, n)
            if n not in best or m.records_per_s > best[n].records_per_s:
                best[n], drained[n] = m, d
    return {"none": best[0], "four": best[4], "ratio": best[4].records_per_s / best[0].records_per_s,
            "four_drained_s": drained[4]}


if __name__ == "__main__":  # `python -m bench.routerbench [--against TREE]`: httpbench.ab_main
    raise SystemExit(ab_main("python -m bench.routerbench", {
        "fwd1": ("router_fwd", lambda port, n: forwarding(port, n, 1)),
        "fwd4": ("router_fwd", lambda port, n: forwarding(port, n, 4)),
    }))
