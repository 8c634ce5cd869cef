"""One local Spark (local[2]) for every Spark test, with the `topics` source registered.

A Spark test is marked `spark`; the session is created once per pytest run (JVM start-up
costs seconds) and skips, saying why, only when no Java 17+ runtime is available.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest


def _java_major() -> int | None:
    home = os.environ.get("JAVA_HOME")
    java = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    if not java or not Path(java).exists():
        return None
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.search(r'version "(\d+)(?:\.(\d+))?', out.stderr + out.stdout)
    if not m:
        return None
    major = int(m.group(1))
    return int(m.group(2) or 0) if major == 1 else major


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    major = _java_major()
    if major is None or major < 17:
        pytest.skip(f"Spark 4 needs Java 17+; found {major or 'no java'} "
                    "(install openjdk-17-jre-headless or set JAVA_HOME)")
    from pyspark.sql import SparkSession

    from topicsrv.spark import TopicsDataSource, use_this_python

    use_this_python()
    tmp = tempfile.mkdtemp(prefix="topicsrv-spark-")
    session = (
        SparkSession.builder.master("local[2]")
        .appName("topicsrv-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.streaming.stopTimeout", "30s")
        .config("spark.sql.warehouse.dir", str(Path(tmp) / "warehouse"))
        .config("spark.local.dir", str(Path(tmp) / "local"))
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    session.dataSource.register(TopicsDataSource)
    try:
        yield session
    finally:
        session.stop()
        shutil.rmtree(tmp, ignore_errors=True)


class TopicsHTTP:
    """Just enough of topicsrv's HTTP API to set up what RESP cannot do in one step."""

    def __init__(self, base: str) -> None:
        self.base = base

    def _call(self, method: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
        req = urllib.request.Request(f"{self.base}{path}", data=json.dumps(body).encode(),
                                     method=method, headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as resp:
            result: dict[str, Any] = json.loads(resp.read())
            return result

    def configure(self, topic: str, **config: Any) -> dict[str, Any]:
        return self._call("PUT", f"/v0/topics/{topic}", config)

    def write(self, topic: str, records: list[dict[str, Any]]) -> dict[str, Any]:
        """One atomic write: every record gets its seq (and any cap eviction happens) at once."""
        return self._call("POST", f"/v0/topics/{topic}", {"records": records})


@pytest.fixture
def http(server: Any) -> TopicsHTTP:
    return TopicsHTTP(server.http_url)
