"""The example jobs in spark/ (run in-process on the shared local Spark) and the helpers
docs/spark.md promises: --help without a JVM, the loss metric, append-only writes.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import redis

from topicsrv.spark.client import connect, parse_entry

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]


def load_job(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"job_{name}", ROOT / "spark" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def url(server: Any) -> str:
    return f"redis://127.0.0.1:{server.resp_port}"


@pytest.fixture(scope="module")
def r(url: str) -> Any:
    client = connect(url)
    yield client
    client.close()


def xadd(r: redis.Redis, topic: str, n: int, tags: int = 3) -> None:
    pipe = r.pipeline(transaction=False)
    for i in range(n):
        pipe.execute_command("XADD", topic, "TAG", f"t{i % tags}", "*", "i", str(i))
    pipe.execute()


@pytest.mark.parametrize("job", ["topic_to_parquet", "rollup"])
def test_jobs_have_help(job: str) -> None:
    out = subprocess.run([sys.executable, str(ROOT / "spark" / f"{job}.py"), "--help"],
                         capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert out.returncode == 0 and "usage:" in out.stdout and "--url" in out.stdout


def test_topic_to_parquet_snapshots_a_range(spark: Any, r: redis.Redis, url: str,
                                            tmp_path: Path, capsys: Any) -> None:
    xadd(r, "jobs.snap", 500)
    out = tmp_path / "snap"
    job = load_job("topic_to_parquet")
    assert job.main(["--url", url, "--topic", "jobs.snap", "--out", str(out),
                     "--starting", '{"jobs.snap": 100}', "--min-partitions", "3"]) == 0
    df = spark.read.parquet(str(out))
    seqs = sorted(row.seq for row in df.select("seq").collect())
    want = [parse_entry(e).seq for e in r.execute_command("XRANGE", "jobs.snap", "-", "+")][100:]
    assert seqs == want
    printed = capsys.readouterr().out.splitlines()  # the summary (issue 41)
    assert printed[0].startswith(f"wrote {out}: 400 records in ")
    assert printed[1:] == [f"  jobs.snap: 400 records, seqs {want[0]}..{want[-1]}"]


def test_rollup_counts_per_tag_per_window_into_a_topic(spark: Any, r: redis.Redis, url: str,
                                                       tmp_path: Path) -> None:
    xadd(r, "jobs.events", 90)
    job = load_job("rollup")
    assert job.main(["--url", url, "--source", "jobs.events", "--dest", "jobs.counts",
                     "--checkpoint", str(tmp_path / "ckpt"), "--once",
                     "--shuffle-partitions", "2"]) == 0
    latest: dict[tuple[str, str], int] = {}
    for raw in r.execute_command("XRANGE", "jobs.counts", "-", "+"):
        entry = parse_entry(raw)
        body = json.loads(dict(zip(entry.pairs[0::2], entry.pairs[1::2], strict=True))[b"data"])
        assert entry.tag == body["tag"]
        latest[(body["window_start"], body["tag"])] = body["count"]
    assert sum(latest.values()) == 90
    assert {tag for _, tag in latest} == {"t0", "t1", "t2"}


def test_observe_loss_reports_gaps_as_a_metric(spark: Any, r: redis.Redis, http: Any, url: str,
                                               tmp_path: Path) -> None:
    from topicsrv.spark import observe_loss

    topic = "jobs.loss"
    xadd(r, topic, 40)
    stream = (spark.readStream.format("topics").option("url", url).option("topic", topic)
              .option("startingOffsets", "earliest").option("failOnDataLoss", "false")
              .option("includeTombstones", "true").load())
    query = (observe_loss(stream, "loss").writeStream.format("memory").queryName("loss_sink")
             .option("checkpointLocation", str(tmp_path / "ckpt")).start())
    try:
        query.processAllAvailable()
        http.configure(topic, cap_records=10)  # then one atomic write, trimmed at once
        http.write(topic, [{"data": {"i": str(i)}} for i in range(60)])
        query.processAllAvailable()
        metrics = [p.observedMetrics["loss"].asDict() for p in query.recentProgress
                   if "loss" in p.observedMetrics]
    finally:
        query.stop()
    assert {"gaps": 1, "lost_seqs": 50} in metrics
    kinds = {row.kind for row in spark.sql("select kind from loss_sink").collect()}
    assert kinds == {"record"}
    assert spark.sql("select count(*) c from loss_sink").collect()[0].c == 50


def test_sink_refuses_overwrite(spark: Any, url: str) -> None:
    df = spark.createDataFrame([('{"a": "b"}',)], "data string")
    with pytest.raises(Exception, match="append-only"):
        df.write.format("topics").option("url", url).option("topic", "jobs.ow").mode(
            "overwrite").save()
