"""A/B of the compiled hot path against its pure-Python source, each as a ratio to redis-server.

    .venv/bin/python -m bench.abtest [--rounds 3] [--rows ping1,xadd1,xadd16,xrange16,xread16]
                                     (more rows: get1,get16,set1,set16: bench/stringbench.py)
                                     [--modes "compiled= pure=1 cython=@/copy/of/tree"]
                                     [--serve-args "--resp-io tasks"]

Rule 1: one round = a fresh redis-server, then a fresh topicsrv per mode (a mode is a value of
TOPICS_PURE: `compiled` = unset, `pure` = 1, topicsrv/buildinfo.py Rule 3; `@path` runs it
from another copy of the tree, e.g. one holding another build), the mode order rotating
between rounds; every row runs on all
servers in the same round, so each ratio compares like with like on a shared machine whose
absolute speed drifts.
Rule 2: the report is the median over rounds of each ratio (topicsrv / redis) and of each
mode against the first; absolute figures are printed per round for the record.
Rule 3: besides requests/s, each topicsrv's CPU time per request (user + system, from
/proc/<pid>/stat around the row) is reported: on a machine shared with other work it moves
less than throughput, and it is what compiling changes.
Rule 6 (who bounds a row): each server's CPU per request is printed, redis-server's too, and
per round the share of a core the server and the client (redis-benchmark) kept busy
(bench/respbench.py Rule 4): at P1 a side near 100% is the row's bottleneck.
Rule 4: every process is stopped by its pid in a `finally` (bench.procs).
Rule 5: the wake-up rows (bench/wakebench.py, the uncontended path of the delivery scheduler)
are wake-ups/s = 1 / median latency: `wake` is XREAD BLOCK on every server, `wake_sse` one SSE
watcher on topicsrv against redis-server's XREAD BLOCK. With `--modes "main=@/copy/of/main
branch="` they are the A/B of a scheduler change; `--serve-args` passes `serve` options to
every topicsrv (e.g. `--resp-io tasks`).
"""

from __future__ import annotations

import argparse
import os
import statistics
from collections.abc import Callable
from pathlib import Path

from bench import respbench, stringbench, wakebench
from bench.procs import Proc, Procs, install_signal_handlers
from bench.respbench import Measure

STREAM = 20_000  # entries of 100 bytes for the read rows

Row = tuple[Callable[[Proc], Measure], int]  # (run against a server, requests)
WAKES = 1_000  # round trips of a wake-up row


def _port(proc: Proc) -> int:
    assert proc.resp_port is not None
    return proc.resp_port


def _sse_wake(proc: Proc) -> Measure:
    """Rule 5: topicsrv's SSE wake-up; redis-server's XREAD BLOCK one as the reference."""
    if proc.http_port is None:
        return wakebench.xread_block(_port(proc), WAKES)
    return wakebench.sse_wake(proc.http_port, WAKES)


def _rows(mid: Callable[[int], str]) -> dict[str, Row]:
    rb = respbench.redis_benchmark
    return {
        "ping1": (lambda p: rb(_port(p), ["PING"], requests=60_000, pipeline=1), 60_000),
        "xadd1": (lambda p: rb(_port(p), ["XADD", "s", "*", "f", "v"], requests=60_000),
                  60_000),
        "xadd16": (lambda p: rb(_port(p), ["XADD", "s", "*", "f", "v"], requests=300_000,
                                pipeline=16), 300_000),
        "xrange16": (lambda p: rb(_port(p), ["XRANGE", "r", "-", "+", "COUNT", "100"],
                                  requests=10_000, pipeline=16), 10_000),
        "xread16": (lambda p: rb(_port(p), ["XREAD", "COUNT", "100", "STREAMS", "r",
                                            mid(_port(p))],
                                 requests=10_000, pipeline=16), 10_000),
        "get1": (lambda p: stringbench.get_bench(_port(p), 60_000, 1), 60_000),
        "set1": (lambda p: stringbench.set_bench(_port(p), 60_000, 1), 60_000),
        "get16": (lambda p: stringbench.get_bench(_port(p), 300_000, 16), 300_000),
        "set16": (lambda p: stringbench.set_bench(_port(p), 300_000, 16), 300_000),
        "wake": (lambda p: wakebench.xread_block(_port(p), WAKES), WAKES),
        "wake_sse": (_sse_wake, WAKES),
    }


