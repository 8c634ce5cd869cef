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
