"""Topics, writes, diffs and deletes over real HTTP against a real server process."""

from __future__ import annotations

import threading
import time
from typing import Any

from tests.httpapi.conftest import metric, wait_until

STATE_KEYS = {"topic", "type", "epoch", "head_seq", "earliest_seq", "next_seq", "count", "bytes",
              "config", "durability", "effective_priority", "priority_components", "last_write_ts", "last_read_ts"}
DIFF_KEYS = ["topic", "records", "tombstone", "next_from_seq", "head_seq", "earliest_seq",
             "caught_up", "lag", "performance"]


def test_put_creates_then_updates(client: Any, topic: str) -> None:
    r = client.put(f"/v0/topics/{topic}", {"cap_records": 100})
    assert r.status == 201, r
    assert STATE_KEYS <= r.json.keys()
    assert r.json["config"]["cap_records"] == 100
    assert r.json["head_seq"] == 0 and r.json["earliest_seq"] == 1
    assert r.json["performance"]["server_total_ms"] >= 0
    r = client.put(f"/v0/topics/{topic}", {"ttl_ms": 60000})
    assert r.status == 200, r
    assert r.json["config"]["ttl_ms"] == 60000


def test_put_with_empty_body_uses_defaults(client: Any, topic: str) -> None:
    r = client.request("PUT", f"/v0/topics/{topic}")
    assert r.status == 201
    assert r.json["type"] == "log"


def test_put_unknown_field_and_type_change(client: Any, topic: str) -> None:
    r = client.put(f"/v0/topics/{topic}", {"cap_recrods": 1})
    assert (r.status, r.code) == (400, "invalid_request")
    assert client.get(f"/v0/topics/{topic}").status == 404  # nothing half-created
    assert client.put(f"/v0/topics/{topic}", {}).status == 201
    r = client.put(f"/v0/topics/{topic}", {"type": "queue"})
    assert (r.status, r.code) == (409, "topic_exists_incompatible")
    assert r.json["error"]["detail"]["reason"] == "type_immutable"


def test_queue_topic_state_reports_queue_stats(client: Any, topic: str) -> None:
    r = client.put(f"/v0/topics/{topic}", {"type": "queue"})
    assert r.status == 201 and r.json["type"] == "queue"
    client.write(topic, 1, 2)
    r = client.post(f"/v0/topics/{topic}/claim", {"node": "w"})
    assert r.status == 200 and [j["$seq"] for j in r.json["jobs"]] == [1]
    state = client.get(f"/v0/topics/{topic}").json
    assert STATE_KEYS <= state.keys()
    assert {k: v for k, v in state["queue"].items() if k != "oldest_ready_age_ms"} == {
        "ready": 1, "in_flight": 1, "delayed": 0, "dead_lettered": 0}
    assert state["queue"]["oldest_ready_age_ms"] >= 0
    client.write(topic + "-log", 1)
    assert "queue" not in client.get(f"/v0/topics/{topic}-log").json  # log topics have none


def test_get_state_and_touch(client: Any, topic: str) -> None:
    client.write(topic, 1, 2)
    r = client.get(f"/v0/topics/{topic}?touch=false")
    assert r.status == 200
    assert r.json["head_seq"] == 2 and r.json["count"] == 2 and r.json["next_seq"] == 3
    assert r.json["last_read_ts"] is None
    r = client.get(f"/v0/topics/{topic}")
    assert client.get(f"/v0/topics/{topic}?touch=false").json["last_read_ts"] is not None
    r = client.get("/v0/topics/no-such-topic-xyz")
    assert (r.status, r.code) == (404, "topic_not_found")


def test_list_topics_prefix_limit_after(client: Any, topic: str) -> None:
    for suffix in "abc":
        client.put(f"/v0/topics/{topic}.{suffix}", {})
    r = client.get(f"/v0/topics?prefix={topic}.&limit=2")
    assert r.status == 200
    assert [t["topic"] for t in r.json["topics"]] == [f"{topic}.a", f"{topic}.b"]
    assert r.json["next_after"] == f"{topic}.b"
    r = client.get(f"/v0/topics?prefix={topic}.&after={topic}.b")
    assert [t["topic"] for t in r.json["topics"]] == [f"{topic}.c"]
    assert r.json["next_after"] is None
    assert {"head_seq", "earliest_seq", "count"} <= r.json["topics"][0].keys()
    r = client.get("/v0/topics?limit=0")
    assert (r.status, r.code) == (400, "invalid_request")


