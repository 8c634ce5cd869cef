"""Snapshot a range of topicsrv topics to Parquet with the `topics` Spark source.

    python spark/topic_to_parquet.py --url redis://127.0.0.1:6379 --topic orders --out /tmp/orders
    spark-submit --py-files topicsrv-spark.zip spark/topic_to_parquet.py --topic orders --out ...

The range is (starting, ending] in seqs: `--starting earliest` (default), `latest`, or JSON
{"topic": seq} (read after that seq); `--ending latest` (default) or JSON (read through it).
Loss inside the range (cap/TTL eviction crossing it while the job reads) fails the job unless
--continue-on-loss is given; --include-tombstones keeps those gaps as kind="tombstone" rows.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="topic_to_parquet.py",
        description="Snapshot a topicsrv topic range to Parquet (one row per record).")
    p.add_argument("--url", default="redis://127.0.0.1:6379", help="topicsrv RESP URL")
    p.add_argument("--topic", required=True, help='topic, or comma-separated topics "a,b"')
    p.add_argument("--out", required=True, help="output directory (local path, hdfs://, s3a://)")
    p.add_argument("--starting", default="earliest", help='earliest | latest | {"topic": seq}')
    p.add_argument("--ending", default="latest", help='latest | {"topic": seq}')
    p.add_argument("--node", help="own-node filter: drop records whose $node is this (a,b,...)")
    p.add_argument("--min-partitions", type=int, default=None,
                   help="split the seq ranges into at least this many Spark tasks")
    p.add_argument("--partition-by", default="topic",
                   help="comma-separated Parquet partition columns ('' for none)")
    p.add_argument("--mode", default="errorifexists",
                   choices=["errorifexists", "overwrite", "append", "ignore"],
                   help="Parquet save mode")
    p.add_argument("--continue-on-loss", action="store_true",
                   help="log data loss and continue (failOnDataLoss=false)")
    p.add_argument("--include-tombstones", action="store_true",
                   help="write loss as kind='tombstone' rows (implies --continue-on-loss)")
    p.add_argument("--master", help="Spark master when run with python (default local[*]); "
                                    "spark-submit's --master wins under spark-submit")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from topicsrv.spark import spark_session

    spark = spark_session("topicsrv-topic-to-parquet", args.master)
    reader = (spark.read.format("topics").option("url", args.url).option("topic", args.topic)
              .option("startingOffsets", args.starting).option("endingOffsets", args.ending))
    if args.node:
        reader = reader.option("node", args.node)
    if args.min_partitions:
        reader = reader.option("minPartitions", str(args.min_partitions))
    if args.continue_on_loss or args.include_tombstones:
        reader = reader.option("failOnDataLoss", "false")
    if args.include_tombstones:
        reader = reader.option("includeTombstones", "true")
    df = reader.load()
    writer = df.write.mode(args.mode)
    columns = [c.strip() for c in args.partition_by.split(",") if c.strip()]
    if columns:
        writer = writer.partitionBy(*columns)
    t0 = time.perf_counter()
    writer.parquet(args.out)
    elapsed = time.perf_counter() - t0
    for line in summary(spark, args.out, elapsed):
        print(line, flush=True)
    return 0


def summary(spark: Any, out: str, elapsed: float) -> list[str]:
    """What the Parquet at `out` holds, per topic: records and their seqs, losses, the rate."""
    from pyspark.sql import functions as F  # noqa: N812

    tomb = F.col("kind") == "tombstone"
    per_topic = (spark.read.parquet(out).groupBy("topic").agg(
        F.count(F.when(~tomb, 1)).alias("records"),
        F.min(F.when(~tomb, F.col("seq"))).alias("first"),
        F.max(F.when(~tomb, F.col("seq"))).alias("last"),
        F.count(F.when(tomb, 1)).alias("gaps"),
        F.coalesce(F.sum(F.when(tomb, F.col("gap_to") - F.col("gap_from") + 1)), F.lit(0))
        .alias("lost")).orderBy("topic").collect())
    lines = []
    total = 0
    for row in per_topic:
        total += row.records
        seqs = f"seqs {row.first}..{row.last}" if row.records else "no records"
        loss = f", {row.gaps} gap(s): {row.lost} seqs lost" if row.gaps else ""
        lines.append(f"  {row.topic}: {row.records} records, {seqs}{loss}")
    rate = f" ({total / elapsed:,.0f} records/s)" if elapsed > 0 and total else ""
    return [f"wrote {out}: {total} records in {elapsed:.1f} s{rate}", *lines]


if __name__ == "__main__":
    sys.exit(main())
