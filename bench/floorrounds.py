"""The rounds of the floor experiments (bench/scriptfloor.py, bench/writefloor.py): every row on
every server back to back, the order reversed every other round, each server's rate and CPU
per request recorded, then the medians printed with their ratios to the first server
(redis-server)."""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from bench.procs import Proc, Procs, free_port
from bench.respbench import redis_benchmark

ROOT = Path(__file__).resolve().parent.parent

Row = tuple[list[str], int, int]  # the command, its pipeline, requests a run
Samples = dict[tuple[str, str], list[float]]  # (row, server) -> one figure a round


def start(procs: Procs, name: str, args: Callable[[int, Path], list[str]]) -> Proc:
    """A floor server `python *args(port, workdir)` run from the repository's root on a free
    port, registered with `procs` (stopped by its stop_all), its stderr in workdir/err.log."""
    port = free_port()
    workdir = Path(tempfile.mkdtemp(prefix=f"bench-{name}-"))
    popen = subprocess.Popen([sys.executable, *args(port, workdir)], cwd=ROOT,
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=open(workdir / "err.log", "wb"))  # noqa: SIM115
    proc = Proc(name, popen, workdir, resp_port=port)
    procs.items.append(proc)
    procs.started.append((proc.name, proc.pid))
    procs._wait_port(proc, port, 30.0)
    return proc


def run(servers: list[tuple[str, Proc]], rows: dict[str, Row], rounds: int,
        keys: int) -> tuple[Samples, Samples]:
    """(rates, CPU µs a request) of each row on each server, `-c 50 -r keys`; a line printed
    a run."""
    rates: Samples = {}
    costs: Samples = {}
    width = max(map(len, rows))
    for rnd in range(rounds):
        order = servers if rnd % 2 == 0 else servers[::-1]
        for row, (cmd, pipeline, n) in rows.items():
            for name, proc in order:
                assert proc.resp_port is not None
                c0 = proc.cpu()
                m = redis_benchmark(proc.resp_port, cmd, requests=n, pipeline=pipeline,
                                    extra=("-r", str(keys)))
                cpu = proc.cpu() - c0
                rates.setdefault((row, name), []).append(m.ops_per_s)
                costs.setdefault((row, name), []).append(cpu / n * 1e6)
                print(f"round {rnd + 1} {row:{width}s} {name:14s} {m.ops_per_s:>10,.0f}/s, "
                      f"{cpu / n * 1e6:5.1f} us of CPU a request, server busy "
                      f"{m.busy(cpu):4.0%}", flush=True)
    return rates, costs


def report(names: list[str], rows: dict[str, Row], rates: Samples, costs: Samples,
           rounds: int, note: str = "") -> None:
    """The medians: requests/s with the ratio to names[0], then CPU µs a request."""
    width = max(map(len, rows)) + 1
    print(f"\nmedian of {rounds} rounds, requests/s and the ratio to {names[0]}{note}")
    print(f"{'row':{width}s}" + "".join(f"{n:>22s}" for n in names))
    for row in rows:
        ref = statistics.median(rates[(row, names[0])])
        cells = []
        for server in names:
            v = statistics.median(rates[(row, server)])
            cells.append(f"{v:>14,.0f} ({v / ref:4.2f})")
        print(f"{row:{width}s}" + "".join(f"{c:>22s}" for c in cells))
    print("\nthe server's CPU per request, µs (median; a server near 100% busy is bound by it)")
    for row in rows:
        print(f"{row:{width}s}" + "".join(f"{statistics.median(costs[(row, server)]):>22.1f}"
                                          for server in names))
