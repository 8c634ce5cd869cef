"""Batch reads of the `topics` source, and the partition read shared with streaming.

Rule 1: the planner (driver side) resolves offsets against TOPIC.INFO once and hands out
TopicRange partitions that cover each (lo, hi] exactly once; a partition is plain data
(topic, lo, hi) and pickles as such.
Rule 2: `read_partition` runs on an executor, opens its own client, and pages the range with
loss-aware XREAD (client.read_range). A tombstone inside the range either fails the task
with a DataLossError naming topic, [gap_from, gap_to] and reason (failOnDataLoss=true), or
is logged and, with includeTombstones=true, emitted as a kind="tombstone" row.
Rule 3: the own-node filter (option node) drops records whose $node is listed; it is applied
here, not by the server, so an empty XREAD page always means "nothing more to read".
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition

from topicsrv.spark.client import Entry, Tombstone, connect, read_range, topic_info
from topicsrv.spark.options import EARLIEST, LATEST, ReadOptions, resolve, split_ranges
from topicsrv.spark.rows import to_batch

log = logging.getLogger("topicsrv.spark")


class DataLossError(RuntimeError):
    """Records the query had not read were lost (cap/TTL eviction) and failOnDataLoss is true."""


def loss_message(topic: str, gap: Tombstone) -> str:
    estimate = f", about {gap.missed_estimate} records" if gap.missed_estimate is not None else ""
    return (
        f"topicsrv data loss in topic '{topic}': seqs [{gap.gap_from}, {gap.gap_to}] were lost "
        f"(reason {gap.reason}{estimate}) before this query read them"
    )


class TopicRange(InputPartition):
    """The seqs (lo, hi] of one topic, read by one Spark task."""

    def __init__(self, topic: str, lo: int, hi: int) -> None:
        super().__init__((topic, lo, hi))
        self.topic = topic
        self.lo = lo
        self.hi = hi

    def __repr__(self) -> str:
        return f"TopicRange({self.topic!r}, ({self.lo}, {self.hi}])"


def plan(opts: ReadOptions, ranges: dict[str, tuple[int, int]]) -> list[TopicRange]:
    pieces = split_ranges(ranges, opts.min_partitions)
    return [TopicRange(topic, lo, hi) for topic, lo, hi in pieces]


def read_partition(opts: ReadOptions, part: TopicRange) -> Iterator[pa.RecordBatch]:
    """The rows of one partition as Arrow batches (one per page)."""
    client = connect(opts.url)
    nodes = frozenset(opts.nodes)
    try:
        for page in read_range(client, part.topic, part.lo, part.hi, opts.page):
            keep: list[Entry | Tombstone] = []
            for item in page:
                if isinstance(item, Tombstone):
                    message = loss_message(part.topic, item)
                    if opts.fail_on_data_loss:
                        raise DataLossError(
                            message + ". The query stops because failOnDataLoss is true; set "
                            "failOnDataLoss=false to log losses and continue (and "
                            "includeTombstones=true to receive them as rows)."
                        )
                    log.warning("%s; continuing because failOnDataLoss is false", message)
                    if opts.include_tombstones:
                        keep.append(item)
                elif not (nodes and item.node in nodes):
                    keep.append(item)
            if keep:
                yield to_batch(part.topic, keep)
    finally:
        client.close()


class TopicsBatchReader(DataSourceReader):
    """`spark.read.format("topics")`: a snapshot of (startingOffsets, endingOffsets]."""

    def __init__(self, opts: ReadOptions) -> None:
        self.opts = opts

    def partitions(self) -> Sequence[InputPartition]:
        client = connect(self.opts.url)
        try:
            ranges: dict[str, tuple[int, int]] = {}
            for topic in self.opts.topics:
                info = topic_info(client, topic)
                lo = resolve(self.opts.starting, EARLIEST, topic, info)
                hi = resolve(self.opts.ending, LATEST, topic, info)
                ranges[topic] = (lo, min(hi, info.head_seq))
        finally:
            client.close()
        parts = plan(self.opts, ranges)
        return parts or [TopicRange(self.opts.topics[0], 0, 0)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, TopicRange)
        return read_partition(self.opts, partition)
