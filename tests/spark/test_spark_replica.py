"""The Spark source reads from a replica (option readFrom, issue 37) and keeps its tombstone
rules there: the records and the gaps it reports are the copy's own, a failover gap included."""

from __future__ import annotations

from typing import Any

import pytest
import redis

from tests.integration.replhelp import caught_up
from topicsrv.spark.client import read_from_url

pytestmark = pytest.mark.spark


def _pair(server_factory: Any) -> tuple[Any, Any, redis.Redis, redis.Redis]:
    primary = server_factory()
    replica = server_factory("--replicaof", f"127.0.0.1:{primary.resp_port}")
    P = redis.Redis(port=primary.resp_port, socket_timeout=10)
    R = redis.Redis(port=replica.resp_port, socket_timeout=10)
    return primary, replica, P, R


def test_read_from_resolves_a_replica(server_factory: Any) -> None:
    primary, replica, P, R = _pair(server_factory)
    P.xadd("t", {"a": 1})
    caught_up(P, R)
    purl = f"redis://127.0.0.1:{primary.resp_port}/0"
    assert read_from_url(purl, "primary") == purl
    assert read_from_url(purl, "replica") == f"redis://127.0.0.1:{replica.resp_port}/0"
    assert read_from_url(purl, "replicaPreferred") == f"redis://127.0.0.1:{replica.resp_port}/0"
    rurl = f"redis://127.0.0.1:{replica.resp_port}"
    assert read_from_url(rurl, "replica") == rurl  # already a replica
    alone = server_factory()
    aurl = f"redis://127.0.0.1:{alone.resp_port}"
    assert read_from_url(aurl, "replicaPreferred") == aurl
    with pytest.raises(ValueError, match="has no replica"):
        read_from_url(aurl, "replica")


def test_batch_read_from_a_replica_reports_the_failover_gap(spark: Any, server_factory: Any) -> None:
    primary, replica, P, R = _pair(server_factory)
    for i in range(200):
        P.xadd("sr", {"i": i})
    caught_up(P, R)
    purl = f"redis://127.0.0.1:{primary.resp_port}"

    def rows(url: str, **opts: Any) -> list[Any]:
        reader = spark.read.format("topics").option("url", url).option("topic", "sr")
        for k, v in opts.items():
            reader = reader.option(k, v)
        return sorted(reader.load().collect(), key=lambda row: row["seq"])

    on_primary = rows(purl)
    on_replica = rows(purl, readFrom="replica")
    assert [(x["seq"], x["data"]) for x in on_replica] == [(x["seq"], x["data"]) for x in on_primary]
    assert len(on_replica) == 200
    # promoted, the replica's copy carries a failover gap: a read that crosses it says so
    assert R.execute_command("REPLICAOF", "NO", "ONE") == b"OK"
    R.xadd("sr", {"i": "after"})
    got = rows(f"redis://127.0.0.1:{replica.resp_port}", includeTombstones="true",
               failOnDataLoss="false")
    tombs = [x for x in got if x["kind"] == "tombstone"]  # one per partition the gap spans
    assert {t["reason"] for t in tombs} == {"failover"}
    covered = sorted((t["gap_from"], t["gap_to"]) for t in tombs)
    assert covered[0][0] == 201 and covered[-1][1] == 201 + 65535
    assert all(a[1] + 1 == b[0] for a, b in zip(covered, covered[1:], strict=False))
    assert got[-1]["seq"] == 201 + 65536 and got[-1]["kind"] == "record"
