"""`python -m bench.writebench`: the write rows of issue 28 against the matching redis-server,
as the median of alternating rounds, each round's value printed.

    .venv/bin/python -m bench.writebench [--rounds 3] [--quick] [--rows xadd1,fsync16,...]
                                         [--against /path/to/other/tree]

Rule 1 (like for like): every XADD row pairs topicsrv's default `disk` topic with redis-server
without persistence (`plain`) and with `appendonly yes` + `appendfsync everysec` (`aof`, the
nearest Redis has to our group commit); the `fsync` rows write to a topic created
`DURABILITY fsync` (an ack only once the record is on disk) against redis-server
`appendfsync always` (which acks only after its per-loop write + fsync). PING P1 and XRANGE
COUNT 100 P16 are the rows that must not regress (against `plain`).
Rule 2 (alternation): one round = fresh servers (three redis-servers, one topicsrv per tree),
each row run on the topicsrv(s) and its redis peer back to back, the order of the trees and
of topicsrv vs redis rotating between rounds; the report is the median of the per-round
ratios, with the rounds listed. `--against DIR` adds a second source tree (its own compiled
build, e.g. a `git archive` of main built with `setup.py build_ext --inplace`) for A/B in the
same run.
Rule 3: every process is stopped by its pid in a `finally` (bench.procs).
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bench import respbench
from bench.procs import Proc, Procs, install_signal_handlers

PLAIN: tuple[str, ...] = ()
AOF = ("--appendonly", "yes", "--appendfsync", "everysec")
ALWAYS = ("--appendonly", "yes", "--appendfsync", "always")
PAIRINGS = {"plain": PLAIN, "aof": AOF, "always": ALWAYS}
STREAM = 20_000  # 100-byte entries for XRANGE


@dataclass(frozen=True)
class WriteRow:
    label: str
    redis: str  # which redis-server (PAIRINGS)
    command: tuple[str, ...]
    pipeline: int
    requests: int  # full size; quick divides by 3
    target: float | None
    fsync_topic: str | None = None  # topicsrv: TOPIC.CREATE <it> DURABILITY fsync first


ROWS: dict[str, WriteRow] = {
    "ping1": WriteRow("PING P1 (vs plain)", "plain", ("PING",), 1, 100_000, 0.9),
    "xrange16": WriteRow("XRANGE COUNT 100 P16 (vs plain)", "plain",
                         ("XRANGE", "r", "-", "+", "COUNT", "100"), 16, 20_000, 1.0),
    "xadd1": WriteRow("XADD P1, disk vs no persistence", "plain",
                      ("XADD", "s1", "*", "f", "v"), 1, 100_000, 0.6),
    "xadd16": WriteRow("XADD P16, disk vs no persistence", "plain",
                       ("XADD", "s16", "*", "f", "v"), 16, 500_000, 0.35),
    "aof1": WriteRow("XADD P1, disk vs appendfsync everysec", "aof",
                     ("XADD", "a1", "*", "f", "v"), 1, 100_000, 0.6),
    "aof16": WriteRow("XADD P16, disk vs appendfsync everysec", "aof",
                      ("XADD", "a16", "*", "f", "v"), 16, 500_000, 0.35),
    "fsync1": WriteRow("XADD P1, fsync topic vs appendfsync always", "always",
                       ("XADD", "f1", "*", "f", "v"), 1, 60_000, 0.5, "f1"),
    "fsync16": WriteRow("XADD P16, fsync topic vs appendfsync always", "always",
                        ("XADD", "f16", "*", "f", "v"), 16, 300_000, 0.4, "f16"),
}


@dataclass
class Result:
    """Per row: the redis figures and, per tree, the topicsrv figures, one per round."""

    redis: list[float]
    trees: dict[str, list[float]]

    def ratios(self, tree: str) -> list[float]:
        return [t / r for t, r in zip(self.trees[tree], self.redis, strict=True)]


def run(rows: list[str], rounds: int, divisor: int, trees: dict[str, Path | None],
        log: Callable[[str], None] = print) -> dict[str, Result]:
    """`divisor`: the row sizes are divided by it (1 full, 3 quick)."""
    results = {name: Result([], {t: [] for t in trees}) for name in rows}
    procs = Procs()
    names = list(trees)
    try:
        for rnd in range(rounds):
            order = names[rnd % len(names):] + names[:rnd % len(names)]
            redis = {k: procs.start_redis(extra=v) for k, v in PAIRINGS.items()
                     if any(ROWS[r].redis == k for r in rows)}
            tops = {t: procs.start_topicsrv(cwd=trees[t]) for t in order}
            try:
                _prepare(rows, redis, tops)
                for name in rows:
                    row = ROWS[name]
                    n = max(row.requests // divisor, 50 * row.pipeline)
                    got: dict[str, float] = {}
                    who = [("redis", redis[row.redis]), *((t, tops[t]) for t in order)]
                    if rnd % 2:
                        who.reverse()
                    for label, proc in who:
                        assert proc.resp_port is not None
                        got[label] = respbench.redis_benchmark(
                            proc.resp_port, list(row.command), requests=n,
                            pipeline=row.pipeline).ops_per_s
                    results[name].redis.append(got["redis"])
                    for t in names:
                        results[name].trees[t].append(got[t])
                    log(f"round {rnd + 1} {name:8s} redis {got['redis']:>10,.0f}  " + "  ".join(
                        f"{t} {got[t]:>10,.0f} ({got[t] / got['redis']:.2f})" for t in names))
            finally:
                for p in [*redis.values(), *tops.values()]:
                    procs.stop(p)
    finally:
        procs.stop_all()
    return results


def _prepare(rows: list[str], redis: dict[str, Proc], tops: dict[str, Proc]) -> None:
    for name in rows:
        row = ROWS[name]
        for proc in tops.values():
            assert proc.resp_port is not None
            if row.fsync_topic is not None:
                respbench.client(proc.resp_port).execute_command(
                    "TOPIC.CREATE", row.fsync_topic, "DURABILITY", "fsync")
            if name == "xrange16":
                respbench.load_stream(proc.resp_port, "r", STREAM)
        if name == "xrange16":
            port = redis[row.redis].resp_port
            assert port is not None
            respbench.load_stream(port, "r", STREAM)


def report(results: dict[str, Result], trees: list[str]) -> list[str]:
    lines = []
    base = trees[0]
    for name, res in results.items():
        row = ROWS[name]
        for t in trees:
            rs = res.ratios(t)
            med = statistics.median(rs)
            status = "" if row.target is None else ("ok" if med >= row.target else "MISS")
            lines.append(f"{row.label:46s} {t:8s} {med:5.2f}  ({', '.join(f'{x:.2f}' for x in rs)})"
                         f"  target >= {row.target}  {status}")
        if len(trees) > 1:
            for t in trees[1:]:
                ab = [a / b for a, b in zip(res.trees[base], res.trees[t], strict=True)]
                lines.append(f"{'':46s} {base}/{t} {statistics.median(ab):5.2f}  "
                             f"({', '.join(f'{x:.2f}' for x in ab)})")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--rows", default=",".join(ROWS))
    ap.add_argument("--against", type=Path, default=None, help="a second source tree (A/B)")
    args = ap.parse_args(argv)
    install_signal_handlers()
    trees: dict[str, Path | None] = {"this": None}
    if args.against is not None:
        trees["against"] = args.against
    rows = args.rows.split(",")
    results = run(rows, args.rounds, 3 if args.quick else 1, trees)
    print("\nmedian topicsrv / redis-server (per round in brackets)")
    for line in report(results, list(trees)):
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
