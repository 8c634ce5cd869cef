"""Batch reads of the `topics` source, and the partition read shared with streaming.

Rule 1: the planner (driver side) resolves offsets against TOPIC.INFO once and hands out
TopicRange partitions that cover each (lo, hi] exactly once; a partition is plain data
(topic, lo, hi) and pickles as such.
Rule 2: `read_partition` runs on an executor, opens its own client, and pages the range with
the loss-aware read (TOPIC.ROWS as columns, client.read_rows; XREAD entries from a server
without it, client.read_range). A tombstone inside the range either fails the task
with a DataLossError naming topic, [gap_from, gap_to] and reason (failOnDataLoss=true), or
is logged and, with includeTombstones=true, emitted as a kind="tombstone" row.
The next page is requested while the last one becomes an Arrow batch (spark/prefetch.py).
Rule 3: the own-node filter (option node) drops records whose $node is listed; it is applied
here, not by the server, so an empty XREAD page always means "nothing more to read".
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition

from topicsrv.spark.client import (
    Columns,
    Entry,
    Tombstone,
    connect,
    read_range,
    read_rows,
    topic_info,
)
from topicsrv.spark.options import (
    EARLIEST,
    LATEST,
    ReadOptions,
    default_partitions,
    resolve,
    split_ranges,
)
from topicsrv.spark.prefetch import prefetched
from topicsrv.spark.rows import columns_batch, to_batch

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
    parts = opts.min_partitions or default_partitions(ranges, opts.page)
    pieces = split_ranges(ranges, parts)
    return [TopicRange(topic, lo, hi) for topic, lo, hi in pieces]


def _checked(opts: ReadOptions, topic: str, gap: Tombstone) -> bool:
    """Rule 2: whether the tombstone becomes a row (else it is logged), or the task fails."""
    message = loss_message(topic, gap)
    if opts.fail_on_data_loss:
        raise DataLossError(
            message + ". The query stops because failOnDataLoss is true; set "
            "failOnDataLoss=false to log losses and continue (and "
            "includeTombstones=true to receive them as rows)."
        )
    log.warning("%s; continuing because failOnDataLoss is false", message)
    return opts.include_tombstones


def read_partition(opts: ReadOptions, part: TopicRange) -> Iterator[pa.RecordBatch]:
    """The rows of one partition as Arrow batches (one per page)."""
    client = connect(opts.url)
    try:
        pages = read_rows(client, part.topic, part.lo, part.hi, opts.page)
        if pages is None:  # a server without TOPIC.ROWS: entry by entry
            yield from _read_entries(opts, part, client)
            return
        nodes = opts.nodes
        for gap, cols in prefetched(pages):
            if gap is not None and _checked(opts, part.topic, gap):
                yield to_batch(part.topic, [gap])
            if nodes and cols:  # Rule 3: the own-node filter
                keep = [i for i, node in enumerate(cols.nodes)
                        if node is None or node.decode("utf-8", "surrogateescape") not in nodes]
                cols = Columns(*([col[i] for i in keep] for col in (
                    cols.seqs, cols.tss, cols.nodes, cols.tags, cols.metas, cols.datas)))
            if cols:
                yield columns_batch(part.topic, cols)
    finally:
        client.close()


def _read_entries(opts: ReadOptions, part: TopicRange, client: Any) -> Iterator[pa.RecordBatch]:
    nodes = frozenset(opts.nodes)
    for page in read_range(client, part.topic, part.lo, part.hi, opts.page):
        keep: list[Entry | Tombstone] = []
        for item in page:
            if isinstance(item, Tombstone):
                if _checked(opts, part.topic, item):
                    keep.append(item)
            elif not (nodes and item.node in nodes):
                keep.append(item)
        if keep:
            yield to_batch(part.topic, keep)


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
