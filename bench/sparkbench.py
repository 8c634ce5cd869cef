"""The Spark pipeline beside the single-client ceiling: `python -m bench.sparkbench`.

Rule 1: one fresh topicsrv; one topic of N records of 100 bytes (pipelined XADD); the
ceiling is one redis-py client paging that topic with XREAD COUNT <pageSize>, measured in the
same run, before and after the Spark figures (the better of the two is the ceiling).
Rule 2: Spark runs `local[2]` in this process; the session's start and one warm-up read are
excluded, so the figures are the warm pipeline: `count()` of the whole topic, the same read
written to Parquet, and a sink write of N rows (a `data` column of 100-byte strings) with the
default options (idempotent).
Rule 3: without Java 17+ or pyspark the rows say why (an error cell), as the Spark tests skip.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Any

import redis

from bench import respbench

VALUE = b"x" * 100
PAGE = 1000


@dataclass
class Figures:
    records: int
    ceiling_per_s: float  # one redis-py client paging the topic
    count_per_s: float
    parquet_per_s: float
    sink_per_s: float
    parallelism: int
    partitions: int

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def fill(port: int, key: str, n: int) -> None:
    r = redis.Redis(host="127.0.0.1", port=port, socket_timeout=120)
    pipe = r.pipeline(transaction=False)
    for i in range(n):
        pipe.execute_command("XADD", key, "*", "d", VALUE)
        if i % 1000 == 999:
            pipe.execute()
    pipe.execute()
    r.close()


def ceiling(port: int, key: str, n: int, page: int = PAGE) -> float:
    """Records/s of one redis-py client paging `key` from the start (Rule 1)."""
    return respbench.py_xread_paging(port, key, n, count=page).records_per_s


def session(cores: int = 2) -> Any:
    from topicsrv.spark import spark_session

    return spark_session("topicsrv-bench", f"local[{cores}]", {
        "spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": str(cores), "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1"})


def measure(port: int, n: int, cores: int = 2) -> Figures:
    src, sink = "spark.src", "spark.sink"
    fill(port, src, n)
    best = ceiling(port, src, n)
    spark = session(cores)
    url = f"redis://127.0.0.1:{port}"
    out = tempfile.mkdtemp(prefix="bench-spark-")
    try:
        def read() -> Any:
            return spark.read.format("topics").option("url", url).option("topic", src).load()

        read().count()  # warm-up: Python workers, JIT
        t0 = time.perf_counter()
        got = read().count()
        count_s = time.perf_counter() - t0
        if got != n:
            raise RuntimeError(f"count() saw {got} of {n} records")
        partitions = read().rdd.getNumPartitions()
        t0 = time.perf_counter()
        read().write.mode("overwrite").parquet(out + "/p")
        parquet_s = time.perf_counter() - t0
        from pyspark.sql import functions as F  # noqa: N812

        rows = spark.range(n).select(F.lit("y" * 100).alias("data"))
        rows.limit(1000).write.format("topics").option("url", url).option("topic", "spark.warm") \
            .mode("append").save()  # warm-up
        t0 = time.perf_counter()
        rows.write.format("topics").option("url", url).option("topic", sink).mode("append").save()
        sink_s = time.perf_counter() - t0
        length = redis.Redis(host="127.0.0.1", port=port).xlen(sink)
        if length != n:
            raise RuntimeError(f"the sink wrote {length} of {n} rows")
        best = max(best, ceiling(port, src, n))
        return Figures(n, best, n / count_s, n / parquet_s, n / sink_s,
                       spark.sparkContext.defaultParallelism, partitions)
    finally:
        spark.stop()
        shutil.rmtree(out, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.sparkbench")
    p.add_argument("--records", type=int, default=1_000_000)
    p.add_argument("--cores", type=int, default=2)
    p.add_argument("--resp-port", type=int, help="an already running topicsrv (else a fresh one)")
    args = p.parse_args(argv)
    from bench.procs import Procs

    procs = Procs()
    try:
        port = args.resp_port
        if port is None:
            top = procs.start_topicsrv()
            port = top.resp_port
            assert port is not None
        f = measure(port, args.records, args.cores)
        print(f"records {f.records:,}; defaultParallelism {f.parallelism}, "
              f"read partitions {f.partitions}")
        print(f"ceiling (1 redis-py client, XREAD COUNT {PAGE}) {f.ceiling_per_s:,.0f} rec/s")
        for label, v, target in (("source count()", f.count_per_s, 1.0),
                                 ("source -> Parquet", f.parquet_per_s, 0.7)):
            ratio = v / f.ceiling_per_s
            print(f"{label:20} {v:>12,.0f} rec/s  {ratio:.2f}x  target {target}x "
                  f"{'ok' if ratio >= target else 'MISS'}")
        print(f"{'sink (idempotent)':20} {f.sink_per_s:>12,.0f} rows/s  target 100,000 "
              f"{'ok' if f.sink_per_s >= 100_000 else 'MISS'}")
    finally:
        procs.stop_all()
    return 0


if __name__ == "__main__":
    sys.exit(main())