def test_delete_topic_then_recreate_is_a_new_instance(client: Any, topic: str) -> None:
    client.write(topic, "a", "b", "c")
    r = client.delete(f"/v0/topics/{topic}")
    assert r.status == 200 and r.json["deleted"] is True
    assert client.get(f"/v0/topics/{topic}").status == 404
    assert client.delete(f"/v0/topics/{topic}").code == "topic_not_found"
    client.write(topic, "new")
    state = client.get(f"/v0/topics/{topic}").json
    assert state["epoch"] == 2 and state["head_seq"] == 1
    # a stale cursor from the old instance: "recreated", then the new records
    d = client.diff(topic, 3)
    assert d["tombstone"]["reason"] == "recreated"
    assert [x["data"] for x in d["records"]] == ["new"]
    assert d["caught_up"] is True


def test_write_response_and_record_shape(client: Any, topic: str) -> None:
    r = client.post(f"/v0/topics/{topic}", {"records": [
        {"data": {"k": 1}, "tag": "user:1", "node": "n1", "meta": {"m": "v"}},
        {"data": None},
    ]})
    assert r.status == 200, r
    body = r.json
    assert body["seqs"] == [1, 2] and body["first_seq"] == 1 and body["last_seq"] == 2
    assert body["head_seq"] == 2 and body["earliest_seq"] == 1 and body["duplicate"] is False
    assert set(body["performance"]) == {"server_total_ms", "fsync_ms"}
    d = client.diff(topic)
    assert list(d) == DIFF_KEYS
    first, second = d["records"]
    assert first["$seq"] == 1 and first["$node"] == "n1" and first["$tag"] == "user:1"
    assert first["meta"] == {"m": "v"} and first["data"] == {"k": 1}
    assert isinstance(first["$ts"], int)
    assert second == {"$seq": 2, "$ts": second["$ts"], "data": None}
    assert d["next_from_seq"] == 2 and d["caught_up"] is True and d["lag"] == 0
    assert d["performance"]["records_scanned"] == 2


def test_write_create_false_and_inline_config(client: Any, topic: str) -> None:
    r = client.post(f"/v0/topics/{topic}", {"records": [{"data": 1}], "create": False})
    assert (r.status, r.code) == (404, "topic_not_found")
    r = client.post(f"/v0/topics/{topic}", {"records": [{"data": 1}],
                                            "config": {"cap_records": 7}})
    assert r.status == 200
    assert client.get(f"/v0/topics/{topic}").json["config"]["cap_records"] == 7


def test_idempotency_key_body_and_header(client: Any, topic: str) -> None:
    client.put(f"/v0/topics/{topic}", {"idempotency_window_ms": 60000})
    a = client.post(f"/v0/topics/{topic}", {"records": [{"data": 1}], "idempotency_key": "k1"})
    b = client.post(f"/v0/topics/{topic}", {"records": [{"data": 1}], "idempotency_key": "k1"})
    assert a.json["duplicate"] is False and b.json["duplicate"] is True
    assert b.json["seqs"] == a.json["seqs"]
    h = {"Idempotency-Key": "k2"}
    c = client.post(f"/v0/topics/{topic}", {"records": [{"data": 2}]}, headers=h)
    d = client.post(f"/v0/topics/{topic}", {"records": [{"data": 2}]}, headers=h)
    assert d.json["duplicate"] is True and d.json["seqs"] == c.json["seqs"] == [2]
    assert client.get(f"/v0/topics/{topic}").json["head_seq"] == 2


def test_cap_eviction_tombstone_then_records_from_earliest(client: Any, topic: str) -> None:
    client.put(f"/v0/topics/{topic}", {"cap_records": 3})
    client.write(topic, *range(10))
    d = client.diff(topic, 0)
    tomb = d["tombstone"]
    assert tomb is not None and tomb["reason"] == "cap"
    assert tomb["gap_from"] == 1 and tomb["gap_to"] == d["earliest_seq"] - 1
    assert set(tomb) == {"gap_from", "gap_to", "reason", "missed_estimate", "earliest_seq",
                         "head_seq"}
    assert d["records"][0]["$seq"] == d["earliest_seq"]
    assert [r["$seq"] for r in d["records"]] == list(range(d["earliest_seq"], 11))
    assert d["caught_up"] is True
    # a cursor at/after evict_floor - 1 gets no tombstone
    assert client.diff(topic, tomb["gap_to"])["tombstone"] is None


