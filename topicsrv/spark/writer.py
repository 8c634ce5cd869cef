"""Writes to topicsrv: `df.write.format("topics")` and `writeStream.format("topics")`.

Rule 1: each task opens its own client and XADDs its rows through a non-transactional
pipeline, `batchSize` commands per round trip; the task fails on the first error reply.
Rule 2: the row layout is decided once from the schema. With a `data` column a row is one
record whose data is that column (JSON text; a flat object of strings is written as those
field/value pairs, any other JSON as the single field `data`, exactly topicsrv's HTTP->RESP
mapping, so the source reads the same `data` back). Without one, every column other than
topic/tag/node (and the source's seq/ts/meta/kind/gap columns) is a field named after it;
null values are left out.
Rule 3: optional `tag` and `node` columns become XADD TAG/NODE; option topic wins over a
`topic` column; rows with kind="tombstone" (from a source read) are skipped.
Rule 4: writes are idempotent within the topic's IDMP window (option `idempotent`, default
true). Each row's XADD carries `IDMP producer iid` (docs/resp.md): the producer is
`spark:<job>:<batch>:<partition>:<chunk>` (job: the streaming query id, else an id drawn once
per write on the driver; batch: the micro-batch id, else 0; chunk: position // IDMP_CHUNK, so
no producer holds more iids than a stream keeps per producer by default) and the iid is the
row's position in its partition. A retried task, or a replayed micro-batch, sends the same
pairs for the same rows (given a deterministic input), so the rows an earlier attempt wrote
are answered with their first IDs and appended nothing; past the window (default 100 s,
`XCFGSET key IDMP-DURATION`) or the table's bound it is at-least-once again.
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

from topicsrv.spark.client import connect, xadd_args
from topicsrv.spark.options import WriteOptions

log = logging.getLogger("topicsrv.spark")

_SOURCE_ONLY = frozenset({"topic", "tag", "node", "seq", "ts", "meta", "kind", "gap_from",
                          "gap_to", "reason"})


@dataclass
class TopicsCommitMessage(WriterCommitMessage):
    records: int


def _dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"), default=str)


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


def data_pairs(value: Any) -> list[Any]:
    """Field/value pairs for a `data` value (JSON text, or any Spark value)."""
    if isinstance(value, str):
        try:
            obj = json.loads(value)
        except ValueError:
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

    def command(self, row: Row, idmp: tuple[str, str] | None = None) -> list[Any] | None:
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
        return xadd_args(topic, pairs, node, tag, idmp)


IDMP_CHUNK = 100  # rows per IDMP producer: Redis's default IDMP-MAXSIZE (iids per producer)


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


def write_rows(opts: WriteOptions, encoder: RowEncoder, rows: Iterator[Row],
               producer: str | None = None) -> int:
    """XADD the rows; with `producer`, each carries IDMP (producer:chunk, position)."""
    client = connect(opts.url)
    written = 0
    try:
        pipe = client.pipeline(transaction=False)
        pending = 0
        for i, row in enumerate(rows):
            idmp = None if producer is None else (f"{producer}:{i // IDMP_CHUNK}", str(i))
            cmd = encoder.command(row, idmp)
            if cmd is None:
                continue
            pipe.execute_command(*cmd)
            pending += 1
            if pending >= opts.batch_size:
                pipe.execute()
                written += pending
                pending = 0
        if pending:
            pipe.execute()
            written += pending
    finally:
        client.close()
    return written


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
