"""The lists-and-hashes phase of `python -m bench` (issue 35): its servers, its rows, its targets.

Rule 1: every server is fresh and started in the caller's `Procs` registry (stopped by pid in
`python -m bench`'s `finally`): one pair for the throughput rows (redis-server's row first,
then topicsrv's, both alive), one pair for BRPOP, one server at a time for each memory fill
and for the checkpoint stall (bench/ckptbench.py `compare`).
Rule 2: the targets are the issue's: LPUSH/RPOP/HSET/HGET P1 >= 0.8x and P16 >= 0.5x,
BRPOP elements/s >= 0.5x, RSS per element <= 2x, the worst PING during a checkpoint <= 2x
redis-server's during BGSAVE of the same data. A P1 row's note says how busy each server
and its client kept a core (bench/respbench.py Rule 4); PING P1 is beside them, no target.
Rule 3: a failing workload becomes its cells' error text (bench/report.py Rule 2).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from bench import ckptbench, collbench
from bench.procs import Proc, Procs
from bench.report import Row, attempt
from bench.respbench import Measure, redis_benchmark
from bench.stringbench import VALUE, keyed

BRPOP_CONSUMERS = 20
BRPOP_PRODUCERS = 20


def _cell(m: Any, attr: str) -> float | str:
    if isinstance(m, Measure):
        return float(getattr(m, attr))
    if isinstance(m, dict):
        return float(m[attr])
    return str(m)


class Phase:
    def __init__(self, procs: Procs, sizes: dict[str, int], log: Callable[[str], None]) -> None:
        self.procs = procs
        self.sizes = sizes
        self.log = log
        self.rows: list[Row] = []
        self.extra: dict[str, Any] = {}

    def run(self) -> tuple[list[Row], dict[str, Any]]:
        for step in (self.throughput, self.brpop, self.memory, self.checkpoint):
            try:
                step()
            finally:
                self.procs.stop_all()
        return self.rows, self.extra

    def _pair(self) -> tuple[Proc, Proc]:
        return self.procs.start_redis(), self.procs.start_topicsrv()

    def _both(self, pair: tuple[Proc, Proc], label: str,
              fn: Callable[[int], Any]) -> tuple[list[Any], list[float]]:
        """`fn(port)` on each server; also each server's CPU seconds over its run."""
        cells, cpu = [], []
        for proc in pair:
            self.log(f"{label} on {proc.name}")
            assert proc.resp_port is not None
            if not proc.alive():  # redis-benchmark would wait on a dead port for ever
                log = proc.workdir / "server.log"
                tail = log.read_text(errors="replace")[-300:] if log.exists() else ""
                cells.append(f"error: {proc.name} exited ({proc.popen.returncode}): {tail}")
                cpu.append(0.0)
                continue
            c0 = proc.cpu()
            cells.append(attempt(lambda proc=proc: fn(proc.resp_port)))
            cpu.append(proc.cpu() - c0)
        return cells, cpu

    @staticmethod
    def _busy(cells: list[Any], cpu: list[float]) -> str:
        parts = [f"{who}: {m.busy_text(c)}" for who, m, c
                 in zip(("redis", "topicsrv"), cells, cpu, strict=True) if isinstance(m, Measure)]
        return "busy: " + "; ".join(parts) if parts else ""

    def throughput(self) -> None:
        s = self.sizes
        keys = s["str_keys"]
        sec = (f"RESP lists and hashes, redis-benchmark -c 50 -r {keys:,} ({keys:,} lists of "
               f"{collbench.PRELOAD} and hashes of 10 loaded first)")
        self._keyed_rows(sec, "PING, P1 (reference)", f"load {keys} lists and hashes",
                         collbench.load, collbench.ROWS)

    def _keyed_rows(self, sec: str, ping: str, loading: str, load: Callable[[int, int], float],
                    rows: dict[str, list[str]]) -> None:
        """On one fresh pair: PING P1 (row `ping`), `load(port, keys)`, then each command of
        `rows` at P1 and P16 with `stringbench.keyed` (also bench/zsetphase.py's)."""
        s = self.sizes
        keys = s["str_keys"]
        pair = self._pair()
        (r, t), cpu = self._both(pair, "PING P1", lambda port: redis_benchmark(
            port, ["PING"], requests=s["str_p1"]))
        self.rows.append(Row(sec, ping, "ops/s", _cell(r, "ops_per_s"),
                             _cell(t, "ops_per_s"), ref_note=self._busy([r, t], cpu)))
        self._both(pair, loading, lambda port: load(port, keys))
        for name, command in rows.items():
            label = " ".join(command).replace(VALUE.decode(), "<100 B>")
            for p in (1, 16):
                n = s["str_p1"] if p == 1 else s["str_p16"]
                (r, t), cpu = self._both(pair, f"{name} P{p}", lambda port, c=command, n=n, p=p:
                                         keyed(port, c, requests=n, pipeline=p, keys=keys))
                self.rows.append(Row(sec, f"{label}, P{p}", "ops/s", _cell(r, "ops_per_s"),
                                     _cell(t, "ops_per_s"), target=0.8 if p == 1 else 0.5,
                                     ref_note=self._busy([r, t], cpu) if p == 1 else ""))
                self.extra[f"{name.lower()}_p{p}"] = {"redis": r, "topicsrv": t}

    def brpop(self) -> None:
        n = self.sizes["brpop"]
        c, m = BRPOP_CONSUMERS, BRPOP_PRODUCERS
        (r, t), cpu = self._both(self._pair(), f"BRPOP x {c} fed by LPUSH x {m}, {n} elements",
                                 lambda port: collbench.brpop(port, n, c, m))
        self.rows.append(Row(
            f"BRPOP consumers fed by LPUSH producers, redis-benchmark, {n:,} elements of 100 B",
            f"{c} clients in BRPOP q 0 loops, {m} clients LPUSH q", "el/s",
            _cell(r, "ops_per_s"), _cell(t, "ops_per_s"), target=0.5,
            ref_note=self._busy([r, t], cpu) + " (client = the LPUSH side only)"))
        self.extra["brpop"] = {"redis": r, "topicsrv": t}

    def memory(self) -> None:
        s = self.sizes
        self._memory("memory, lists and hashes, RSS growth of a fresh server over one fill",
                     collbench.memory, (
            ("list", s["list_memory"], f"one list of {s['list_memory']:,} x 10 B (per element)"),
            ("hash", s["hash_memory"], f"{s['hash_memory']:,} hashes x 10 fields, 10 B values "
                                       "(per field)")))

    def _memory(self, sec: str, measure: Callable[[Proc, str, int], dict[str, Any]],
                fills: tuple[tuple[str, int, str], ...]) -> None:
        """Each (kind, n, label) of `fills` as `measure(proc, kind, n)` on a fresh
        redis-server, then on a fresh topicsrv (also bench/zsetphase.py's)."""
        for kind, n, label in fills:
            cells = []
            for start in (self.procs.start_redis, self.procs.start_topicsrv):
                proc = start()
                self.log(f"memory: {kind} fill on {proc.name}")
                cells.append(attempt(lambda proc=proc, kind=kind, n=n: measure(proc, kind, n)))
                self.procs.stop(proc)
            red = cells[0]
            note = (f"redis used_memory: {red['used_memory_per_element']:.1f} B/element"
                    if isinstance(red, dict) else "")
            self.rows.append(Row(sec, label, "B/el", _cell(red, "rss_per_element"),
                                 _cell(cells[1], "rss_per_element"), target=2.0,
                                 lower_is_better=True, ref_note=note))
            self.extra[f"{kind}_memory"] = {"redis": red, "topicsrv": cells[1]}

    def checkpoint(self) -> None:
        keys, elements = self.sizes["ckpt_keys"], self.sizes["ckpt_elements"]
        sec = (f"checkpoint vs BGSAVE, {keys:,} keys x 100 B + {elements:,} list and hash "
               "elements (bench/ckptbench.py)")
        self.log(f"checkpoint stall: {keys} keys + {elements} elements")
        res = attempt(lambda: ckptbench.compare(keys, elements, log=self.log, procs=self.procs))
        row = "another client's worst PING during the save"
        if isinstance(res, str):
            self.rows.append(Row(sec, row, "ms", res, res))
            return
        red, top = res["redis-server"], res["topicsrv"]
        note = "; ".join(
            f"{who}: save {x.save_s:.1f} s, {x.pings} PINGs, worst {x.floor_ms:.1f} ms with no "
            f"save, RSS {x.rss_mb:.0f} MB" for who, x in (("redis", red), ("topicsrv", top)))
        self.rows.append(Row(sec, row, "ms", red.stall_ms, top.stall_ms, target=2.0,
                             lower_is_better=True, ref_note=note))
        self.extra["checkpoint"] = {who: asdict(x) for who, x in res.items()}