def test_deleted_gap_is_silent_and_cursor_advances(client: Any, topic: str) -> None:
    client.write(topic, *range(6))
    r = client.post(f"/v0/topics/{topic}/delete", {"before_seq": 4})
    assert r.status == 200, r
    assert r.json["deleted"] == 3 and r.json["earliest_seq"] == 4 and r.json["count"] == 3
    assert "server_total_ms" in r.json["performance"]
    d = client.diff(topic, 0)
    assert d["tombstone"] is None
    assert [x["$seq"] for x in d["records"]] == [4, 5, 6]
    # a wholly deleted batch: nothing to deliver, still no tombstone, cursor moves on
    client.post(f"/v0/topics/{topic}/delete", {"before_seq": 7})
    d = client.diff(topic, 3)
    assert d["records"] == [] and d["tombstone"] is None
    assert d["next_from_seq"] == 6 and d["caught_up"] is True


def test_delete_by_tag_match(client: Any, topic: str) -> None:
    client.post(f"/v0/topics/{topic}", {"records": [
        {"data": 1, "tag": "user:1"}, {"data": 2, "tag": "user:2"}, {"data": 3, "tag": "x"}]})
    r = client.post(f"/v0/topics/{topic}/delete", {"match": ["tag", "Glob", "user:*"]})
    assert r.json["deleted"] == 2
    assert [x["data"] for x in client.diff(topic)["records"]] == [3]
    r = client.post(f"/v0/topics/{topic}/delete", {"match": ["tag", "Nope", "x"]})
    assert (r.status, r.code) == (400, "invalid_request")
    r = client.post(f"/v0/topics/{topic}/delete", {})
    assert (r.status, r.code) == (400, "invalid_request")


def test_own_node_filtered_batch_is_empty_and_caught_up(client: Any, topic: str) -> None:
    client.post(f"/v0/topics/{topic}", {"records": [{"data": i, "node": "me"} for i in range(5)]})
    d = client.diff(topic, 0, node="me")
    assert d["records"] == [] and d["caught_up"] is True and d["tombstone"] is None
    assert d["next_from_seq"] == 5 and d["lag"] == 0
    assert d["performance"]["records_scanned"] == 5
    d = client.diff(topic, 0, node=["other", "me"])
    assert d["records"] == []
    assert len(client.diff(topic, 0, node="other")["records"]) == 5


def test_diff_limit_and_max_bytes(client: Any, topic: str) -> None:
    client.write(topic, *["x" * 100 for _ in range(20)])
    d = client.diff(topic, 0, limit=5)
    assert [r["$seq"] for r in d["records"]] == [1, 2, 3, 4, 5]
    assert d["next_from_seq"] == 5 and d["caught_up"] is False and d["lag"] == 15
    d = client.diff(topic, 5, max_bytes=300)
    assert 1 <= len(d["records"]) < 15
    assert d["next_from_seq"] == d["records"][-1]["$seq"]
    for bad in ({"limit": 0}, {"limit": 10001}, {"from_seq": -1}, {"from_seq": 2**64},
                {"max_bytes": "1"}, {"node": 5}, {"wait_ms": -5}, {"limit": 1.5}):
        r = client.post(f"/v0/topics/{topic}/diff", bad)
        assert r.status == 400, (bad, r)
        assert r.code in ("invalid_request", "invalid_json"), (bad, r)


def test_long_poll_wakes_on_write_from_another_connection(client: Any, connect: Any,
                                                        topic: str) -> None:
    client.write(topic, "first")
    other = connect()
    result: dict[str, Any] = {}

    def poll() -> None:
        t0 = time.monotonic()
        result["diff"] = client.diff(topic, 1, wait_ms=20000)
        result["took"] = time.monotonic() - t0

    reads = metric(other, "topicsrv_reads_total")
    th = threading.Thread(target=poll)
    th.start()
    # The poll's first read found nothing and it waits: its event was taken before that read
    # (notify Rule 1), so the write below wakes it whenever it lands.
    wait_until(lambda: metric(other, "topicsrv_reads_total") > reads)
    assert th.is_alive()
    other.write(topic, "second")
    th.join(15)
    assert not th.is_alive()
    assert [r["data"] for r in result["diff"]["records"]] == ["second"]
    assert result["took"] < 10


def test_long_poll_times_out_caught_up(client: Any, topic: str) -> None:
    client.write(topic, 1)
    t0 = time.monotonic()
    d = client.diff(topic, 1, wait_ms=300)
    took = time.monotonic() - t0
    assert d["records"] == [] and d["caught_up"] is True
    assert 0.25 <= took < 5
    # something deliverable: answered at once despite wait_ms
    t0 = time.monotonic()
    assert len(client.diff(topic, 0, wait_ms=10000)["records"]) == 1
    assert time.monotonic() - t0 < 2


