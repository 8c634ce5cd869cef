"""The sink is idempotent within the IDMP window (topicsrv/spark/writer.py Rule 4): a write
task that fails half way and is run again appends each of its rows once. The executor code
path (TopicsWriter.write) runs against the real server, attempts simulated as Spark retries
them: the same pickled writer, the same partition, the same rows in the same order."""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from pyspark.sql import Row

from topicsrv.spark import writer
from topicsrv.spark.options import WriteOptions


@pytest.fixture(scope="module")
def url(server: Any) -> str:
    return f"redis://127.0.0.1:{server.resp_port}"


@pytest.fixture(scope="module")
def r(url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(url)
    yield client
    client.close()


class TaskDied(Exception):
    pass


def _rows(n: int, fail_after: int | None = None) -> Iterator[Row]:
    for i in range(n):
        if i == fail_after:
            raise TaskDied(f"executor lost after {i} rows")
        yield Row(data=f'{{"n": "{i}"}}')


def _values(r: redis.Redis, topic: str) -> list[int]:
    return [int(fields[b"n"]) for _, fields in r.xrange(topic)]


def test_a_retried_task_appends_each_row_once(r: redis.Redis, url: str,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    topic = "spark.idmp.retry"
    sink = writer.TopicsWriter(WriteOptions.parse({"url": url, "topic": topic, "batchSize": "7"}), ["data"])
    with pytest.raises(TaskDied):  # attempt 0: 147 rows (21 full pipelines) reached the server
        pickle.loads(pickle.dumps(sink)).write(_rows(250, fail_after=150))
    assert len(_values(r, topic)) == 147
    first_ids = [i for i, _ in r.xrange(topic)]
    done = pickle.loads(pickle.dumps(sink)).write(_rows(250))  # attempt 1 of the same task
    assert done.records == 250
    assert _values(r, topic) == list(range(250))
    assert [i for i, _ in r.xrange(topic)][:147] == first_ids
    # another partition of the same write, or the next micro-batch, is new data
    monkeypatch.setattr(writer, "task_producer", lambda job: f"spark:{job}:0:1")
    pickle.loads(pickle.dumps(sink)).write(_rows(10))
    assert len(_values(r, topic)) == 260


def test_idempotent_false_is_at_least_once(r: redis.Redis, url: str) -> None:
    topic = "spark.idmp.off"
    sink = writer.TopicsWriter(WriteOptions.parse({"url": url, "topic": topic, "idempotent": "false"}),
                               ["data"])
    sink.write(_rows(20))
    sink.write(_rows(20))
    assert len(_values(r, topic)) == 40


def test_producer_ids_follow_the_task_and_the_batch_number() -> None:
    opts = WriteOptions.parse({"topic": "t"})
    enc = writer.RowEncoder(["data"], opts)
    assert enc.entry(Row(data='{"a": "b"}')) == ("t", [1, "a", "b"])
    assert writer.batch_key("spark:j:3:1", 205) == ("spark:j:3:1:2", "205")
    assert writer.task_producer("job") == "spark:job:0:0"  # no Spark task: one producer
    assert writer.BATCHES_PER_PRODUCER == 100  # Redis's default IDMP-MAXSIZE: no producer outgrows it
    assert opts.idempotent is True and opts.batch_size == 500
    assert WriteOptions.parse({"batchSize": "99999"}).batch_size == 10_000  # TOPIC.APPEND's limit


def test_a_batch_is_one_write_under_one_key(r: redis.Redis, url: str) -> None:
    """Rule 1: every batch is one TOPIC.APPEND (one timestamp, contiguous IDs); rows for
    several topics split per topic, each under the batch's key; labels and tombstone rows."""
    cols = ["topic", "data", "tag", "node", "kind"]
    sink = writer.TopicsWriter(WriteOptions.parse({"url": url, "batchSize": "4"}), cols)
    rows = [Row(topic=f"spark.batch.{i % 2}", data=f'{{"n": "{i}"}}', tag=f"t{i}",
                node=None if i % 3 else "n0", kind="tombstone" if i == 5 else "record")
            for i in range(10)]
    assert sink.write(iter(rows)).records == 9
    assert sink.write(iter(rows)).records == 9  # the same task again: every batch a duplicate
    even = r.xrange("spark.batch.0")
    assert [int(f[b"n"]) for _, f in even] == [0, 2, 4, 6, 8]
    assert [int(f[b"n"]) for _, f in r.xrange("spark.batch.1")] == [1, 3, 7, 9]
    assert {i.split(b"-")[0] for i, _ in even[:2]} == {even[0][0].split(b"-")[0]}  # one write
    assert even[0][1][b"$tag"] == b"t0" and even[0][1][b"$node"] == b"n0"
    assert b"$node" not in even[1][1]
    info = r.xinfo_stream("spark.batch.0")
    assert info["iids-tracked"] == 3 and info["iids-duplicates"] == 3


def test_the_arrow_path_writes_what_the_row_path_writes(r: redis.Redis, url: str) -> None:
    """arrowsink.py Rule 1: a flat DataFrame's rows as Arrow batches are written as the same
    records as the Row path writes them (every flat type, nulls, JSON and non-JSON data)."""
    import pyarrow as pa
    from pyspark.sql import types as T  # noqa: N812

    from topicsrv.spark.arrowsink import TopicsArrowWriter, flat

    def struct(**cols: Any) -> T.StructType:
        return T.StructType([T.StructField(name, typ) for name, typ in cols.items()])

    schema = struct(data=T.StringType(), tag=T.StringType(), node=T.StringType())
    rows = [{"data": d, "tag": t, "node": n} for d, t, n in [
        ('{"a": "b"}', "t1", None), ('{"a": 1}', None, "n1"), ("plain", None, None),
        ("NaN", "t2", "n2"), (" [1, 2]", None, None), ('"q"', None, None), ("é\"x", None, None)]]
    fields_schema = struct(user=T.StringType(), n=T.LongType(), x=T.DoubleType(), ok=T.BooleanType(),
                           raw=T.BinaryType())
    fields = [{"user": "ann", "n": 3, "x": 1.5, "ok": True, "raw": b"\xff\x00"},
              {"user": None, "n": None, "x": None, "ok": False, "raw": None}]
    for i, (sch, data) in enumerate(((schema, rows), (fields_schema, fields))):
        assert flat(sch)
        names = sch.fieldNames()
        by_rows = writer.TopicsWriter(WriteOptions.parse({"url": url, "topic": f"spark.rowpath.{i}"}), names)
        by_rows.write(iter([Row(**d) for d in data]))
        by_arrow = TopicsArrowWriter(WriteOptions.parse({"url": url, "topic": f"spark.arrowpath.{i}"}), names)
        by_arrow.write(iter([pa.RecordBatch.from_pylist(data)]))
        assert [f for _, f in r.xrange(f"spark.arrowpath.{i}")] == [f for _, f in r.xrange(f"spark.rowpath.{i}")]
    assert not flat(struct(data=struct(a=T.StringType())))
    assert not flat(struct(data=T.StringType(), ts=T.TimestampType()))
    assert not flat(struct(m=T.MapType(T.StringType(), T.StringType())))
