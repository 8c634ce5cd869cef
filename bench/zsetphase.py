"""The sets-and-sorted-sets phase of `python -m bench` (issue 36): its servers, rows, targets.

Rule 1: as bench/collphase.py Rule 1 (whose helpers this phase shares): one fresh pair for
the throughput rows (redis-server's row first, then topicsrv's, both alive), one server at a
time for each memory fill, and one fresh pair with every write on disk for the RQ row.
Rule 2: the targets are the issue's: SADD/SISMEMBER/ZADD/ZRANGEBYSCORE/ZPOPMIN P1 >= 0.8x and
P16 >= 0.5x, RSS per member <= 2x; the RQ row has none (reported; the issue's goal is to be
ahead of redis-server `appendfsync always`). PING P1 is beside them, no target.
Rule 3: a failing workload becomes its cells' error text (bench/report.py Rule 2).
"""

from __future__ import annotations

from typing import Any

from bench import collphase, zsetbench
from bench.collphase import _cell
from bench.report import Row

REDIS_FSYNC = ("--appendonly", "yes", "--appendfsync", "always")
TOPICSRV_FSYNC = ("--keyspace-durability", "fsync")


class Phase(collphase.Phase):
    def run(self) -> tuple[list[Row], dict[str, Any]]:
        for step in (self.throughput, self.memory, self.rq):
            try:
                step()
            finally:
                self.procs.stop_all()
        return self.rows, self.extra

    def throughput(self) -> None:
        keys = self.sizes["str_keys"]
        sec = (f"RESP sets and sorted sets, redis-benchmark -c 50 -r {keys:,} ({keys:,} sets "
               f"of 10 and sorted sets of {zsetbench.ZPRELOAD} loaded first)")
        self._keyed_rows(sec, "PING, P1 (reference, sets phase)",
                         f"load {keys} sets and sorted sets", zsetbench.load, zsetbench.ROWS)

    def memory(self) -> None:
        s = self.sizes
        z, n = s["zset_memory"], s["set_memory"]
        self._memory("memory, sets and sorted sets, RSS growth of a fresh server over one fill",
                     zsetbench.memory, (
            ("zset", z, f"one sorted set of {z:,} x 10 B members (per member)"),
            ("set", n, f"{n:,} sets x 10 members of 10 B (per member)"),
            ("intset", n, f"{n:,} sets x 10 integers (intsets, per member)")))

    def rq(self) -> None:
        jobs = self.sizes["rq_jobs"]
        pair = (self.procs.start_redis(extra=REDIS_FSYNC),
                self.procs.start_topicsrv(extra=TOPICSRV_FSYNC))
        (r, t), _ = self._both(pair, f"RQ: {jobs} jobs, SimpleWorker burst",
                               lambda port: zsetbench.rq_jobs(port, jobs))
        note = "; ".join(f"{who}: enqueue {m['enqueue_per_s']:,.0f} jobs/s"
                         for who, m in (("redis", r), ("topicsrv", t)) if isinstance(m, dict))
        self.rows.append(Row(
            f"RQ {jobs:,} jobs (operator.mul), topicsrv --keyspace-durability fsync vs "
            "redis-server --appendonly yes --appendfsync always",
            "SimpleWorker burst, in-process (no target)", "jobs/s",
            _cell(r, "jobs_per_s"), _cell(t, "jobs_per_s"), ref_note=note))
        self.extra["rq"] = {"redis": r, "topicsrv": t}
