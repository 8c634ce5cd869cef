"""A router's `source_trim` gap read by a real Spark batch read (local[2]) of the dest:
with includeTombstones=true it is one tombstone row naming the gap and its reason, before the
records forwarded after it (tests/integration/test_routers_e2e.py reads the same gap over
HTTP diff, SSE and XREAD)."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from .test_spark_source import read_df

pytestmark = pytest.mark.spark


@pytest.fixture
def url(server: Any) -> str:
    return f"redis://127.0.0.1:{server.resp_port}"


def _router(http: Any, name: str) -> dict[str, Any]:
    import urllib.request

    with urllib.request.urlopen(f"{http.base}/v0/routers/{name}", timeout=10) as resp:
        return json.loads(resp.read())  # type: ignore[no-any-return]


def _wait(check: Any) -> None:
    deadline = time.monotonic() + 15
    while not check():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.01)


def test_source_trim_gap_is_a_tombstone_row(spark: Any, http: Any, url: str) -> None:
    src, dst = "spark.trim.src", "spark.trim.dst"
    http.configure(src, cap_records=2)
    http.configure(dst, cap_records=2, discard="reject")
    http._call("PUT", "/v0/routers/spark-trim", {"source": src, "dest": dst})
    http.write(src, [{"data": 1}, {"data": 2}])
    _wait(lambda: _router(http, "spark-trim")["forwarded"] == 2)
    http.write(src, [{"data": i} for i in range(3, 13)])  # 3..10 evicted before forwarding
    _wait(lambda: _router(http, "spark-trim")["status"] == "blocked")
    http._call("POST", f"/v0/topics/{dst}/delete", {"before_seq": 3})
    _wait(lambda: _router(http, "spark-trim")["cursor"] == 12)
    rows = [r.asDict() for r in read_df(
        spark, url, dst, startingOffsets=json.dumps({dst: 2}), includeTombstones="true",
        failOnDataLoss="false").orderBy("seq").collect()]
    assert [(r["kind"], r["seq"]) for r in rows] == [("tombstone", 10), ("record", 11),
                                                     ("record", 12)]
    assert (rows[0]["gap_from"], rows[0]["gap_to"], rows[0]["reason"]) == (3, 10, "source_trim")
    assert rows[0]["data"] is None
