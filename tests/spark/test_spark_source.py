"""The `topics` Spark source and sink end to end: a real local Spark (local[2]) against a
real topicsrv process, written to and checked with the stock redis-py client.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from topicsrv.spark.client import Entry, connect, parse_entry

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def url(server: Any) -> str:
    return f"redis://127.0.0.1:{server.resp_port}"


@pytest.fixture(scope="module")
def r(url: str) -> Iterator[redis.Redis]:
    client = connect(url)  # raw stream replies, like the connector's own
    yield client
    client.close()


def xadd(r: redis.Redis, topic: str, n: int, first: int = 0) -> None:
    pipe = r.pipeline(transaction=False)
    for i in range(first, first + n):
        args: list[Any] = ["XADD", topic]
        if i % 3 == 0:
            args += ["NODE", f"node{i % 2}"]
        if i % 5 == 0:
            args += ["TAG", f"tag{i % 4}"]
        pipe.execute_command(*args, "*", "i", str(i), "kind", "even" if i % 2 == 0 else "odd")
        if len(pipe) >= 1000:
            pipe.execute()
    pipe.execute()


def xrange_all(r: redis.Redis, topic: str) -> list[Entry]:
    out = [parse_entry(e) for e in r.execute_command("XRANGE", topic, "-", "+")]
    assert all(isinstance(e, Entry) for e in out)
    return out  # type: ignore[return-value]


def info(r: redis.Redis, topic: str) -> dict[str, int]:
    reply = r.execute_command("TOPIC.INFO", topic)
    flat = dict(zip(reply[0::2], reply[1::2], strict=True))
    return {k.decode(): int(flat[k]) for k in (b"head_seq", b"earliest_seq", b"evict_floor")}


def read_df(spark: Any, url: str, topic: str, **options: Any) -> Any:
    reader = spark.read.format("topics").option("url", url).option("topic", topic)
    for k, v in options.items():
        reader = reader.option(k, str(v))
    return reader.load()


def stream_df(spark: Any, url: str, topic: str, **options: Any) -> Any:
    reader = spark.readStream.format("topics").option("url", url).option("topic", topic)
    for k, v in options.items():
        reader = reader.option(k, str(v))
    return reader.load()


class Batches:
    """A foreachBatch sink that keeps every micro-batch's rows (as dicts) on the driver."""

    def __init__(self) -> None:
        self.batches: list[tuple[int, list[dict[str, Any]]]] = []

    def __call__(self, df: Any, batch_id: int) -> None:
        rows = [row.asDict() for row in df.collect()]
        self.batches.append((batch_id, rows))

    def rows(self) -> list[dict[str, Any]]:
        return [row for _, rows in self.batches for row in rows]

    def seqs(self) -> list[int]:
        return [row["seq"] for row in self.rows() if row["kind"] == "record"]


def run_stream(df: Any, sink: Batches, checkpoint: Path) -> Any:
    return df.writeStream.foreachBatch(sink).option("checkpointLocation", str(checkpoint)).start()


# ---- batch reads -------------------------------------------------------------------------


def test_batch_read_of_10k_records_equals_xrange(spark: Any, http: Any, r: redis.Redis,
                                                 url: str) -> None:
    from pyspark.sql import functions as F  # noqa: N812

    topic = "spark.batch10k"
    xadd(r, topic, 9_990)
    http.write(topic, [
        {"data": {"user": "ann"}, "tag": "h", "node": "web", "meta": {"trace": "t1", "k": "v"}},
        {"data": [1, 2, {"x": None}]},
        {"data": "plain"},
        {"data": {"n": 1}, "meta": {"m": "1"}},
        {"data": None},
    ] * 2)
    expected = xrange_all(r, topic)
    assert len(expected) == 10_000

    df = read_df(spark, url, topic).withColumn("ts_ms", F.unix_millis("ts"))
    rows = df.orderBy("seq").collect()
    assert [row.seq for row in rows] == [e.seq for e in expected]
    for row, e in zip(rows, expected, strict=True):
        assert (row.topic, row.kind, row.ts_ms, row.node, row.tag) == (topic, "record", e.ts,
                                                                      e.node, e.tag)
        assert row.gap_from is None and row.reason is None
    by_seq = {row.seq: row for row in rows}
    first = by_seq[expected[0].seq]
    assert json.loads(first.data) == {"i": "0", "kind": "even"}
    http_rows = [row for row in rows if row.seq > expected[9_989].seq]
    assert [json.loads(row.data) for row in http_rows[:5]] == [
        {"user": "ann"}, [1, 2, {"x": None}], "plain", {"n": 1}, None]
    assert http_rows[0].meta == {"trace": "t1", "k": "v"}
    assert (http_rows[0].tag, http_rows[0].node) == ("h", "web")
    assert http_rows[3].meta == {"m": "1"} and http_rows[1].meta is None


