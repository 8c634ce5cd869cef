"""`python -m bench [--quick|--tiny]`: topicsrv next to a real redis-server, in one run.

Rule 1: fresh servers (redis-server with persistence off, topicsrv with an empty temp data
dir, both on 127.0.0.1 and free ports), the same clients and workloads for both, ratios
topicsrv / redis from this run only.
Rule 2: every process started is stopped by pid in a `finally` (errors and Ctrl-C/SIGTERM
included), see bench/procs.py.
Rule 3: a failing workload fills its cells with the error and the run goes on; a failing
phase (e.g. a server that does not start) is reported and the next phase runs. Exit status:
0 when every phase ran (missed targets are reported, not fatal), 1 when a phase failed, or
when a workload errored and `--strict` was given.
Phases: in-process micro-benchmarks; the write rows (bench/writebench.py); PUBLISH to 1 and
50 subscribers (bench/pubbench.py); pair 1 (RESP + HTTP workloads, string GET/SET among
them); a fresh topicsrv for the router workloads (bench/routerbench.py); pair 2, fresh, for
memory per record; then the engine's in-process memory figure (bench/engine_memory.py); pair
3, fresh, for memory per string key (bench/stringbench.py); a fresh pair for thousands of
blocked clients (bench/blockbench.py, issue 40); lists and hashes, each step on fresh servers
(bench/collphase.py, issue 35); sets and sorted sets and RQ, the same way (bench/zsetphase.py,
issue 36); XADD and SET P16 on a primary with one replica beside one node, and the replica's
lag, in alternating rounds of fresh servers (bench/replbench.py, issue 37).
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import asdict
from functools import partial
from pathlib import Path
from typing import Any

from bench import (
    blockbench,
    collphase,
    httpbench,
    micro,
    pubbench,
    queuebench,
    replbench,
    respbench,
    routerbench,
    scriptbench,
    stringbench,
    wakebench,
    writebench,
    zsetphase,
)
from bench import memory as membench
from bench.procs import Proc, Procs, install_signal_handlers
from bench.report import Row, attempt, render, save
from bench.respbench import Measure
from bench.sizes import SIZES

PHASES = ["micro", "writes", "pubsub", "servers", "routers", "memory", "spark", "blocked", "colls",
          "zsets", "repl"]
RESULTS = Path(__file__).resolve().parent / "results" / "latest.json"
SET_P1_TARGET = 0.85  # issue 38 (the `disk` keyspace against redis-server without persistence)
EVALSHA_TARGETS = {1: 0.5, 16: 0.3}  # issue 38


def per(m: Any, attr: str = "ops_per_s") -> float | str:
    return getattr(m, attr) if isinstance(m, Measure) else str(m)


class Run:
    def __init__(self, mode: str, sizes: dict[str, int], verbose: bool) -> None:
        self.mode = mode
        self.sizes = sizes
        self.rows: list[Row] = []
        self.extra: dict[str, Any] = {}
        self.verbose = verbose
        self.procs = Procs()

    def log(self, text: str) -> None:
        if self.verbose:
            print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)

    # ---- phases -----------------------------------------------------------------------

    def micro(self) -> None:
        s = self.sizes
        self.log("micro-benchmarks (in-process engine)")
        tags = attempt(lambda: micro.tag_benchmarks(s["tag_groups"]))
        reads = attempt(lambda: micro.read_benchmarks(s["read_records"]))
        sec = "in-process engine"

        def us(d: Any, key: str, scale: float = 1e6) -> float | str:
            return d[key] * scale if isinstance(d, dict) else str(d)

        self.rows += [
            Row(sec, "tag index Eq lookup", "us", None, us(tags, "eq_lookup_s"), target=2.0,
                lower_is_better=True, ref_note="seeds (Rust): 267 ns"),
            Row(sec, "tag index Glob lookup, 100 tags", "us", None,
                us(tags, "glob100_lookup_s"), target=100.0, lower_is_better=True,
                ref_note="seeds (Rust): 67.8 us"),
            Row(sec, "Eq delete (engine, 1 record)", "us", None, us(tags, "eq_delete_s")),
            Row(sec, "Glob delete (engine, 100 tags x 1 record)", "us", None,
                us(tags, "glob100_delete_s")),
            Row(sec, "diff read pipeline, JSON records", "ns/rec", None,
                us(reads, "diff_json_per_record_s", 1e9)),
            Row(sec, "diff read pipeline, RESP records", "ns/rec", None,
                us(reads, "diff_resp_per_record_s", 1e9)),
            Row(sec, "scan_range (XRANGE) COUNT 100", "us", None,
                us(reads, "xrange100_per_call_s")),
        ]
        self.rows += self.storage_rows()

    def storage_rows(self) -> list[Row]:
        """fsync-class ack p50/p99 from bench/storage_bench.py (storage helper), if present."""
        sec = "in-process engine"
        if importlib.util.find_spec("bench.storage_bench") is None:
            return [Row(sec, f"fsync ack p50/p99, {w} writers", "ms", None,
                        "pending (storage_bench)") for w in (1, 8, 64)]
        self.log("storage benchmark (bench/storage_bench.py)")
        out = attempt(lambda: storage_bench(self.mode))
        if isinstance(out, str):
            return [Row(sec, "fsync ack (bench/storage_bench.py)", "ms", None, out)]
        rows = []
        for w in (1, 8, 64):
            d = out.get(str(w)) or out.get(w) or {}
            rows.append(Row(sec, f"fsync ack p50, {w} writers", "ms", None,
                            d.get("p50", "error: no p50")))
            rows.append(Row(sec, f"fsync ack p99, {w} writers", "ms", None,
                            d.get("p99", "error: no p99")))
        self.extra["storage_bench"] = out
        return rows

    def writes(self) -> None:
        """The write rows of issue 28 (bench/writebench.py): each XADD row against the
        redis-server doing the same durability work, PING P1 and XRANGE P16 beside them, as
        the median of alternating rounds of fresh servers, the rounds in the note."""
        rounds, divisor = {"full": (3, 1), "quick": (3, 3), "tiny": (1, 500)}[self.mode]
        res = writebench.run(list(writebench.ROWS), rounds, divisor, {"this": None}, log=self.log)
        sec = f"RESP writes, redis-benchmark -c 50, median of {rounds} alternating rounds"
        for name, r in res.items():
            row = writebench.ROWS[name]
            ratios = r.ratios("this")
            red = statistics.median(r.redis)
            self.rows.append(Row(sec, row.label, "ops/s", red, red * statistics.median(ratios),
                                 target=row.target,
                                 ref_note="rounds: " + ", ".join(f"{x:.2f}" for x in ratios)))
            self.extra[f"writes_{name}"] = {"redis": r.redis, "topicsrv": r.trees["this"]}

    def pubsub(self) -> None:
        """PUBLISH to 1 and to 50 subscribers (issue 26, bench/pubbench.py): every subscriber
        counted, median of alternating rounds of fresh servers, the rounds in the note."""
        rounds, divisor = {"full": (3, 1), "quick": (3, 3), "tiny": (1, 500)}[self.mode]
        res = pubbench.run(list(pubbench.ROWS), rounds, divisor, log=self.log)
        sec = f"pub/sub, redis-benchmark -c 50, median of {rounds} alternating rounds"
        for name, r in res.items():
            ratios = r.ratios()
            red = statistics.median(r.redis)
            self.rows.append(Row(sec, pubbench.ROWS[name].label, "msg/s", red,
                                 red * statistics.median(ratios), target=pubbench.ROWS[name].target,
                                 ref_note="rounds: " + ", ".join(f"{x:.2f}" for x in ratios)))
            self.extra[f"pubsub_{name}"] = {"redis": r.redis, "topicsrv": r.topicsrv}

    def servers(self) -> None:
        s = self.sizes
        self.log("starting redis-server and topicsrv")
        red = self.procs.start_redis()
        top = self.procs.start_topicsrv()
        self.log(f"redis-server pid {red.pid} port {red.resp_port}; topicsrv pid {top.pid} "
                 f"resp {top.resp_port} http {top.http_port}")
        pair = (red, top)
        self.resp_workloads(pair, s)
        self.http_workloads(top, s)
        for p in pair:
            self.procs.stop(p)

    def both(self, pair: tuple[Proc, Proc], label: str,
             fn: Callable[[int], Any], spent: list[float] | None = None) -> tuple[Any, Any]:
        """`fn` on each server; `spent` gets each server's CPU seconds during its run, one
        entry per server of the pair (0 for one that was not run)."""
        results = []
        for p in pair:
            self.log(f"{label} on {p.name}")
            if p.resp_port is None:
                results.append("error: no RESP front")
                if spent is not None:
                    spent.append(0.0)
                continue
            c0 = p.cpu()
            results.append(attempt(partial(fn, p.resp_port)))
            if spent is not None:
                spent.append(p.cpu() - c0)
        return results[0], results[1]

    @staticmethod
    def busy_note(r: Any, t: Any, spent: list[float]) -> str:
        """respbench.py Rule 4: the share of a core the server and the client kept busy, for
        each server of the pair (which side bounds a P1 row)."""
        parts = [f"{who}: {m.busy_text(cpu)}"
                 for who, m, cpu in zip(("redis", "topicsrv"), (r, t), spent, strict=True)
                 if isinstance(m, Measure)]
        return "busy: " + "; ".join(parts) if parts else ""

    def resp_workloads(self, pair: tuple[Proc, Proc], s: dict[str, int]) -> None:
        bench = "RESP, redis-benchmark -c 50"
        for p in (1, 16):
            n = s["xadd_p1"] if p == 1 else s["xadd_p16"]
            r, t = self.both(pair, f"XADD P{p}", partial(
                respbench.redis_benchmark, command=["XADD", "s", "*", "f", "v"], requests=n,
                pipeline=p))
            self.rows.append(Row(bench, f"XADD s * f v, P{p}", "ops/s", per(r), per(t),
                                 target=0.5 if p == 1 else 0.3))
            self.extra[f"xadd_p{p}"] = {"redis": r, "topicsrv": t}
        self.string_workloads(pair, s)
        # A 100k-entry stream of 100-byte values for XRANGE / XREAD.
        n_stream = s["stream"]
        self.both(pair, f"load {n_stream} entries", lambda port: Measure(
            0, 0, respbench.load_stream(port, "r", n_stream), n_stream))
        mids = self.both(pair, "find the middle id", partial(
            respbench.id_at, key="r", position=n_stream // 2))
        for p in (1, 16):
            n = s["range_p1"] if p == 1 else s["range_p16"]
            r, t = self.both(pair, f"XRANGE COUNT 100 P{p}", partial(
                respbench.redis_benchmark, command=["XRANGE", "r", "-", "+", "COUNT", "100"],
                requests=n, pipeline=p, records_per_op=100))
            self.rows.append(Row(bench, f"XRANGE r - + COUNT 100, P{p}", "ops/s", per(r), per(t),
                                 target=0.3))
            self.extra[f"xrange_p{p}"] = {"redis": r, "topicsrv": t}
        for p in (1, 16):
            n = s["range_p1"] if p == 1 else s["range_p16"]
            cells = []
            for proc, mid in zip(pair, mids, strict=True):
                if not isinstance(mid, bytes) or proc.resp_port is None:
                    cells.append(f"error: no middle id ({mid})")
                    continue
                self.log(f"XREAD COUNT 100 P{p} on {proc.name}")
                cells.append(attempt(partial(
                    respbench.redis_benchmark, proc.resp_port,
                    command=["XREAD", "COUNT", "100", "STREAMS", "r", mid.decode()],
                    requests=n, pipeline=p, records_per_op=100)))
            self.rows.append(Row(bench, f"XREAD COUNT 100 STREAMS r <mid>, P{p}", "ops/s",
                                 per(cells[0]), per(cells[1]), target=0.3))
        py = "RESP, redis-py (records/s)"
        r, t = self.both(pair, "redis-py pipelined XADD", lambda port: respbench.py_xadd_pipelined(
            port, "py", s["py_xadd"]))
        self.rows.append(Row(py, "pipelined XADD 100 B x 100", "rec/s", per(r, "records_per_s"),
                             per(t, "records_per_s")))
        r, t = self.both(pair, "redis-py XREAD paging", lambda port: respbench.py_xread_paging(
            port, "r", min(s["py_xread"], n_stream)))
        self.rows.append(Row(py, f"XREAD COUNT 100 paging {min(s['py_xread'], n_stream):,}",
                             "rec/s", per(r, "records_per_s"), per(t, "records_per_s")))
        r, t = self.both(pair, "redis-py XREADGROUP+XACK", lambda port: respbench.py_group_loop(
            port, "r", min(s["group"], n_stream)))
        self.rows.append(Row(py, "XREADGROUP COUNT 10 + XACK loop", "rec/s",
                             per(r, "records_per_s"), per(t, "records_per_s")))
        self.queue_workloads(pair, s)
        self.script_workloads(pair, s)
        self.wake_workloads(pair, s)

    def string_workloads(self, pair: tuple[Proc, Proc], s: dict[str, int]) -> None:
        """GET/SET of 100-byte string values on random keys (bench/stringbench.py); GET P1's
        target is the PING P1 ratio of this run (issue 25), SET P1's 0.85 (issue 38: the PING
        ratio withdrawn for SET, redis-server's P1 rows being client-bound here), P16's 0.5."""
        keys = s["str_keys"]
        sec = f"RESP strings, redis-benchmark -c 50 -r {keys:,} (keys loaded first)"
        spent: list[float] = []
        r, t = self.both(pair, "PING P1", partial(
            respbench.redis_benchmark, command=["PING"], requests=s["str_p1"]), spent)
        ping = Row(sec, "PING, P1", "ops/s", per(r), per(t), ref_note=self.busy_note(r, t, spent))
        self.rows.append(ping)
        self.both(pair, f"load {keys} string keys", lambda port: Measure(
            0, 0, stringbench.load(port, keys), keys))
        for name, fn in (("SET key:__rand_int__ <100 B>", stringbench.set_bench),
                         ("GET key:__rand_int__", stringbench.get_bench)):
            for p in (1, 16):
                n = s["str_p1"] if p == 1 else s["str_p16"]
                spent = []
                r, t = self.both(pair, f"{name.split()[0]} P{p}", partial(
                    fn, requests=n, pipeline=p, keys=keys), spent)
                note = self.busy_note(r, t, spent) if p == 1 else ""
                is_set = name.startswith("SET")
                target = (SET_P1_TARGET if is_set else ping.ratio) if p == 1 else 0.5
                why = "issue 38's SET P1 target" if is_set else "P1 target = the PING P1 ratio"
                self.rows.append(Row(sec, f"{name}, P{p}", "ops/s", per(r), per(t),
                                     target=target, ref_note=f"{why}; {note}" if p == 1 else ""))
                self.extra[f"{name.split()[0].lower()}_p{p}"] = {"redis": r, "topicsrv": t}
        r, t = self.both(pair, "SET new keys P16", partial(
            stringbench.new_keys_bench, requests=s["str_p16"], pipeline=16))
        self.rows.append(Row(sec, "SET new:__rand_int__ <100 B> (each SET creates its key), P16",
                             "ops/s", per(r), per(t), ref_note="reported, no target: what "
                             "creating a key costs (bench/stringbench.py Rule 3)"))

    def script_workloads(self, pair: tuple[Proc, Proc], s: dict[str, int]) -> None:
        """EVALSHA of a script doing one GET and one INCR (bench/scriptbench.py), P1 and P16,
        the median of alternating rounds on the same pair (issue 27)."""
        rounds = {"full": 3, "quick": 3, "tiny": 1}[self.mode]
        sec = (f"Lua scripting, redis-benchmark -c 50 -r {scriptbench.KEYS:,}, median of "
               f"{rounds} alternating rounds")
        red, top = pair
        assert red.resp_port is not None and top.resp_port is not None
        res = attempt(lambda: scriptbench.run(
            red.resp_port, top.resp_port, rounds,  # type: ignore[arg-type]
            {1: s["eval_p1"], 16: s["eval_p16"]}, log=self.log))
        for p in (1, 16):
            label = f"EVALSHA <GET + INCR> 1 n:__rand_int__, P{p}"
            if isinstance(res, str):
                self.rows.append(Row(sec, label, "ops/s", res, res))
                continue
            r, t = res[p].median()
            self.rows.append(Row(sec, label, "ops/s", r, t, target=EVALSHA_TARGETS[p],
                                 ref_note="rounds: " + ", ".join(
                                     f"{x:.2f}" for x in res[p].ratios())))
            self.extra[f"evalsha_p{p}"] = {"redis": res[p].redis, "topicsrv": res[p].topicsrv}

    def wake_workloads(self, pair: tuple[Proc, Proc], s: dict[str, int]) -> None:
        """Wake-up latency of one blocked reader (bench/wakebench.py): the uncontended path of
        the delivery scheduler (issue 14), as wake-ups/s = 1 / median latency."""
        sec = "wake-up of one blocked reader (wake-ups/s = 1 / median)"
        n = s["wake"]
        r, t = self.both(pair, f"XREAD BLOCK wake-up x {n}", lambda port: wakebench.xread_block(port, n))
        self.rows.append(Row(sec, "XREAD BLOCK, XADD on another connection", "1/s", per(r), per(t)))
        self.extra["wake_xread"] = {"redis": r, "topicsrv": t}
        top = pair[1]
        if top.http_port is not None:
            self.log(f"SSE wake-up x {n}")
            e = attempt(lambda: wakebench.sse_wake(top.http_port, n))  # type: ignore[arg-type]
            self.rows.append(Row(sec, "SSE watch, POST of one record", "1/s", per(r), per(e),
                                 ref_note="redis column = redis-server's XREAD BLOCK wake-up"))
            self.extra["wake_sse"] = e

    def queue_workloads(self, pair: tuple[Proc, Proc], s: dict[str, int]) -> None:
        """Lease queues (bench/queuebench.py): topicsrv TOPIC.CLAIM + TOPIC.ACK vs redis
        XREADGROUP + XACK, the same N jobs pre-filled on both, drained by 8 worker processes.
        Two pairings, each the same durability work on both servers (queuebench Rule 3): in
        memory (a `DURABILITY ephemeral` queue vs redis-server without persistence, the
        targets) and logged (the default `disk` queue vs redis-server `appendonly yes`,
        `appendfsync everysec`)."""
        sec = "RESP, redis-py, 8 worker processes (jobs/s)"
        red, top = pair
        refs = {kind: red if not p.redis_options else self.procs.start_redis(extra=p.redis_options)
                for kind, p in queuebench.PAIRINGS.items()}
        try:
            # MAX 100's target (>= 1.0, issue 12) is withdrawn: its ratio is reported, no target
            for count, target in ((1, 0.5), (100, None)):
                n = s[f"queue_{count}"]
                for kind, pairing in queuebench.PAIRINGS.items():
                    cells = []
                    for proc in (refs[kind], top):
                        self.log(f"queue MAX/COUNT {count} {pairing.label}, {n} jobs, on {proc.name}")
                        port = proc.resp_port
                        cells.append("error: no RESP front" if port is None else attempt(partial(
                            queuebench.workload, port, f"jobs{count}{kind}", n, count,
                            queue=proc is top, options=pairing.queue_options)))
                    label = (f"CLAIM MAX {count} + ACK vs XREADGROUP COUNT {count} + XACK"
                             if count == 1 else
                             f"CLAIM MAX {count} + one ACK vs XREADGROUP COUNT {count} + XACK")
                    self.rows.append(Row(sec, f"{label}, {pairing.label}", "jobs/s",
                                         per(cells[0], "records_per_s"), per(cells[1], "records_per_s"),
                                         target=target if pairing.targeted and target else None,
                                         ref_note=pairing.note))
                    self.extra[f"queue_{count}_{pairing.label.replace(' ', '_')}"] = {
                        "redis": cells[0], "topicsrv": cells[1]}
        finally:
            for proc in refs.values():
                if proc is not red:
                    self.procs.stop(proc)

    def http_workloads(self, top: Proc, s: dict[str, int]) -> None:
        sec = "HTTP, topicsrv only (records/s)"
        port = top.http_port
        assert port is not None
        ref_write = self._redis_records("xadd_p16")
        ref_read = self._redis_records("xrange_p16")
        n = s["http_records"]
        self.log(f"HTTP batched writes of {n} records")
        w = attempt(lambda: httpbench.write_batches(port, "hd", n))
        self.rows.append(Row(sec, "POST batches of 1000 x 100 B", "rec/s", ref_write,
                             per(w, "records_per_s"),
                             ref_note="redis column = redis-benchmark XADD P16 records/s"))
        self.log(f"HTTP diff paging through {n} records")
        d = attempt(lambda: httpbench.diff_paging(port, "hd", n))
        self.rows.append(Row(sec, f"diff paging {n:,} records, limit=1000", "rec/s", ref_read,
                             per(d, "records_per_s"),
                             ref_note="redis column = redis-benchmark XRANGE COUNT 100 P16 records/s"))
        self.log(f"SSE fan-out of {s['sse']} records to 10 watchers")
        e = attempt(lambda: httpbench.sse_fanout(port, "sse", s["sse"]))
        self.rows.append(Row(sec, "SSE delivery to 10 watchers", "rec/s", ref_read,
                             per(e, "records_per_s"),
                             ref_note="SSE rate = records delivered to all watchers per second"))

    def routers(self) -> None:
        """Router workloads on a fresh topicsrv (bench/routerbench.py). Forwarding rows compare
        with the batched HTTP write rate of the same run (can routers keep up with writers?);
        the write row compares writers of a source with 4 routers to writers with none."""
        s = self.sizes
        top = self.procs.start_topicsrv()
        port = top.http_port
        assert port is not None
        sec = "routers, topicsrv only (records/s)"
        self.log(f"source writes, 0 vs 4 routers, {s['router_write']} records")
        w = attempt(lambda: routerbench.write_ratio(port, s["router_write"]))
        none = w["none"] if isinstance(w, dict) else w
        four = w["four"] if isinstance(w, dict) else w
        self.rows.append(Row(sec, "source writes with 4 routers vs none (POST 1000 x 100 B)",
                             "rec/s", per(none, "records_per_s"), per(four, "records_per_s"),
                             target=0.8,
                             ref_note="redis column = the same writes to a topic with no router"))
        for fanout in (1, 4):
            n = s["router_fwd"]
            self.log(f"forwarding {n} records through {fanout} router(s)")
            f = attempt(lambda fo=fanout, n=n: routerbench.forwarding(port, n, fo))
            self.rows.append(Row(sec, f"forwarding, fan-out {fanout} (source rec/s per router)",
                                 "rec/s", per(none, "records_per_s"), per(f, "records_per_s"),
                                 ref_note="redis column = batched HTTP writes with no router"))
            self.extra[f"router_forward_{fanout}"] = f
        self.extra["router_writes"] = w
        self.procs.stop(top)

    def spark(self) -> None:
        """The Spark source and sink on a fresh topicsrv (bench/sparkbench.py), beside one
        redis-py client paging the same topic (the ceiling; issue 41's targets)."""
        n = self.sizes["spark"]
        if self.mode == "tiny":  # the harness smoke test: no JVM
            self.rows.append(Row("Spark local[2]", "source and sink", "rec/s", None,
                                 "pending (not run in tiny mode: it starts a JVM)"))
            return
        top = self.procs.start_topicsrv()
        assert top.resp_port is not None
        self.log(f"Spark local[2]: {n:,} records of 100 B, source count / Parquet / sink")
        from bench import sparkbench

        f = attempt(lambda: sparkbench.measure(top.resp_port, n))
        self.procs.stop(top)
        sec = f"Spark local[2], {n:,} x 100 B records (redis column = 1 redis-py client paging)"
        ceiling = f.ceiling_per_s if isinstance(f, sparkbench.Figures) else str(f)

        def cell(attr: str) -> float | str:
            return getattr(f, attr) if isinstance(f, sparkbench.Figures) else str(f)

        self.rows += [
            Row(sec, "source count()", "rec/s", ceiling, cell("count_per_s"), target=1.0),
            Row(sec, "source -> write.parquet", "rec/s", ceiling, cell("parquet_per_s"),
                target=0.7),
            Row(sec, "sink, default options (idempotent)", "rows/s", None, cell("sink_per_s"),
                target=100_000.0),
        ]
        if isinstance(f, sparkbench.Figures):
            self.extra["spark"] = f.as_dict()

    def _redis_records(self, key: str) -> float | str:
        m = self.extra.get(key, {}).get("redis")
        return m.records_per_s if isinstance(m, Measure) else "error: no redis reference"

    def memory(self) -> None:
        n = self.sizes["memory"]
        self.log(f"memory: fresh servers, {n} x 100 B records each")
        red = self.procs.start_redis()
        red_m = attempt(lambda: membench.measure(red, n))
        self.procs.stop(red)
        top = self.procs.start_topicsrv()
        top_m = attempt(lambda: membench.measure(top, n) if top.resp_port else "error: no RESP")
        self.procs.stop(top)
        sec = f"memory, {n:,} x 100 B records via XADD"

        def get(m: Any, key: str) -> float | str:
            return m[key] if isinstance(m, dict) else str(m)

        self.rows.append(Row(sec, "RSS growth per record", "B/rec", get(red_m, "rss_per_record"),
                             get(top_m, "rss_per_record"), target=2.0, lower_is_better=True))
        self.rows.append(Row(sec, "redis used_memory per record", "B/rec",
                             get(red_m, "used_memory_per_record"), None))
        self.extra["memory"] = {"redis": red_m, "topicsrv": top_m}
        self.log("engine in-process memory (bench/engine_memory.py)")
        from bench import engine_memory

        eng = attempt(lambda: engine_memory.measure(n, "fields"))
        self.rows.append(Row(sec, "engine only, in-process RSS growth", "B/rec", None,
                             get(eng, "rss_bytes_per_record"),
                             ref_note="bench/engine_memory.py --form fields (no server, no storage)"))
        k = self.sizes["str_memory"]
        self.log(f"memory: fresh servers, {k} string keys x 100 B each")
        cells = []
        for start in (self.procs.start_redis, self.procs.start_topicsrv):
            proc = start()
            cells.append(attempt(lambda proc=proc: stringbench.memory_per_key(proc, k)))
            self.procs.stop(proc)
        self.rows.append(Row(f"memory, {k:,} string keys x 100 B via SET", "RSS growth per key",
                             "B/key", get(cells[0], "rss_per_key"), get(cells[1], "rss_per_key"),
                             target=2.0, lower_is_better=True))
        self.extra["string_memory"] = {"redis": cells[0], "topicsrv": cells[1]}


    def blocked(self) -> None:
        """Thousands of blocked clients (issue 40, bench/blockbench.py): one fresh server of
        each kind runs memory, PING during XADDs, CPU per XADD and the XREAD fan-out."""
        s = self.sizes
        g, c, x, f = s["blocked_group"], s["blocked_cpu"], s["blocked_xadds"], s["fanout"]
        cells: list[Any] = []
        for start in (self.procs.start_redis, self.procs.start_topicsrv):
            proc = start()
            cells.append(attempt(lambda proc=proc: blockbench.run(proc, g, c, x, f, log=self.log)))
            self.procs.stop(proc)
        red, top = cells
        sec = f"blocked clients, fresh servers ({g:,} group readers; CPU: {c:,}; fan-out: {f:,})"

        def get(m: Any, key: str) -> float | str:
            return getattr(m, key) if isinstance(m, blockbench.Result) else str(m)

        both = (("redis", red), ("topicsrv", top))
        self.rows.append(Row(sec, f"memory per blocked client ({g:,} XREADGROUP BLOCK)",
                             "B/client", get(red, "memory_per_client"),
                             get(top, "memory_per_client"), target=2.0, lower_is_better=True,
                             ref_note="RSS growth / clients, the connection included"))
        maxes = ", ".join(f"{who} {m.ping_max_ms:.2f} ms ({m.pings} PINGs)" for who, m in both
                          if isinstance(m, blockbench.Result))
        self.rows.append(Row(sec, f"PING p50 during 20 XADDs, {g:,} group readers blocked", "ms",
                             get(red, "ping_p50_ms"), get(top, "ping_p50_ms"), target=3.0,
                             lower_is_better=True, ref_note=f"max: {maxes}"))
        note = "redis column = topicsrv's CPU per XADD with nobody blocked"
        if isinstance(red, blockbench.Result):
            note += (f"; redis-server: {red.cpu_none_us:.1f} us none, {red.cpu_blocked_us:.1f} us "
                     f"blocked ({red.cpu_blocked_us / max(red.cpu_none_us, 1e-9):.2f}x)")
        self.rows.append(Row(sec, f"server CPU per XADD, {c:,} group readers blocked vs none",
                             "us", get(top, "cpu_none_us"), get(top, "cpu_blocked_us"),
                             target=2.0, lower_is_better=True, ref_note=note))
        done = ", ".join(f"{who} {m.fanout_ms:.0f} ms" for who, m in both
                         if isinstance(m, blockbench.Result))
        self.rows.append(Row(sec, f"XREAD BLOCK fan-out to {f:,} readers: longest PING", "ms",
                             get(red, "stall_ms"), get(top, "stall_ms"), target=2.0,
                             lower_is_better=True, ref_note=f"every reader served after: {done}"))
        self.extra["blocked"] = {who: asdict(m) if isinstance(m, blockbench.Result) else m
                                 for who, m in both}


    def colls(self) -> None:
        """Lists and hashes against redis-server (issue 35, bench/collphase.py): LPUSH, RPOP,
        HSET, HGET at P1 and P16, BRPOP fed by LPUSH, memory per element, checkpoint stall."""
        rows, extra = collphase.Phase(self.procs, self.sizes, self.log).run()
        self.rows += rows
        self.extra.update(extra)

    def zsets(self) -> None:
        """Sets and sorted sets against redis-server (issue 36, bench/zsetphase.py): SADD,
        SISMEMBER, ZADD, ZRANGEBYSCORE, ZPOPMIN at P1 and P16, memory per member, RQ jobs/s."""
        rows, extra = zsetphase.Phase(self.procs, self.sizes, self.log).run()
        self.rows += rows
        self.extra.update(extra)

    def repl(self) -> None:
        """Replication against redis-server replicas (issue 37, bench/replbench.py): XADD and
        SET P16 on a primary with one replica, their single-node ratios as targets, and the
        replica's lag in bytes and ms during the XADD load."""
        rounds = {"full": 3, "quick": 3, "tiny": 1}[self.mode]
        rows, extra = replbench.Phase(self.procs, self.sizes, self.log, rounds).run()
        self.rows += rows
        self.extra.update(extra)


def storage_bench(mode: str) -> dict[str, Any]:
    """fsync-class ack latency from bench/storage_bench.py (storage helper's `latency()`):
    single-record writes to a `durable` topic by 1, 8 and 64 concurrent writers."""
    import shutil
    import tempfile

    import trio

    from bench.storage_bench import latency

    seconds = {"full": 2.0, "quick": 1.0, "tiny": 0.2}[mode]
    root = Path(tempfile.mkdtemp(prefix="bench-storage-"))
    try:
        return {str(n): trio.run(latency, root / f"lat{n}", n, seconds) for n in (1, 8, 64)}
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--quick", action="store_true", help="smaller sizes; under 2 minutes")
    group.add_argument("--tiny", action="store_true",
                       help="a few hundred ops per workload (smoke test; numbers meaningless)")
    parser.add_argument("--out", type=Path, default=RESULTS, help=f"JSON results (default {RESULTS})")
    parser.add_argument("--skip", action="append", default=[],
                        choices=PHASES, help="skip a phase (repeatable)")
    parser.add_argument("--only", action="append", default=[], choices=PHASES,
                        help="run only this phase (repeatable), e.g. --only colls")
    parser.add_argument("--strict", action="store_true", help="exit 1 if any workload errored")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress lines on stderr")
    args = parser.parse_args(argv)
    mode = "quick" if args.quick else "tiny" if args.tiny else "full"
    run = Run(mode, SIZES[mode], verbose=not args.quiet)
    install_signal_handlers()
    t0 = time.perf_counter()
    failed: list[str] = []
    try:
        for name, phase in (("micro", run.micro), ("writes", run.writes), ("pubsub", run.pubsub),
                            ("servers", run.servers),
                            ("routers", run.routers), ("memory", run.memory),
                            ("spark", run.spark), ("blocked", run.blocked),
                            ("colls", run.colls), ("zsets", run.zsets), ("repl", run.repl)):
            if name in args.skip or (args.only and name not in args.only):
                continue
            try:
                phase()
            except Exception as exc:  # noqa: BLE001 - report it, stop its servers, go on
                failed.append(f"phase {name!r} failed: {exc}")
                print(f"bench: {failed[-1]}", file=sys.stderr)
                run.procs.stop_all()
    finally:
        run.procs.stop_all()
    elapsed = time.perf_counter() - t0
    print(render(run.rows, mode))
    print(f"({elapsed:.0f} s; results in {args.out})")
    extra = {"seconds": elapsed, "processes": run.procs.started, "failed_phases": failed,
             "details": {k: _plain(v) for k, v in run.extra.items()}}
    save(args.out, run.rows, mode, run.sizes, extra)
    for line in failed:
        print(f"ERROR: {line}")
    errors = [r for r in run.rows if r.status == "error"]
    return 1 if failed or (args.strict and errors) else 0


def _plain(value: Any) -> Any:
    if isinstance(value, Measure):
        return {k: getattr(value, k) for k in value.__slots__}
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return value


if __name__ == "__main__":
    sys.exit(main())