def test_topic_full_reject(client: Any, topic: str) -> None:
    client.put(f"/v0/topics/{topic}", {"cap_records": 2, "discard": "reject"})
    client.write(topic, 1, 2)
    r = client.post(f"/v0/topics/{topic}", {"records": [{"data": 3}]})
    assert (r.status, r.code) == (422, "topic_full")
    assert client.get(f"/v0/topics/{topic}").json["head_seq"] == 2


def test_record_too_large_is_atomic(client: Any, topic: str) -> None:
    client.write(topic, "ok")
    big = "x" * (1 << 20)
    r = client.post(f"/v0/topics/{topic}", {"records": [{"data": "fine"}, {"data": big}]})
    assert (r.status, r.code) == (400, "record_too_large")
    r = client.post(f"/v0/topics/{topic}", {"records": [{"data": 1, "tag": "t" * 300}]})
    assert (r.status, r.code) == (400, "record_too_large")
    r = client.post(f"/v0/topics/{topic}", {"records": [{"data": 1, "node": "n" * 200}]})
    assert (r.status, r.code) == (400, "record_too_large")
    state = client.get(f"/v0/topics/{topic}").json
    assert state["head_seq"] == 1 and state["count"] == 1


def test_write_validation_names_the_field(client: Any, topic: str) -> None:
    cases = [
        ({"records": "nope"}, "records"),
        ({"records": []}, "records"),
        ({"records": [{"data": 1}], "create": "yes"}, "create"),
        ({"records": [{"data": 1}], "config": 5}, "config"),
        ({"records": [{"data": 1}], "bogus": 1}, "bogus"),
        ({"records": [{"data": 1, "tag": 5}]}, "records[0].tag"),
        ({"records": [{"data": 1, "colour": "red"}]}, "colour"),
        ({"records": [{"data": 1}], "idempotency_key": 7}, "idempotency_key"),
    ]
    for body, field in cases:
        r = client.post(f"/v0/topics/{topic}", body)
        assert (r.status, r.code) == (400, "invalid_request"), (body, r)
        assert field in r.json["error"]["message"], (body, r)
    r = client.post(f"/v0/topics/{topic}", {"records": [{"nodata": 1}]})
    assert r.status == 400
    assert client.get(f"/v0/topics/{topic}").status == 404  # nothing created or appended


def _connections(client: Any) -> float | None:
    return metric(client, "topicsrv_http_connections")


def test_long_poll_client_that_leaves_is_cleaned_up_at_once(server: Any, client: Any,
                                                            topic: str) -> None:
    import socket

    client.write(topic, 1)
    base = _connections(client)
    body = b'{"from_seq": 1, "wait_ms": 60000}'
    s = socket.create_connection(("127.0.0.1", server.http_port), timeout=5)
    s.sendall(f"POST /v0/topics/{topic}/diff HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
              f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
    wait_until(lambda: _connections(client) == base + 1, 5)
    s.close()
    wait_until(lambda: _connections(client) == base, 5)  # not held for the 60 s of wait_ms
    client.write(topic, 2)
    assert client.diff(topic, 1)["records"][0]["data"] == 2


def test_pipelined_request_behind_a_long_poll_is_answered_in_order(server: Any, client: Any,
                                                                  topic: str) -> None:
    import socket

    client.write(topic, 1)
    body = b'{"from_seq": 1, "wait_ms": 300}'
    with socket.create_connection(("127.0.0.1", server.http_port), timeout=10) as s:
        s.sendall(f"POST /v0/topics/{topic}/diff HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                  f"Content-Length: {len(body)}\r\n\r\n".encode() + body
                  + b"GET /v0/health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    first, second = data.split(b"HTTP/1.1 ")[1:]
    assert first.startswith(b"200") and b'"caught_up":true' in first
    assert second.startswith(b"200") and b'"status":"ok"' in second


def test_metrics_count_writes_and_fsync_waits(client: Any, topic: str) -> None:
    def sample(name: str) -> float:
        for line in client.get("/metrics").body.decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
        raise AssertionError(name)

    writes = sample("topicsrv_writes_total")
    waits = sample("topicsrv_fsync_wait_seconds_count")
    client.put(f"/v0/topics/{topic}", {"durability": "fsync"})
    r = client.post(f"/v0/topics/{topic}", {"records": [{"data": "durable"}]})
    assert r.status == 200 and r.json["durability"] == "fsync"
    assert r.json["performance"]["fsync_ms"] > 0
    assert sample("topicsrv_writes_total") == writes + 1
    assert sample("topicsrv_fsync_wait_seconds_count") >= waits + 1
    text = client.get("/metrics").body.decode()
    assert f'topicsrv_topic_head_seq{{topic="{topic}"}} 1' in text
    assert 'topicsrv_fsync_wait_seconds_bucket{le="+Inf"}' in text
