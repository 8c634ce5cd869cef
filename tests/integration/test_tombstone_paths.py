"""One gap, every read path: the same tombstone (same fields, same values) through HTTP diff,
SSE, XREAD, XREADGROUP, TOPIC.DIFF (its map and its entry) and the Spark row mapping.

Five readers hold the same cursor (seq 3) on one topic with cap_records=3; one HTTP write of
ten records then evicts seqs 4..10 below all of them (reason `cap`). The only documented
variation is SSE's connect-time variant (seeds tombstones.txt): the same reason, and
`variant: "from_seq_too_old"` in a field of its own, checked last.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from tests.httpapi.conftest import SSE
from topicsrv.engine.log.tombstone import FIELDS

TOPIC = "tomb.paths"
WANT = {"gap_from": 4, "gap_to": 10, "reason": "cap", "missed_estimate": 7,
        "earliest_seq": 11, "head_seq": 13}


def http(server: Any, method: str, path: str, body: Any = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(server.http_url + path, data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        return json.loads(resp.read())


def raw_client(server: Any, protocol: int = 2) -> redis.Redis:
    """redis-py with the stream reply callbacks removed: entries arrive as sent."""
    r = redis.Redis(port=server.resp_port, protocol=protocol, socket_timeout=10)
    for name in ("XREAD", "XREADGROUP"):
        r.response_callbacks.pop(name, None)
    return r


def entry_fields(entry: Any) -> tuple[bytes, list[bytes]]:
    return entry[0], list(entry[1])


def as_text(pairs: list[bytes]) -> dict[str, str]:
    """A tombstone entry's pairs after the leading `$type tombstone`, as text."""
    assert pairs[:2] == [b"$type", b"tombstone"], pairs
    return {pairs[i].decode(): pairs[i + 1].decode() for i in range(2, len(pairs), 2)}


def text_of(tomb: dict[str, Any]) -> dict[str, str]:
    return {k: str(v) for k, v in tomb.items()}


@pytest.fixture(scope="module")
def gap(server: Any) -> Iterator[dict[str, Any]]:
    """Set the gap up once and collect what each path reads (module-scoped server)."""
    server.wait_ready()
    http(server, "PUT", f"/v0/topics/{TOPIC}", {"cap_records": 3})
    http(server, "POST", f"/v0/topics/{TOPIC}", {"records": [{"data": 1}, {"data": 2}]})
    sse = SSE(server.http_port, f"/v0/topics/{TOPIC}/watch?from_seq=2")
    http(server, "POST", f"/v0/topics/{TOPIC}", {"records": [{"data": 3}]})
    assert sse.frames(1)[0]["cursor"] == {TOPIC: 3}  # the watch read past its connect time
    r = raw_client(server)
    r.execute_command("XGROUP", "CREATE", TOPIC, "g", "0-3")
    http(server, "POST", f"/v0/topics/{TOPIC}", {"records": [{"data": i} for i in range(4, 14)]})

    got: dict[str, Any] = {"sse": sse.frames(1)[0]}
    got["diff"] = http(server, "POST", f"/v0/topics/{TOPIC}/diff", {"from_seq": 3})
    got["xread"] = r.execute_command("XREAD", "COUNT", "1", "STREAMS", TOPIC, "0-3")
    got["xreadgroup"] = r.execute_command("XREADGROUP", "GROUP", "g", "c", "COUNT", "1",
                                          "STREAMS", TOPIC, ">")
    got["topic.diff"] = raw_client(server, 3).execute_command("TOPIC.DIFF", TOPIC, "3",
                                                              "LIMIT", "1")
    got["connect"] = SSE(server.http_port, f"/v0/topics/{TOPIC}/watch?from_seq=3").frames(1)[0]
    got["client"] = r
    yield got
    sse.close()
    r.close()


def test_the_same_gap_reads_identically_on_every_path(gap: dict[str, Any]) -> None:
    diff = gap["diff"]["tombstone"]
    assert diff == WANT and list(diff) == list(FIELDS)

    sse = gap["sse"]
    assert sse["event"] == "tombstone" and sse["cursor"] == {TOPIC: 10}
    assert sse["data"] == {"topic": TOPIC, **diff}  # mid-stream: the ordinary reason

    xread_id, xread = entry_fields(gap["xread"][0][1][0])
    group_id, group = entry_fields(gap["xreadgroup"][0][1][0])
    tdiff = gap["topic.diff"]
    entry_id, entry = entry_fields(tdiff[b"tombstone_entry"])
    for pairs in (xread, group, entry):
        assert as_text(pairs) == text_of(diff)
        assert pairs[2::2] == [f.encode() for f in FIELDS]  # the same order everywhere
    assert xread_id == group_id == entry_id and xread_id.endswith(b"-10")  # <ts>-<gap_to>

    tmap = {k.decode(): (v.decode() if isinstance(v, bytes) else v)
            for k, v in tdiff[b"tombstone"].items()}
    assert tmap == diff  # TOPIC.DIFF's map is the HTTP object, typed the same (no `$type`)


def test_sse_connect_time_variant_keeps_the_reason_and_adds_its_own_field(
        gap: dict[str, Any]) -> None:
    frame = gap["connect"]
    assert frame["event"] == "tombstone" and frame["cursor"] == {TOPIC: 10}
    assert frame["data"] == {"topic": TOPIC, **WANT, "variant": "from_seq_too_old"}
    assert WANT["reason"] == "cap"


def test_spark_row_of_the_gap_matches(gap: dict[str, Any]) -> None:
    pytest.importorskip("pyarrow")
    from topicsrv.spark.client import read_range
    from topicsrv.spark.rows import to_batch

    xread_id, _ = entry_fields(gap["xread"][0][1][0])
    pages = list(read_range(gap["client"], TOPIC, 3, 13, page=1))
    row = to_batch(TOPIC, pages[0][:1]).to_pylist()[0]
    assert row["kind"] == "tombstone"
    assert {k: row[k] for k in ("gap_from", "gap_to", "reason")} == {
        k: WANT[k] for k in ("gap_from", "gap_to", "reason")}
    assert row["seq"] == WANT["gap_to"]
    assert row["ts"].timestamp() * 1000 == int(xread_id.split(b"-")[0])
