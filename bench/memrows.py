"""`python -m bench.memrows [--quick|--tiny] [--row KIND ...]`: only the bench's memory-per-key
rows, at the size `make bench` (or --quick) gives them, without the throughput rows around them.

Rule 1: each row is measured as its phase measures it (the same function, the same fill, one
fresh server at a time, redis-server first): `string` (bench/__main__.py's memory phase,
stringbench.memory_per_key), `list` and `hash` (bench/collphase.py, collbench.memory), `zset`,
`set` and `intset` (bench/zsetphase.py, zsetbench.memory).
Rule 2: it prints one line per row (both servers' bytes per element, the ratio) and writes
nothing else; a row that fails prints its error and the others still run.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from bench import collbench, stringbench, zsetbench
from bench.procs import Proc, Procs
from bench.sizes import SIZES

# kind -> (size key, measure(proc, n) -> the per-element figure, the metric's key)
ROWS: dict[str, tuple[str, Callable[[Proc, int], dict[str, Any]], str]] = {
    "string": ("str_memory", stringbench.memory_per_key, "rss_per_key"),
    "list": ("list_memory", lambda p, n: collbench.memory(p, "list", n), "rss_per_element"),
    "hash": ("hash_memory", lambda p, n: collbench.memory(p, "hash", n), "rss_per_element"),
    "zset": ("zset_memory", lambda p, n: zsetbench.memory(p, "zset", n), "rss_per_element"),
    "set": ("set_memory", lambda p, n: zsetbench.memory(p, "set", n), "rss_per_element"),
    "intset": ("set_memory", lambda p, n: zsetbench.memory(p, "intset", n), "rss_per_element"),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.memrows",
                                     description=__doc__.splitlines()[0])
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--quick", action="store_true", help="make bench-quick's sizes")
    group.add_argument("--tiny", action="store_true", help="the smoke test's sizes")
    parser.add_argument("--row", action="append", choices=list(ROWS), default=[],
                        help="this row only (repeatable; default: every row)")
    args = parser.parse_args(argv)
    sizes = SIZES["quick" if args.quick else "tiny" if args.tiny else "full"]
    procs = Procs()
    try:
        for kind in args.row or list(ROWS):
            size_key, measure, metric = ROWS[kind]
            n = sizes[size_key]
            cells: list[Any] = []
            for start in (procs.start_redis, procs.start_topicsrv):
                proc = start()
                try:
                    cells.append(measure(proc, n)[metric])
                except Exception as e:  # noqa: BLE001 - Rule 2: the row shows its error
                    cells.append(f"error: {e}")
                finally:
                    procs.stop(proc)
            red, top = cells
            ratio = f"{top / red:.2f}" if all(isinstance(c, float) for c in cells) else "-"
            print(f"{kind:7} n={n:>9,}  redis {red if isinstance(red, str) else f'{red:.1f}'}"
                  f"  topicsrv {top if isinstance(top, str) else f'{top:.1f}'} B/el"
                  f"  ratio {ratio}", flush=True)
    finally:
        procs.stop_all()
    return 0


if __name__ == "__main__":
    sys.exit(main())
