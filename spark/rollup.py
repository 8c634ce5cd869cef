"""A streaming rollup: counts per tag per time window of a topic, written back into a topic.

    python spark/rollup.py --url redis://127.0.0.1:6379 --source pageviews \
        --dest pageviews.per-minute --checkpoint /tmp/rollup-ckpt

Each output record is one (window, tag) count; its data is JSON
{"window_start": ..., "window_end": ..., "tag": ..., "count": n} and its tag is the input tag.
`--output-mode update` (default) re-emits a window whenever its count changes;
`--output-mode append` emits each window once, after the watermark (--lateness) passes it.
Exactly-once reading comes from the checkpoint; writing back is at-least-once (a replayed
micro-batch XADDs its rows again), see docs/spark.md.
"""

from __future__ import annotations

import argparse
import sys


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="rollup.py",
        description="Streaming counts per tag per window from one topicsrv topic into another.")
    p.add_argument("--url", default="redis://127.0.0.1:6379", help="topicsrv RESP URL")
    p.add_argument("--source", required=True, help="topic to read")
    p.add_argument("--dest", required=True, help="topic to write the counts to")
    p.add_argument("--checkpoint", required=True, help="Spark checkpoint directory")
    p.add_argument("--window", default="1 minute", help="window length (Spark interval)")
    p.add_argument("--lateness", default="1 minute", help="watermark delay for late records")
    p.add_argument("--output-mode", default="update", choices=["update", "append"])
    p.add_argument("--starting", default="earliest", help='earliest | latest | {"topic": seq}')
    p.add_argument("--max-per-trigger", type=int, help="maxOffsetsPerTrigger")
    p.add_argument("--trigger", default="10 seconds", help="processing-time trigger interval")
    p.add_argument("--once", action="store_true",
                   help="process what is available now, then stop (Trigger.AvailableNow)")
    p.add_argument("--continue-on-loss", action="store_true",
                   help="log data loss and continue (failOnDataLoss=false)")
    p.add_argument("--shuffle-partitions", type=int, default=8,
                   help="spark.sql.shuffle.partitions of the aggregation (state partitions; "
                        "fixed by the checkpoint after the first run)")
    p.add_argument("--master", help="Spark master when run with python (default local[*])")
    return p.parse_args(argv)


def build(spark: object, args: argparse.Namespace) -> object:
    """The streaming DataFrame of rollup records (columns data, tag)."""
    from pyspark.sql import functions as F  # noqa: N812

    reader = (spark.readStream.format("topics")  # type: ignore[attr-defined]
              .option("url", args.url).option("topic", args.source)
              .option("startingOffsets", args.starting))
    if args.max_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(args.max_per_trigger))
    if args.continue_on_loss:
        reader = reader.option("failOnDataLoss", "false")
    events = reader.load().where(F.col("kind") == "record")
    counts = (events.withWatermark("ts", args.lateness)
              .groupBy(F.window("ts", args.window), F.col("tag"))
              .count())
    body = F.struct(
        F.date_format("window.start", "yyyy-MM-dd'T'HH:mm:ss.SSSXXX").alias("window_start"),
        F.date_format("window.end", "yyyy-MM-dd'T'HH:mm:ss.SSSXXX").alias("window_end"),
        F.col("tag"),
        F.col("count"),
    )
    return counts.select(F.to_json(body, {"ignoreNullFields": "false"}).alias("data"), "tag")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from topicsrv.spark import spark_session

    spark = spark_session("topicsrv-rollup", args.master)
    spark.conf.set("spark.sql.shuffle.partitions", str(args.shuffle_partitions))
    out = build(spark, args)

    def write_batch(batch: object, batch_id: int) -> None:
        # Spark lets Python-data-source stream sinks run in append mode only; foreachBatch
        # with the batch sink carries update-mode output too. At-least-once, like the sink.
        (batch.write.format("topics")  # type: ignore[attr-defined]
         .option("url", args.url).option("topic", args.dest).mode("append").save())

    writer = (out.writeStream.foreachBatch(write_batch)  # type: ignore[attr-defined]
              .option("checkpointLocation", args.checkpoint).outputMode(args.output_mode))
    writer = writer.trigger(availableNow=True) if args.once else writer.trigger(
        processingTime=args.trigger)
    query = writer.start()
    print(f"rollup {args.source} -> {args.dest} running (query id {query.id})")
    query.awaitTermination()
    return 0


if __name__ == "__main__":
    sys.exit(main())
