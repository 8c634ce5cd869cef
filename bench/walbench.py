"""`python -m bench.walbench`: fsync-class writes by 64 clients against real servers, for
`--wal-shards` 1, 2, 4, 8 (issue 16), next to redis-server with `appendfsync always`.

Rule 1: every cell runs on a fresh server: topicsrv with an empty temp data dir and
`--wal-shards N`, its topics created `DURABILITY fsync` with TOPIC.CREATE before the load;
redis-server with `--appendonly yes --appendfsync always` (the reference: it acknowledges a
write only after its fsync too). Both on 127.0.0.1, free ports, stopped by pid (bench/procs.py).
Rule 2: the client is `redis-benchmark -c 64 -P 1` (C, one XADD in flight per client, 100-byte
value), identical for both servers. Workloads: `hot` = one stream (one WAL shard does all
the work whatever N is); `spread` = 64 streams `w:000000000000`..`w:000000000063`
(`-r 64 __rand_int__`), spread over the shards by the hash of their names.
Rule 3: the configurations run in a different order each round (round r starts at the r-th),
so the drift of a shared machine falls on all of them alike; the report gives every round's
value and the median; ratios are topicsrv / redis-server of the same round.
Rule 4: `--io to_thread` adds configurations `N:to_thread` (env TOPICS_WAL_IO=to_thread: the
WAL's blocking calls through `trio.to_thread.run_sync`, the path before issue 16) for A/B
against the shipped per-shard I/O thread.
Rule 5: besides the client's figures (ops/s = records/s, p50/p99 ack latency), each topicsrv
cell reports the server's CPU use (share of one core, from /proc/<pid>/stat) and records per
fdatasync (from GET /v0/status), which say whether it is CPU-bound or sync-bound.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from bench import respbench
from bench.procs import Proc, Procs, install_signal_handlers

CLIENTS = 64
VALUE = "x" * 100
WORKLOADS = {
    "hot": ["XADD", "hot", "*", "f", VALUE],
    "spread": ["XADD", "w:__rand_int__", "*", "f", VALUE],
}
REDIS = "redis-aof"


@dataclass(frozen=True, slots=True)
class Cell:
    rps: float
    p50_ms: float | None
    p99_ms: float | None
    cpu: float | None = None  # server CPU seconds / wall seconds (1.0 = one core busy)
    per_sync: float | None = None  # records per fdatasync during the workload


def _wal(proc: Proc) -> tuple[float, float]:
    """(fdatasyncs, records) the server's WAL did so far."""
    with urllib.request.urlopen(f"http://127.0.0.1:{proc.http_port}/v0/status", timeout=30) as r:
        st = json.loads(r.read())["storage"]
    return float(st["wal_syncs"]), float(st["wal_syncs"]) * float(st["records_per_sync"])


def _create_topics(port: int) -> None:
    r = respbench.client(port)
    for name in ["hot", *(f"w:{i:012d}" for i in range(CLIENTS))]:
        r.execute_command("TOPIC.CREATE", name, "DURABILITY", "fsync")


