"""A/B of the compiled hot path against its pure-Python source, each as a ratio to redis-server.

    .venv/bin/python -m bench.abtest [--rounds 3] [--rows ping1,xadd1,xadd16,xrange16,xread16]

Rule 1: one round = a fresh redis-server, then a fresh topicsrv per mode (`compiled`, and
`pure` = the same tree with TOPICS_PURE=1), the mode order alternating between rounds; every
row runs on all three servers in the same round, so each ratio compares like with like on a
shared machine whose absolute speed drifts.
Rule 2: the report is the median over rounds of each ratio (topicsrv / redis) and of
compiled / pure; absolute figures are printed for the record only.
Rule 3: every process is stopped by its pid in a `finally` (bench.procs).
"""

from __future__ import annotations

import argparse
import os
import statistics
from collections.abc import Callable

from bench import respbench
from bench.procs import Procs, install_signal_handlers

STREAM = 20_000  # entries of 100 bytes for the read rows


def _rows(mid: Callable[[int], str]) -> dict[str, Callable[[int], float]]:
    rb = respbench.redis_benchmark
    return {
        "ping1": lambda p: rb(p, ["PING"], requests=60_000, pipeline=1).ops_per_s,
        "xadd1": lambda p: rb(p, ["XADD", "s", "*", "f", "v"], requests=60_000).ops_per_s,
        "xadd16": lambda p: rb(p, ["XADD", "s", "*", "f", "v"], requests=300_000,
                               pipeline=16).ops_per_s,
        "xrange16": lambda p: rb(p, ["XRANGE", "r", "-", "+", "COUNT", "100"], requests=10_000,
                                 pipeline=16).ops_per_s,
        "xread16": lambda p: rb(p, ["XREAD", "COUNT", "100", "STREAMS", "r", mid(p)],
                                requests=10_000, pipeline=16).ops_per_s,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--rows", default="ping1,xadd1,xadd16,xrange16,xread16")
    args = ap.parse_args(argv)
    install_signal_handlers()
    mids: dict[int, str] = {}
    rows = _rows(lambda p: mids[p])
    names = args.rows.split(",")
    ratios: dict[tuple[str, str], list[float]] = {}
    procs = Procs()
    try:
        for rnd in range(args.rounds):
            modes = ["compiled", "pure"] if rnd % 2 == 0 else ["pure", "compiled"]
            servers = []
            redis = procs.start_redis()
            servers.append(("redis", redis))
            for mode in modes:
                os.environ.pop("TOPICS_PURE", None)
                if mode == "pure":
                    os.environ["TOPICS_PURE"] = "1"
                servers.append((mode, procs.start_topicsrv()))
                os.environ.pop("TOPICS_PURE", None)
            for _, proc in servers:
                assert proc.resp_port is not None
                if {"xrange16", "xread16"} & set(names):
                    respbench.load_stream(proc.resp_port, "r", STREAM)
                    mids[proc.resp_port] = respbench.id_at(proc.resp_port, "r",
                                                           STREAM // 2).decode()
            for row in names:
                got = {}
                for who, proc in servers:
                    assert proc.resp_port is not None
                    got[who] = rows[row](proc.resp_port)
                for mode in ("compiled", "pure"):
                    ratios.setdefault((row, mode), []).append(got[mode] / got["redis"])
                ratios.setdefault((row, "c/p"), []).append(got["compiled"] / got["pure"])
                print(f"round {rnd + 1} {row:9s} redis {got['redis']:>10,.0f}  compiled "
                      f"{got['compiled']:>10,.0f}  pure {got['pure']:>10,.0f}", flush=True)
            for _, proc in servers:
                procs.stop(proc)
    finally:
        procs.stop_all()
    print(f"\nmedian of {args.rounds} rounds    compiled/redis  pure/redis  compiled/pure")
    for row in names:
        med = [statistics.median(ratios[(row, m)]) for m in ("compiled", "pure", "c/p")]
        print(f"{row:24s}  {med[0]:14.3f}  {med[1]:10.3f}  {med[2]:13.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
