"""Streaming reads of the `topics` source (micro-batch).

Rule 1: an offset is {"topic": seq} with every topic present and keys sorted; a micro-batch
reads (start, end] per topic. Spark checkpoints the offsets, which is what makes the read
exactly-once; the server keeps no consumer state for the query (no consumer group).
Rule 2: `latestOffset(start, limit)` (PySpark 4.2+ admission control) caps the batch at
`limit.max_rows` seqs when Spark passes ReadMaxRows (from option maxOffsetsPerTrigger). The
same method is called with no arguments by PySpark 4.0/4.1; it then caps from the end of
the previous batch it planned, so the cap applies from the second batch of a run on.
A seq count is an upper bound on rows (deleted and node-filtered seqs yield no row).
Rule 3: loss is detected by the executors (reader.read_partition), atomically with the
records they read, so a gap inside a batch's range is never missed, even when eviction
happens between planning and reading.
Rule 4: the reader is pickled to executors: the driver-side client is never pickled.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition

from topicsrv.spark.client import TopicInfo, connect, topic_info
from topicsrv.spark.options import EARLIEST, LATEST, ReadOptions, limit_ranges, ordered, resolve
from topicsrv.spark.reader import DataLossError, TopicRange, plan, read_partition

try:  # PySpark 4.2+
    from pyspark.sql.streaming.datasource import (
        ReadAllAvailable,
        ReadMaxRows,
        SupportsTriggerAvailableNow,
    )
except ImportError:  # PySpark 4.0/4.1: no admission control, no Trigger.AvailableNow hook
    ReadAllAvailable = ReadMaxRows = None  # type: ignore[assignment,misc,unused-ignore]

    class SupportsTriggerAvailableNow:  # type: ignore[no-redef]
        pass


log = logging.getLogger("topicsrv.spark")


class TopicsStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """`spark.readStream.format("topics")`."""

    def __init__(self, opts: ReadOptions) -> None:
        self.opts = opts
        self._client: Any = None
        self._last_end: dict[str, int] | None = None  # for PySpark 4.0/4.1 latestOffset()
        self._target: dict[str, int] | None = None  # Trigger.AvailableNow
        self._added: dict[str, int] = {}  # topics absent from a checkpointed offset

    def __getstate__(self) -> dict[str, Any]:
        return {"opts": self.opts, "_client": None, "_last_end": None, "_target": None,
                "_added": {}}

    # ---- driver side ---------------------------------------------------------------

    def _infos(self) -> dict[str, TopicInfo]:
        if self._client is None:
            self._client = connect(self.opts.url)
        return {t: topic_info(self._client, t) for t in self.opts.topics}

    def _start_of(self, start: dict[str, Any], topic: str, info: TopicInfo | None) -> int:
        if topic in start:
            return int(start[topic])
        if topic not in self._added:  # a topic added to the option after a restart
            self._added[topic] = info.earliest_position if info else 0
        return self._added[topic]

    def initialOffset(self) -> dict:
        infos = self._infos()
        return ordered({t: resolve(self.opts.starting, LATEST, t, infos[t]) for t in infos})

    def getDefaultReadLimit(self) -> Any:
        if self.opts.max_per_trigger is not None and ReadMaxRows is not None:
            return ReadMaxRows(self.opts.max_per_trigger)
        return ReadAllAvailable() if ReadAllAvailable is not None else None

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = {t: i.head_seq for t, i in self._infos().items()}

    def reportLatestOffset(self) -> dict | None:
        return ordered({t: i.head_seq for t, i in self._infos().items()})

    def latestOffset(self, start: dict | None = None, limit: Any = None) -> dict:
        infos = self._infos()
        heads = {t: i.head_seq for t, i in infos.items()}
        if self._target is not None:
            heads = {t: min(h, self._target.get(t, h)) for t, h in heads.items()}
        if start is None:  # PySpark 4.0/4.1
            start = self._last_end
            limit = None
            if start is not None and self.opts.max_per_trigger is not None:
                limit = self.opts.max_per_trigger
        elif ReadMaxRows is not None and isinstance(limit, ReadMaxRows):
            limit = limit.max_rows
        else:
            limit = None
        if start is None:
            return ordered(heads)
        ranges: dict[str, tuple[int, int]] = {}
        for topic, info in infos.items():
            lo = self._start_of(start, topic, info)
            hi = heads[topic]
            if hi < lo:
                hi = self._rewound(topic, lo, hi)
                ranges[topic] = (hi, hi)
            else:
                ranges[topic] = (lo, hi)
        if limit is None:
            return ordered({t: hi for t, (_, hi) in ranges.items()})
        return limit_ranges(ranges, int(limit))

    def _rewound(self, topic: str, position: int, head: int) -> int:
        message = (f"topicsrv topic '{topic}' ends at seq {head}, below this query's offset "
                   f"{position}: the topic was deleted and recreated (reason recreated), so "
                   f"seqs after {head} of the old topic were lost")
        if self.opts.fail_on_data_loss:
            raise DataLossError(message + ". The query stops because failOnDataLoss is true.")
        log.warning("%s; continuing from the new topic's head because failOnDataLoss is false",
                    message)
        return head

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        ranges: dict[str, tuple[int, int]] = {}
        for topic in self.opts.topics:
            if topic not in end:
                continue
            lo = self._start_of(start, topic, None)
            ranges[topic] = (min(lo, int(end[topic])), int(end[topic]))
        self._last_end = ordered({t: int(end[t]) for t in end})
        return plan(self.opts, ranges)

    def commit(self, end: dict) -> None:
        self._last_end = ordered({t: int(end[t]) for t in end})

    def stop(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    # ---- executor side ---------------------------------------------------------------

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, TopicRange)
        return read_partition(self.opts, partition)


__all__ = ["TopicsStreamReader", "EARLIEST", "LATEST"]