def fdatasync_probe(n: int = 100) -> float:
    """Median ms of a 2 KB append + fdatasync in a temp dir: the disk's state this round."""
    with tempfile.TemporaryDirectory(prefix="walbench-probe-") as tmp:
        fd = os.open(Path(tmp) / "probe", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            times = []
            for _ in range(n):
                t0 = time.perf_counter()
                os.write(fd, b"x" * 2000)
                os.fdatasync(fd)
                times.append(time.perf_counter() - t0)
        finally:
            os.close(fd)
    return statistics.median(times) * 1000.0


def run_cell(procs: Procs, config: str, requests: int) -> dict[str, Cell]:
    """One fresh server (`config`: REDIS, or `N[:io]` = --wal-shards N and TOPICS_WAL_IO=io),
    both workloads."""
    if config == REDIS:
        proc = procs.start_redis(extra=("--appendonly", "yes", "--appendfsync", "always"))
    else:
        shards, _, io = config.partition(":")
        proc = procs.start_topicsrv(extra=("--wal-shards", shards),
                                    env={"TOPICS_WAL_IO": io} if io else None)
    try:
        assert proc.resp_port is not None
        if config != REDIS:
            _create_topics(proc.resp_port)
        out = {}
        for name, command in WORKLOADS.items():
            cpu0, t0 = proc.cpu(), time.perf_counter()
            wal0 = _wal(proc) if config != REDIS else (0.0, 0.0)
            m = respbench.redis_benchmark(proc.resp_port, command, requests=requests,
                                          clients=CLIENTS, extra=("-r", str(CLIENTS)))
            cpu = (proc.cpu() - cpu0) / (time.perf_counter() - t0)
            per_sync = None
            if config != REDIS:
                syncs, recs = (b - a for a, b in zip(wal0, _wal(proc), strict=True))
                per_sync = recs / syncs if syncs else None
            out[name] = Cell(m.ops_per_s, m.p50_ms, m.p99_ms, cpu, per_sync)
        return out
    finally:
        procs.stop(proc)


def _median(values: list[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return statistics.median(vals) if vals else None


def _fmt(v: float | None, spec: str) -> str:
    return "-" if v is None else format(v, spec)


def report(results: dict[str, list[dict[str, Cell]]], configs: list[str]) -> str:
    lines = []
    for wl in WORKLOADS:
        lines.append(f"\n-- {wl}: redis-benchmark -c {CLIENTS} -P 1 XADD "
                     f"{'hot' if wl == 'hot' else 'w:<64 streams>'} * f <100 B>")
        lines.append(f"{'config':<18} {'rec/s med':>9} {'ratio':>6} {'p50 ms':>7} {'p99 ms':>7} "
                     f"{'p99 x':>6} {'cpu':>5} {'rec/sync':>8}   rec/s per round")
        ref = results.get(REDIS, [])
        for c in configs:
            rounds = [r[wl] for r in results[c]]
            ratios = [a.rps / b[wl].rps for a, b in zip(rounds, ref, strict=False)]
            p99x = [a.p99_ms / b[wl].p99_ms for a, b in zip(rounds, ref, strict=False)
                    if a.p99_ms and b[wl].p99_ms]
            label = c if c == REDIS else f"shards={c}"
            lines.append(
                f"{label:<18} {_fmt(_median([r.rps for r in rounds]), '9.0f')} "
                f"{_fmt(_median(ratios), '6.2f') if c != REDIS else '     -'} "
                f"{_fmt(_median([r.p50_ms for r in rounds]), '7.3f')} "
                f"{_fmt(_median([r.p99_ms for r in rounds]), '7.3f')} "
                f"{_fmt(_median(p99x), '6.2f') if c != REDIS else '     -'} "
                f"{_fmt(_median([r.cpu for r in rounds]), '5.2f')} "
                f"{_fmt(_median([r.per_sync for r in rounds]), '8.1f')}   "
                + " ".join(f"{r.rps:.0f}/{_fmt(r.p99_ms, '.2f')}" for r in rounds))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.walbench", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shards", default="1,2,4,8", help="--wal-shards values (default 1,2,4,8)")
    ap.add_argument("--io", default="thread",
                    help="WAL I/O paths to compare, comma-separated: thread (shipped), to_thread")
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds (default 3)")
    ap.add_argument("--requests", type=int, default=30_000, help="XADDs per cell and workload")
    ap.add_argument("--no-redis", action="store_true", help="skip the redis-server reference")
    ap.add_argument("--json", type=Path, default=None, help="also write every cell as JSON here")
    args = ap.parse_args(argv)
    ios = [i.strip() for i in args.io.split(",")]
    configs = ([] if args.no_redis else [REDIS]) + [  # A/B pairs of I/O paths back to back
        s.strip() + ("" if io == "thread" else f":{io}") for s in args.shards.split(",") for io in ios]
    install_signal_handlers()
    procs = Procs()
    results: dict[str, list[dict[str, Cell]]] = {c: [] for c in configs}
    probes: list[float] = []
    t0 = time.perf_counter()
    try:
        for rnd in range(args.rounds):
            probes.append(fdatasync_probe())
            order = configs[rnd % len(configs):] + configs[:rnd % len(configs)]
            for c in order:
                cells = run_cell(procs, c, args.requests)
                results[c].append(cells)
                print(f"[round {rnd + 1}] {c:<10} " + "  ".join(
                    f"{wl} {v.rps:.0f}/s p50 {_fmt(v.p50_ms, '.2f')} p99 {_fmt(v.p99_ms, '.2f')} "
                    f"cpu {_fmt(v.cpu, '.2f')}" for wl, v in cells.items()), file=sys.stderr, flush=True)
    finally:
        procs.stop_all()
    print(f"fsync-class XADD, {CLIENTS} clients, {args.rounds} rounds x {args.requests} requests "
          f"(medians; per round: rec/s/p99 ms; ratio and p99 x = topicsrv / redis-aof of the same "
          f"round; cpu = server cores busy)")
    print("fdatasync probe (2 KB append, median ms) per round: "
          + " ".join(f"{p:.2f}" for p in probes))
    print(report(results, configs))
    print(f"({time.perf_counter() - t0:.0f} s)")
    if args.json is not None:
        plain = {c: [{w: {k: getattr(v, k) for k in v.__slots__} for w, v in r.items()} for r in rs]
                 for c, rs in results.items()}
        args.json.write_text(json.dumps(plain, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
