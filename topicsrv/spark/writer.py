"""Writes to topicsrv: `df.write.format("topics")` and `writeStream.format("topics")`.

Rule 1: each task opens its own client and writes its rows in batches of `batchSize` rows (by
position in the partition), each batch ONE `TOPIC.APPEND` per topic it writes to: an atomic
write of those rows (all appended, contiguous, or none), one round trip a batch; the task fails
on the first error reply.
Rule 2: the row layout is decided once from the schema. With a `data` column a row is one
record whose data is that column (JSON text; a flat object of strings is written as those
field/value pairs, any other JSON as the single field `data`, exactly topicsrv's HTTP->RESP
mapping, so the source reads the same `data` back). Without one, every column other than
topic/tag/node (and the source's seq/ts/meta/kind/gap columns) is a field named after it;
null values are left out.
Rule 3: optional `tag` and `node` columns become the entry's TAG/NODE; option topic wins over a
`topic` column; rows with kind="tombstone" (from a source read) are skipped.
Rule 4: writes are idempotent within the topic's IDMP window (option `idempotent`, default
true). Each batch's TOPIC.APPEND carries `IDMP producer iid` (docs/resp.md), one key for the
whole batch: the producer is `spark:<job>:<batch>:<partition>:<group>` (job: the streaming
query id, else an id drawn once per write on the driver; batch: the micro-batch id, else 0;
group: the batch number // BATCHES_PER_PRODUCER, so no producer holds more iids than a stream
keeps per producer by default) and the iid is the batch number in its partition. A retried
task, or a replayed micro-batch, sends the same batches with the same keys (given a
deterministic input), so a batch an earlier attempt wrote is answered with its first IDs and
appended nothing, and one it did not write is written whole (a batch is one atomic write:
never half of one); past the window (default 100 s, `XCFGSET key IDMP-DURATION`) or the
table's bound it is at-least-once again. (Until issue 41 each row was an XADD IDMP of its
own: ~27 µs of server CPU a row against ~3 for a row of a batch.)
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pyspark.sql import Row
from pyspark.sql.datasource import DataSourceStreamWriter, DataSourceWriter, WriterCommitMessage

from topicsrv.spark.client import append_args, connect, entry_args
from topicsrv.spark.options import WriteOptions

log = logging.getLogger("topicsrv.spark")

_SOURCE_ONLY = frozenset({"topic", "tag", "node", "seq", "ts", "meta", "kind", "gap_from",
                          "gap_to", "reason"})


@dataclass
class TopicsCommitMessage(WriterCommitMessage):
    records: int


_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=str)


def _dumps(obj: Any) -> str:
    return _ENCODER.encode(obj)  # one encoder: json.dumps with options builds one a call


def _plain(value: Any) -> Any:
    if isinstance(value, Row):
        return {k: _plain(v) for k, v in value.asDict().items()}
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dt.datetime | dt.date):
        return value.isoformat()
    return value


_JSON_STARTS = frozenset('{["-0123456789tfnNI')  # what json.loads may accept first (NaN, Infinity)
_NOT_JSON = object()


def data_pairs(value: Any) -> list[Any]:
    """Field/value pairs for a `data` value (JSON text, or any Spark value)."""
    if isinstance(value, str):
        obj = _NOT_JSON
        if value.lstrip()[:1] in _JSON_STARTS:  # else json.loads would refuse it, more slowly
            try:
                obj = json.loads(value)
            except ValueError:
                pass
        if obj is _NOT_JSON:
            obj = value  # not JSON: written as a JSON string
            value = _dumps(value)
    else:
        obj = _plain(value)
        value = _dumps(obj)
    if isinstance(obj, dict) and obj and all(isinstance(v, str) for v in obj.values()):
        pairs: list[Any] = []
        for k, v in obj.items():
            pairs += [k, v]
        return pairs
    return ["data", value]


def field_value(value: Any) -> Any:
    if isinstance(value, bytes | bytearray | str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, dt.datetime | dt.date):
        return value.isoformat()
    return _dumps(_plain(value))


class RowEncoder:
    """Turns rows of one schema into XADD commands."""

    def __init__(self, columns: list[str], opts: WriteOptions) -> None:
        if opts.topic is None and "topic" not in columns:
            raise ValueError("the topics sink needs option topic or a `topic` column")
        self.topic = opts.topic
        self.has_data = "data" in columns
        self.fields = [c for c in columns if c not in _SOURCE_ONLY and c != "data"]
        if not self.has_data and not self.fields:
            raise ValueError("the topics sink needs a `data` column or at least one field column")
        self.has_tag = "tag" in columns
        self.has_node = "node" in columns
        self.has_kind = "kind" in columns

    def entry(self, row: Any) -> tuple[str, list[Any]] | None:
        """The row's topic and TOPIC.APPEND entry; None for a tombstone row (Rule 3)."""
        if self.has_kind and row["kind"] == "tombstone":
            return None
        topic = self.topic or row["topic"]
        if not topic:
            raise ValueError("a row has no topic (set option topic or fill the topic column)")
        if self.has_data:
            pairs = data_pairs(row["data"])
        else:
            pairs = []
            for name in self.fields:
                value = row[name]
                if value is not None:
                    pairs += [name, field_value(value)]
            if not pairs:
                pairs = ["data", "null"]
        tag = row["tag"] if self.has_tag else None
        node = row["node"] if self.has_node else None
        return topic, entry_args(pairs, node, tag)