def test_multi_partition_read_preserves_every_record_exactly_once(
        spark: Any, r: redis.Redis, url: str) -> None:
    xadd(r, "spark.parts.a", 3_000)
    xadd(r, "spark.parts.b", 700)
    ea = xrange_all(r, "spark.parts.a")  # XDEL below makes silent holes
    a = [e.seq for e in ea]
    r.execute_command("XDEL", "spark.parts.a", *[f"{e.ts}-{e.seq}" for e in ea[100:160]])
    want = {("spark.parts.a", s) for s in a[:100] + a[160:]}
    want |= {("spark.parts.b", e.seq) for e in xrange_all(r, "spark.parts.b")}

    df = read_df(spark, url, "spark.parts.a,spark.parts.b", minPartitions=9, pageSize=128)
    assert df.rdd.getNumPartitions() >= 9
    got = [(row.topic, row.seq) for row in df.select("topic", "seq", "kind").collect()]
    assert len(got) == len(set(got)) == len(want)
    assert set(got) == want


def test_batch_offsets_and_node_filter(spark: Any, r: redis.Redis, url: str) -> None:
    topic = "spark.offsets"
    xadd(r, topic, 60)
    seqs = [e.seq for e in xrange_all(r, topic)]
    lo, hi = seqs[9], seqs[39]
    df = read_df(spark, url, topic, startingOffsets=json.dumps({topic: lo}),
                 endingOffsets=json.dumps({topic: hi}), node="node0")
    got = sorted(row.seq for row in df.collect())
    want = [e.seq for e in xrange_all(r, topic) if lo < e.seq <= hi and e.node != "node0"]
    assert got == want and len(want) < 30
    assert read_df(spark, url, topic, startingOffsets="latest").count() == 0


# ---- streaming reads -----------------------------------------------------------------------


def test_stream_sees_every_record_once_across_triggers_and_resumes_after_restart(
        spark: Any, r: redis.Redis, url: str, tmp_path: Path) -> None:
    topic = "spark.stream"
    xadd(r, topic, 250)
    checkpoint = tmp_path / "ckpt"
    first = Batches()
    query = run_stream(stream_df(spark, url, topic, startingOffsets="earliest",
                                 maxOffsetsPerTrigger=100), first, checkpoint)
    try:
        query.processAllAvailable()
        xadd(r, topic, 50, first=250)
        query.processAllAvailable()
    finally:
        query.stop()
    seqs = [e.seq for e in xrange_all(r, topic)]
    assert first.seqs() == seqs  # in order, each once
    assert max(len(rows) for _, rows in first.batches) <= 100  # maxOffsetsPerTrigger honoured
    assert len([b for b in first.batches if b[1]]) >= 4

    xadd(r, topic, 40, first=300)
    second = Batches()
    query = run_stream(stream_df(spark, url, topic, startingOffsets="earliest"), second,
                       checkpoint)
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    assert second.seqs() == [e.seq for e in xrange_all(r, topic)][300:]
    assert min(b for b, _ in second.batches) > max(b for b, _ in first.batches)


