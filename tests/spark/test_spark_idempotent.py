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


def test_producer_ids_follow_the_task_and_the_row_position() -> None:
    opts = WriteOptions.parse({"topic": "t"})
    enc = writer.RowEncoder(["data"], opts)
    cmd = enc.command(Row(data='{"a": "b"}'), ("spark:j:3:1:2", "205"))
    assert cmd == ["XADD", "t", "IDMP", "spark:j:3:1:2", "205", "*", "a", "b"]
    assert writer.task_producer("job") == "spark:job:0:0"  # no Spark task: one producer
    assert writer.IDMP_CHUNK == 100  # Redis's default IDMP-MAXSIZE: no chunk outgrows it
    assert opts.idempotent is True
