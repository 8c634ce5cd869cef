"""The sink's Arrow path: rows reach the writer as Arrow batches, not one Spark Row each.

Rule 1: when every column of the DataFrame is a flat type (string, binary, integer, float,
boolean, null), the source hands Spark an Arrow writer (pyspark's DataSourceArrowWriter, and
DataSourceStreamArrowWriter for streaming where pyspark has it): each batch's columns become
Python lists in one call each and the rows are plain dicts over them, so the task skips
Spark's per-row Row objects (the sink's worker CPU per row fell by more than half,
docs/spark.md "Speed"). Everything after that is writer.py's: the same RowEncoder, the same
batches of `batchSize` rows, the same IDMP keys, so the records written are the same bytes.
Rule 2: any other column type (struct, map, array, timestamp, date, decimal) keeps the Row
path, whose conversions (nested values as JSON, datetimes in ISO form) Arrow's `to_pylist`
would not reproduce exactly.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from pyspark.sql import datasource as ds
from pyspark.sql.types import (
    BinaryType,
    BooleanType,
    ByteType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    NullType,
    ShortType,
    StringType,
    StructType,
)

from topicsrv.spark.options import WriteOptions
from topicsrv.spark.writer import (
    RowEncoder,
    TopicsCommitMessage,
    TopicsStreamWriter,
    TopicsWriter,
    task_producer,
    write_rows,
)

_FLAT = (StringType, BinaryType, BooleanType, ByteType, ShortType, IntegerType, LongType,
         FloatType, DoubleType, NullType)


def flat(schema: StructType) -> bool:
    """Rule 1's test."""
    return all(isinstance(f.dataType, _FLAT) for f in schema.fields)


def rows_of(batches: Iterator[pa.RecordBatch]) -> Iterator[dict[str, Any]]:
    """Each row of the batches as a dict of its column values (Rule 1)."""
    for batch in batches:
        cols = batch.to_pydict()
        names = list(cols)
        for values in zip(*cols.values(), strict=True):
            yield dict(zip(names, values, strict=True))


class _ArrowWriting:
    opts: WriteOptions
    encoder: RowEncoder
    job: str

    def write(self, iterator: Iterator[pa.RecordBatch]) -> ds.WriterCommitMessage:
        producer = task_producer(self.job) if self.opts.idempotent else None
        return TopicsCommitMessage(write_rows(self.opts, self.encoder, rows_of(iterator), producer))


class TopicsArrowWriter(_ArrowWriting, TopicsWriter, ds.DataSourceArrowWriter):
    """`df.write.format("topics")` of a flat DataFrame (Rule 1)."""


_STREAM_ARROW: Any = getattr(ds, "DataSourceStreamArrowWriter", None)  # pyspark >= 4.1

if _STREAM_ARROW is not None:
    class TopicsStreamArrowWriter(_ArrowWriting, TopicsStreamWriter, _STREAM_ARROW):
        """`writeStream.format("topics")` of a flat DataFrame (Rule 1)."""

    STREAM_ARROW_WRITER: Any = TopicsStreamArrowWriter
else:  # pragma: no cover - older pyspark: the Row path
    STREAM_ARROW_WRITER = None
