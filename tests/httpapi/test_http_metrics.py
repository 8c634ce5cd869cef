"""/metrics through prometheus_client: the exposition parses, the latency histograms (HTTP
route, RESP command, WAL sync, commit wait) move with traffic, recovery time is reported, and
per-topic and per-route series stay bounded (topicsrv/http/metrics.py)."""

from __future__ import annotations

import http.client
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from prometheus_client.openmetrics.parser import (
    text_string_to_metric_families as openmetrics_families,
)
from prometheus_client.parser import text_string_to_metric_families

from conftest import run_in_thread
from topicsrv.context import ServerConfig, ServerContext
from topicsrv.http.app import ROUTE_LABELS

from .conftest import Client

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerContext]:
    """A server with storage (real WAL fsyncs), both fronts, 3 topics with series of their own."""
    cfg = ServerConfig(http_port=0, resp_port=0, data_dir=tmp_path_factory.mktemp("m") / "data",
                       top_topics=3, status_slot_s=0.05)
    ctx, stop = run_in_thread(cfg)
    yield ctx
    stop()


def scrape(port: int, accept: str | None = None) -> tuple[str, str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("GET", "/metrics", headers={"Accept": accept} if accept else {})
    resp = conn.getresponse()
    body = resp.read().decode()
    conn.close()
    assert resp.status == 200
    return body, resp.getheader("content-type", "")


def samples(port: int) -> Samples:
    text, ctype = scrape(port)
    assert ctype.startswith("text/plain; version=0.0.4")
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def count(s: Samples, name: str, **labels: str) -> float:
    return s.get((name + "_count", tuple(sorted(labels.items()))), 0.0)


def check_histograms(text: str) -> int:
    """Every histogram is well formed: buckets cumulative, +Inf == _count. Returns how many."""
    n = 0
    for family in text_string_to_metric_families(text):
        if family.type != "histogram":
            continue
        series: dict[tuple[tuple[str, str], ...], list[float]] = {}
        counts: dict[tuple[tuple[str, str], ...], float] = {}
        for s in family.samples:
            key = tuple(sorted((k, v) for k, v in s.labels.items() if k != "le"))
            if s.name.endswith("_bucket"):
                series.setdefault(key, []).append(s.value)
            elif s.name.endswith("_count"):
                counts[key] = s.value
        for key, buckets in series.items():
            assert buckets == sorted(buckets), (family.name, key)
            assert buckets[-1] == counts[key], (family.name, key)
        n += 1
    return n


def test_histograms_move_after_traffic(live: ServerContext) -> None:
    port, resp_port = live.addresses["http"][1], live.addresses["resp"][1]
    before = samples(port)
    c = Client(port)
    assert c.put("/v0/topics/m-fsync", {"durability": "fsync"}).status == 201
    for i in range(5):
        c.write("m-fsync", i)
    r = redis.Redis(port=resp_port)
    for i in range(7):
        r.xadd("m-resp", {"n": i})
    r.pipeline(transaction=False).xadd("m-resp", {"a": 1}).xadd("m-resp", {"a": 2}).execute()
    assert len(r.xrange("m-resp")) == 9
    r.close()
    text, _ = scrape(port)
    after = samples(port)
    assert check_histograms(text) >= 5
    write_route = {"route": "POST /v0/topics/{topic}"}
    assert count(after, "topicsrv_http_request_duration_seconds", **write_route) == \
        count(before, "topicsrv_http_request_duration_seconds", **write_route) + 5
    assert count(after, "topicsrv_resp_command_duration_seconds", command="xadd") == \
        count(before, "topicsrv_resp_command_duration_seconds", command="xadd") + 9
    assert count(after, "topicsrv_resp_command_duration_seconds", command="xrange") >= 1
    synced = sum(count(after, "topicsrv_wal_sync_seconds", shard=str(i)) for i in range(4))
    synced_before = sum(count(before, "topicsrv_wal_sync_seconds", shard=str(i)) for i in range(4))
    assert synced >= synced_before + 5  # one fdatasync at least per fsync-class write
    assert count(after, "topicsrv_fsync_wait_seconds") >= count(before, "topicsrv_fsync_wait_seconds") + 5
    assert after[("topicsrv_recovery_seconds", ())] > 0
    assert after[("topicsrv_wal_writable", ())] == 1
    assert after[("topicsrv_resp_commands_total", ())] >= 11
    # the names the earlier hand-written exposition had are all still there
    for name in ("topicsrv_writes_total", "topicsrv_records_written_total", "topicsrv_topics",
                 "topicsrv_http_connections", "topicsrv_sse_streams", "topicsrv_sse_frames_total"):
        assert (name, ()) in after, name


def test_openmetrics_when_the_scraper_asks(live: ServerContext) -> None:
    text, ctype = scrape(live.addresses["http"][1], "application/openmetrics-text; version=1.0.0")
    assert ctype.startswith("application/openmetrics-text")
    names = {f.name for f in openmetrics_families(text)}
    assert {"topicsrv_writes", "topicsrv_http_request_duration_seconds"} <= names


def test_per_topic_series_are_bounded_with_an_other_aggregate(live: ServerContext) -> None:
    port = live.addresses["http"][1]
    c = Client(port)
    for i in range(8):
        c.write(f"b-idle{i}", *range(i + 1))
    c.write("b-hot", *range(200))
    s = samples(port)
    topics = {dict(k[1]).get("topic") for k in s if k[0] == "topicsrv_topic_records"}
    assert len(topics) == 4 and "_other" in topics and "b-hot" in topics  # 3 + _other
    total = sum(t.count for t in live.engine.topics.values())
    assert sum(v for k, v in s.items() if k[0] == "topicsrv_topic_records") == total
    assert s[("topicsrv_topics", ())] == len(live.engine.topics)
    # head_seq has no meaningful sum: only the topics with their own series have one
    assert not [k for k in s if k[0] == "topicsrv_topic_head_seq" and dict(k[1])["topic"] == "_other"]


def test_made_up_methods_paths_and_commands_add_no_series(live: ServerContext) -> None:
    port, resp_port = live.addresses["http"][1], live.addresses["resp"][1]
    for i in range(30):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request(f"BREW{i}", f"/v0/nothing/{i}")
        assert conn.getresponse().status in (400, 404, 405)
        conn.close()
    r = redis.Redis(port=resp_port)
    for i in range(30):
        with pytest.raises(redis.ResponseError):
            r.execute_command(f"NOSUCH{i}")
    r.close()
    s = samples(port)
    routes = {dict(k[1])["route"] for k in s if k[0] == "topicsrv_http_request_duration_seconds_count"}
    assert routes <= {*ROUTE_LABELS.values(), "other"} and "other" in routes
    commands = {dict(k[1])["command"] for k in s
                if k[0] == "topicsrv_resp_command_duration_seconds_count"}
    assert not [cmd for cmd in commands if cmd.startswith("nosuch")]


def test_a_server_without_storage_has_no_wal_families(tmp_path: Path) -> None:
    ctx, stop = run_in_thread(ServerConfig(http_port=0, resp_port=None, storage=False))
    try:
        s: Any = samples(ctx.addresses["http"][1])
        assert not [k for k in s if k[0].startswith(("topicsrv_wal_", "topicsrv_recovery_"))]
    finally:
        stop()