def parse_modes(text: str) -> dict[str, str]:
    modes: dict[str, str] = {}
    for part in text.split():
        name, _, value = part.partition("=")
        if name:
            modes[name] = value
    return modes


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--rows", default="ping1,xadd1,xadd16,xrange16,xread16")
    ap.add_argument("--modes", default="compiled= pure=1",
                    help="space-separated name=TOPICS_PURE value (empty: compiled); the first "
                         "is the base of the ratios")
    ap.add_argument("--serve-args", default="", help="more `serve` options for every topicsrv")
    args = ap.parse_args(argv)
    serve_args = tuple(args.serve_args.split())
    install_signal_handlers()
    modes = parse_modes(args.modes)
    names = list(modes)
    base = names[0]
    mids: dict[int, str] = {}
    rows = _rows(lambda p: mids[p])
    row_names = args.rows.split(",")
    ratios: dict[tuple[str, str], list[float]] = {}
    cpu: dict[tuple[str, str], list[float]] = {}
    procs = Procs()
    try:
        for rnd in range(args.rounds):
            k = rnd % len(names)
            order = names[k:] + names[:k]
            servers = [("redis", procs.start_redis())]
            for mode in order:
                pure, _, tree = modes[mode].partition("@")
                os.environ.pop("TOPICS_PURE", None)
                if pure:
                    os.environ["TOPICS_PURE"] = pure
                servers.append((mode, procs.start_topicsrv(extra=serve_args,
                                                           cwd=Path(tree) if tree else None)))
                os.environ.pop("TOPICS_PURE", None)
            for _, proc in servers:
                assert proc.resp_port is not None
                if {"xrange16", "xread16"} & set(row_names):
                    respbench.load_stream(proc.resp_port, "r", STREAM)
                    mids[proc.resp_port] = respbench.id_at(proc.resp_port, "r",
                                                           STREAM // 2).decode()
                if {"get1", "get16"} & set(row_names):
                    stringbench.load(proc.resp_port, stringbench.KEYS)
            for row in row_names:
                run, requests = rows[row]
                got: dict[str, float] = {}
                note: dict[str, str] = {}
                for who, proc in servers:
                    c0 = proc.cpu()
                    m = run(proc)
                    got[who] = m.ops_per_s
                    spent = proc.cpu() - c0
                    cpu.setdefault((row, who), []).append(spent / requests * 1e6)
                    note[who] = f"{cpu[(row, who)][-1]:.1f} µs cpu, {m.busy_text(spent)}"  # Rule 6
                for mode in names:
                    ratios.setdefault((row, mode), []).append(got[mode] / got["redis"])
                    ratios.setdefault((row, f"{mode}/{base}"), []).append(got[mode] / got[base])
                print(f"round {rnd + 1} {row:9s} " + "  ".join(
                    f"{w} {got[w]:>9,.0f} ({note[w]})" for w in ["redis", *names]), flush=True)
            for _, proc in servers:
                procs.stop(proc)
    finally:
        procs.stop_all()
    print(f"\nmedian of {args.rounds} rounds: requests/s as a ratio to redis-server; "
          f"each mode / {base}; server CPU µs per request")
    head = "".join(f"{m + '/redis':>16s}" for m in names)
    head += "".join(f"{m + '/' + base:>18s}" for m in names[1:])
    head += "".join(f"{m + ' cpu':>14s}" for m in ["redis", *names])
    print(f"{'row':10s}{head}")
    for row in row_names:
        line = "".join(f"{statistics.median(ratios[(row, m)]):16.3f}" for m in names)
        line += "".join(f"{statistics.median(ratios[(row, f'{m}/{base}')]):18.2f}"
                        for m in names[1:])
        line += "".join(f"{statistics.median(cpu[(row, m)]):14.1f}" for m in ["redis", *names])
        print(f"{row:10s}{line}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
