"""`TopicsDataSource`: the `topics` format of PySpark's Python Data Source API (PySpark 4).

Rule 1: the DataSource object holds only its options (plain strings); readers and writers
are built from parsed, immutable option objects, so everything pickles.
Rule 2: bad options fail when the reader/writer is created, with the option's name.
"""

from __future__ import annotations

from dataclasses import replace

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from topicsrv.spark.arrowsink import STREAM_ARROW_WRITER, TopicsArrowWriter, flat
from topicsrv.spark.client import read_from_url
from topicsrv.spark.options import ReadOptions, WriteOptions
from topicsrv.spark.reader import TopicsBatchReader
from topicsrv.spark.rows import SCHEMA_DDL
from topicsrv.spark.stream import TopicsStreamReader
from topicsrv.spark.writer import TopicsStreamWriter, TopicsWriter


def _resolved(opts: ReadOptions) -> ReadOptions:
    """Option readFrom picks the server once, on the driver: every task plans and reads on
    the same copy, so its offsets, head and tombstones are one server's (client.py)."""
    return replace(opts, url=read_from_url(opts.url, opts.read_from))


class TopicsDataSource(DataSource):
    """Read and write topicsrv topics over RESP (redis-py). Format name: `topics`."""

    @classmethod
    def name(cls) -> str:
        return "topics"

    def schema(self) -> str:
        return SCHEMA_DDL

    def reader(self, schema: StructType) -> DataSourceReader:
        return TopicsBatchReader(_resolved(ReadOptions.parse(self.options, streaming=False)))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return TopicsStreamReader(_resolved(ReadOptions.parse(self.options, streaming=True)))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        if overwrite:
            raise ValueError("topics are append-only: use mode('append') with the topics sink")
        opts, columns = WriteOptions.parse(self.options), schema.fieldNames()
        if flat(schema):  # rows as Arrow batches (arrowsink.py Rule 1)
            return TopicsArrowWriter(opts, columns)
        return TopicsWriter(opts, columns)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        opts, columns = WriteOptions.parse(self.options), schema.fieldNames()
        if flat(schema) and STREAM_ARROW_WRITER is not None:
            writer: DataSourceStreamWriter = STREAM_ARROW_WRITER(opts, columns)
            return writer
        return TopicsStreamWriter(opts, columns)