BATCHES_PER_PRODUCER = 100  # Redis's default IDMP-MAXSIZE (iids per producer), Rule 4


def task_producer(job: str) -> str:
    """The IDMP producer prefix of the running Spark task (Rule 4): the same for every attempt
    of a task, different for every task of a write and every micro-batch of a query."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    if ctx is None:
        return f"spark:{job}:0:0"
    query = ctx.getLocalProperty("sql.streaming.queryId") or job
    batch = ctx.getLocalProperty("streaming.sql.batchId") or "0"
    return f"spark:{query}:{batch}:{ctx.partitionId()}"


def batch_key(producer: str, number: int) -> tuple[str, str]:
    """Rule 4: the (producer id, idempotent id) of batch `number` of a task."""
    return f"{producer}:{number // BATCHES_PER_PRODUCER}", str(number)


def write_rows(opts: WriteOptions, encoder: RowEncoder, rows: Iterator[Any],
               producer: str | None = None) -> int:
    """Rule 1: the rows (Spark Rows, or dicts: arrowsink.py) in batches of `batch_size`
    positions, one TOPIC.APPEND per topic of a batch; with `producer`, each carries its
    batch's IDMP key (Rule 4)."""
    client = connect(opts.url)
    written = 0
    size = opts.batch_size
    try:
        batch: dict[str, list[list[Any]]] = {}
        number = 0
        for i, row in enumerate(rows, 1):
            got = encoder.entry(row)
            if got is not None:
                batch.setdefault(got[0], []).append(got[1])
            if i % size == 0:
                written += _send(client, batch, producer, number)
                batch = {}
                number += 1
        written += _send(client, batch, producer, number)
    finally:
        client.close()
    return written


def _send(client: Any, batch: dict[str, list[list[Any]]], producer: str | None, number: int) -> int:
    """One round trip: a TOPIC.APPEND per topic of batch `number` (each topic keeps its own
    IDMP table, so the batch's one key serves them all); raises on the first error reply."""
    if not batch:
        return 0
    key = None if producer is None else batch_key(producer, number)
    pipe = client.pipeline(transaction=False)
    for topic, entries in batch.items():
        pipe.execute_command(*append_args(topic, entries, key))
    pipe.execute()
    return sum(len(entries) for entries in batch.values())


def _written(messages: list[WriterCommitMessage | None]) -> int:
    return sum(m.records for m in messages if isinstance(m, TopicsCommitMessage))


class _RowWriting:
    """The executor half shared by the batch and the streaming writer."""

    def __init__(self, opts: WriteOptions, columns: list[str]) -> None:
        self.opts = opts
        self.encoder = RowEncoder(columns, opts)
        self.job = uuid.uuid4().hex  # drawn on the driver: every task attempt sees the same

    def write(self, iterator: Iterator[Row]) -> WriterCommitMessage:
        producer = task_producer(self.job) if self.opts.idempotent else None
        return TopicsCommitMessage(write_rows(self.opts, self.encoder, iterator, producer))


class TopicsWriter(_RowWriting, DataSourceWriter):
    """`df.write.format("topics").mode("append")`."""

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        log.info("topics sink: wrote %d records", _written(messages))

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        log.warning("topics sink: job aborted after %d records were written; they stay "
                    "written (topics are append-only)", _written(messages))


class TopicsStreamWriter(_RowWriting, DataSourceStreamWriter):
    """`writeStream.format("topics")`: idempotent per micro-batch within the IDMP window."""

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        log.info("topics sink: batch %d wrote %d records", batchId, _written(messages))

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        log.warning("topics sink: batch %d aborted; records already written stay written; a "
                    "retry of the batch within the IDMP window appends none of them again", batchId)