def _evict_between_triggers(r: redis.Redis, http: Any, topic: str, query: Any) -> dict[str, int]:
    """After the query read seqs 1..100: 200 more records in one atomic write that a cap of
    50 records trims at once, so no trigger can read them before the eviction."""
    query.processAllAvailable()
    http.configure(topic, cap_records=50)
    http.write(topic, [{"data": {"i": str(i)}} for i in range(100, 300)])
    return info(r, topic)


def test_eviction_between_triggers_fails_the_query_naming_the_gap(
        spark: Any, r: redis.Redis, http: Any, url: str, tmp_path: Path) -> None:
    from pyspark.errors import StreamingQueryException

    topic = "spark.loss.fail"
    xadd(r, topic, 100)
    head = info(r, topic)["head_seq"]
    sink = Batches()
    query = run_stream(stream_df(spark, url, topic, startingOffsets="earliest"), sink,
                       tmp_path / "ckpt")
    try:
        after = _evict_between_triggers(r, http, topic, query)
        with pytest.raises(StreamingQueryException) as failure:
            query.processAllAvailable()
    finally:
        query.stop()
    message = str(failure.value)
    gap = f"[{head + 1}, {after['earliest_seq'] - 1}]"
    assert f"topic '{topic}'" in message and gap in message and "reason cap" in message
    assert len(sink.seqs()) == 100

    # the checkpoint still stands before the gap: a restart that accepts the loss goes on
    resumed = Batches()
    query = run_stream(stream_df(spark, url, topic, failOnDataLoss="false"), resumed,
                       tmp_path / "ckpt")
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    assert resumed.seqs() == [e.seq for e in xrange_all(r, topic)]


def test_eviction_yields_a_tombstone_row_when_asked(
        spark: Any, r: redis.Redis, http: Any, url: str, tmp_path: Path) -> None:
    topic = "spark.loss.rows"
    xadd(r, topic, 100)
    head = info(r, topic)["head_seq"]
    before = [e.seq for e in xrange_all(r, topic)]
    sink = Batches()
    query = run_stream(stream_df(spark, url, topic, startingOffsets="earliest",
                                 failOnDataLoss="false", includeTombstones="true"), sink,
                       tmp_path / "ckpt")
    try:
        after = _evict_between_triggers(r, http, topic, query)
        query.processAllAvailable()
    finally:
        query.stop()
    tombs = [row for row in sink.rows() if row["kind"] == "tombstone"]
    assert [(t["gap_from"], t["gap_to"], t["reason"], t["seq"]) for t in tombs] == [
        (head + 1, after["earliest_seq"] - 1, "cap", after["earliest_seq"] - 1)]
    assert all(t["data"] is None for t in tombs)
    assert sink.seqs() == before + [e.seq for e in xrange_all(r, topic)]
    assert len(sink.seqs()) == 150


# ---- writes ---------------------------------------------------------------------------------


def test_sink_round_trips_a_dataframe(spark: Any, r: redis.Redis, url: str) -> None:
    rows = [(json.dumps({"user": f"u{i}", "n": i, "tags": ["a", "b"]}), f"t{i % 3}",
             None if i % 2 else "nodeA") for i in range(500)]
    rows.append((json.dumps({"flat": "yes"}), None, None))
    src = spark.createDataFrame(rows, "data string, tag string, node string").repartition(2)
    src.write.format("topics").option("url", url).option("topic", "spark.sink").mode(
        "append").save()
    back = read_df(spark, url, "spark.sink").collect()
    assert sorted((json.dumps(json.loads(x.data), sort_keys=True), x.tag, x.node) for x in back) \
        == sorted((json.dumps(json.loads(d), sort_keys=True), t, n) for d, t, n in rows)
    flat = [e for e in xrange_all(r, "spark.sink") if e.pairs == [b"flat", b"yes"]]
    assert len(flat) == 1  # a flat object of strings is written as field/value pairs

    fields = spark.createDataFrame([("ann", 3, True), ("bob", None, False)],
                                   "user string, n int, ok boolean")
    fields.write.format("topics").option("url", url).option("topic", "spark.sink.fields").mode(
        "append").save()
    assert sorted(e.pairs for e in xrange_all(r, "spark.sink.fields")) == [
        [b"user", b"ann", b"n", b"3", b"ok", b"true"], [b"user", b"bob", b"ok", b"false"]]


def test_streaming_sink_copies_a_topic(spark: Any, r: redis.Redis, url: str,
                                       tmp_path: Path) -> None:
    xadd(r, "spark.copy.src", 120)
    query = (stream_df(spark, url, "spark.copy.src", startingOffsets="earliest")
             .writeStream.format("topics").option("url", url).option("topic", "spark.copy.dst")
             .option("checkpointLocation", str(tmp_path / "ckpt")).start())
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    src = xrange_all(r, "spark.copy.src")
    dst = xrange_all(r, "spark.copy.dst")
    assert [(e.pairs, e.tag, e.node) for e in dst] == [(e.pairs, e.tag, e.node) for e in src]


def test_stream_reader_offsets_on_old_and_new_pyspark_signatures(r: redis.Redis, url: str) -> None:
    """The driver half without a JVM: offsets JSON, ReadMaxRows (4.2+), latestOffset() (4.0/4.1)."""
    import pickle

    from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

    from topicsrv.spark.options import ReadOptions
    from topicsrv.spark.stream import TopicsStreamReader

    xadd(r, "spark.off.b", 30)
    xadd(r, "spark.off.a", 5)
    opts = ReadOptions.parse({"url": url, "topic": "spark.off.b,spark.off.a,spark.off.none",
                              "startingOffsets": "earliest", "maxOffsetsPerTrigger": "20"},
                             streaming=True)
    reader = TopicsStreamReader(opts)
    try:
        start = reader.initialOffset()
        assert json.dumps(start) == '{"spark.off.a": 0, "spark.off.b": 0, "spark.off.none": 0}'
        assert reader.getDefaultReadLimit() == ReadMaxRows(20)
        capped = reader.latestOffset(start, ReadMaxRows(20))
        assert capped == {"spark.off.a": 5, "spark.off.b": 15, "spark.off.none": 0}
        assert reader.latestOffset(start, ReadAllAvailable())["spark.off.b"] == 30
        assert reader.latestOffset() == {"spark.off.a": 5, "spark.off.b": 30, "spark.off.none": 0}
        parts = reader.partitions(start, capped)  # PySpark 4.0/4.1: cap from the planned end on
        assert reader.latestOffset() == {"spark.off.a": 5, "spark.off.b": 30, "spark.off.none": 0}
        reader.commit({"spark.off.a": 5, "spark.off.b": 15, "spark.off.none": 0})
        xadd(r, "spark.off.a", 40)
        assert reader.latestOffset() == {"spark.off.a": 15, "spark.off.b": 25, "spark.off.none": 0}
        clone = pickle.loads(pickle.dumps(reader))  # executors get a copy without the client
        assert clone._client is None and clone.opts == opts
        assert [(p.topic, p.lo, p.hi) for p in pickle.loads(pickle.dumps(parts))] == [
            ("spark.off.a", 0, 5), ("spark.off.b", 0, 15)]  # by default one per topic
    finally:
        reader.stop()


def test_stream_reader_reports_a_recreated_topic(r: redis.Redis, url: str) -> None:
    from topicsrv.spark import DataLossError
    from topicsrv.spark.options import ReadOptions
    from topicsrv.spark.stream import TopicsStreamReader

    topic = "spark.recreated"
    xadd(r, topic, 10)
    start = {topic: 10}
    r.execute_command("DEL", topic)
    xadd(r, topic, 3)
    strict = TopicsStreamReader(ReadOptions.parse({"url": url, "topic": topic}, streaming=True))
    lenient = TopicsStreamReader(ReadOptions.parse(
        {"url": url, "topic": topic, "failOnDataLoss": "false"}, streaming=True))
    try:
        with pytest.raises(DataLossError, match=f"topic '{topic}' ends at seq 3.*recreated"):
            strict.latestOffset(start, None)
        assert lenient.latestOffset(start, None) == {topic: 3}
    finally:
        strict.stop()
        lenient.stop()
