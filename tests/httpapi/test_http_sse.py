"""SSE watch over real sockets: ids, resume, tombstones, heartbeats, disconnects, backpressure."""

from __future__ import annotations

import base64
import json
import time
from typing import Any

import pytest

from tests.httpapi.conftest import metric, wait_until


def last_id(cursors: dict[str, int]) -> str:
    return base64.urlsafe_b64encode(json.dumps(cursors).encode()).rstrip(b"=").decode()


def test_single_topic_frames_ids_and_live_records(client: Any, watch: Any, topic: str) -> None:
    client.post(f"/v0/topics/{topic}", {"records": [{"data": "a", "tag": "t1"}, {"data": "b"}]})
    s = watch(f"/v0/topics/{topic}/watch?from_seq=0")
    assert s.status == 200
    assert s.resp.getheader("content-type").startswith("text/event-stream")
    f1, f2 = s.frames(2)
    assert f1["event"] == "record" and f1["data"] == {
        "topic": topic, "$seq": 1, "$ts": f1["data"]["$ts"], "$tag": "t1", "data": "a"}
    assert f1["cursor"] == {topic: 1} and f2["cursor"] == {topic: 2}
    client.write(topic, "live")
    (f3,) = s.frames(1)
    assert f3["data"]["data"] == "live" and f3["cursor"] == {topic: 3}


def test_watch_without_from_seq_starts_at_the_tail(client: Any, watch: Any, topic: str) -> None:
    client.write(topic, "old")
    s = watch(f"/v0/topics/{topic}/watch")  # the tail is fixed before the response headers
    client.write(topic, "new")
    (f,) = s.frames(1)
    assert f["data"]["data"] == "new" and f["data"]["$seq"] == 2


def test_resume_with_last_event_id_loses_and_repeats_nothing(client: Any, watch: Any,
                                                            topic: str) -> None:
    client.write(topic, *range(10))
    s = watch(f"/v0/topics/{topic}/watch?from_seq=0")
    got = s.frames(4)
    s.close()  # disconnect mid-stream
    client.write(topic, *range(10, 15))
    resume = got[-1]["id"]
    s2 = watch(f"/v0/topics/{topic}/watch?from_seq=0", headers={"Last-Event-ID": resume})
    got += s2.frames(11)
    assert [f["data"]["$seq"] for f in got] == list(range(1, 16))
    assert [f["data"]["data"] for f in got] == list(range(15))


def test_connect_time_stale_cursor_is_the_from_seq_too_old_variant(client: Any, watch: Any,
                                                                   topic: str) -> None:
    client.put(f"/v0/topics/{topic}", {"cap_records": 3})
    client.write(topic, *range(10))
    s = watch(f"/v0/topics/{topic}/watch?from_seq=0")
    tomb, *records = s.frames(4)
    assert tomb["event"] == "tombstone"
    data = tomb["data"]
    assert data["topic"] == topic and data["reason"] == "cap"
    assert data["variant"] == "from_seq_too_old"
    assert data["gap_from"] == 1 and data["gap_to"] == data["earliest_seq"] - 1
    assert tomb["cursor"] == {topic: data["gap_to"]}
    assert [r["data"]["$seq"] for r in records] == list(range(data["earliest_seq"], 11))
    # resuming from the tombstone's id is exact: the records after the gap, no new tombstone
    s2 = watch(f"/v0/topics/{topic}/watch", headers={"Last-Event-ID": tomb["id"]})
    again = s2.frames(3)
    assert [r["event"] for r in again] == ["record"] * 3
    assert [r["data"]["$seq"] for r in again] == [r["data"]["$seq"] for r in records]


def test_deleted_gap_in_watch_is_silent(client: Any, watch: Any, topic: str) -> None:
    client.write(topic, *range(6))
    client.post(f"/v0/topics/{topic}/delete", {"before_seq": 4})
    s = watch(f"/v0/topics/{topic}/watch?from_seq=0")
    assert [(f["event"], f["data"]["$seq"]) for f in s.frames(3)] == [
        ("record", 4), ("record", 5), ("record", 6)]


def test_recreated_while_watching(client: Any, watch: Any, topic: str) -> None:
    client.write(topic, 1, 2, 3)
    s = watch(f"/v0/topics/{topic}/watch?from_seq=0")
    assert len(s.frames(3)) == 3
    client.delete(f"/v0/topics/{topic}")
    client.write(topic, "again")
    tomb, rec = s.frames(2)
    assert tomb["event"] == "tombstone" and tomb["data"]["reason"] == "recreated"
    assert rec["data"] == {"topic": topic, "$seq": 1, "$ts": rec["data"]["$ts"], "data": "again"}
    assert rec["cursor"] == {topic: 1}


def test_node_filter_in_watch(client: Any, watch: Any, topic: str) -> None:
    client.post(f"/v0/topics/{topic}", {"records": [
        {"data": 1, "node": "me"}, {"data": 2, "node": "you"}, {"data": 3}]})
    s = watch(f"/v0/topics/{topic}/watch?from_seq=0&node=me")
    assert [f["data"]["data"] for f in s.frames(2)] == [2, 3]


def test_multi_topic_watch_and_resume(client: Any, watch: Any, topic: str) -> None:
    a, b = f"{topic}.a", f"{topic}.b"
    client.write(a, "a1", "a2")
    client.write(b, "b1", "b2", "b3")
    s = watch(f"/v0/watch?topics={a},{b}&from={a}:0,{b}:1")
    frames = s.frames(4)
    got = {(f["data"]["topic"], f["data"]["$seq"]) for f in frames}
    assert got == {(a, 1), (a, 2), (b, 2), (b, 3)}
    assert frames[-1]["cursor"] == {a: 2, b: 3}
    resume = frames[1]["id"]
    s.close()
    client.write(b, "b4")
    s2 = watch(f"/v0/watch?topics={a},{b}", headers={"Last-Event-ID": resume})
    seen = frames[:2] + s2.frames(3)
    assert sorted((f["data"]["topic"], f["data"]["$seq"]) for f in seen) == sorted(
        [(a, 1), (a, 2), (b, 2), (b, 3), (b, 4)])


def test_watch_bad_requests(client: Any, topic: str) -> None:
    client.write(topic, 1)
    for path, headers in (("/v0/watch", {}), (f"/v0/watch?topics={topic}&from=oops", {}),
                          (f"/v0/topics/{topic}/watch?from_seq=-1", {}),
                          (f"/v0/topics/{topic}/watch", {"Last-Event-ID": "!!notbase64"}),
                          (f"/v0/topics/{topic}/watch", {"Last-Event-ID": last_id([1])})):  # type: ignore[arg-type]
        r = client.get(path, headers=headers)
        assert (r.status, r.code) == (400, "invalid_request"), (path, r)
    r = client.get("/v0/watch?topics=bad!name")
    assert (r.status, r.code) == (400, "invalid_topic_name")


def test_disconnect_mid_stream_is_cleaned_up(client: Any, watch: Any, topic: str) -> None:
    client.write(topic, 1)
    base = metric(client, "topicsrv_sse_streams") or 0
    s = watch(f"/v0/topics/{topic}/watch?from_seq=0")
    s.frames(1)
    assert metric(client, "topicsrv_sse_streams") == base + 1
    s.close()
    wait_until(lambda: metric(client, "topicsrv_sse_streams") == base, 5)
    client.write(topic, 2)
    assert client.diff(topic)["head_seq"] == 2


def test_slow_reader_is_paced_not_buffered_and_loses_nothing(client: Any, watch: Any,
                                                            topic: str) -> None:
    payload = "x" * 1000
    n = 20_000
    for _ in range(2):
        client.post(f"/v0/topics/{topic}", {"records": [{"data": payload}] * (n // 2)})
    s = watch(f"/v0/topics/{topic}/watch?from_seq=0")
    time.sleep(0.5)  # the reader stalls: the server must be blocked on the socket
    lag = metric(client, "topicsrv_topic_watch_lag", f'{{topic="{topic}"}}')
    assert lag is not None and lag > 1000, lag  # ~20 MB were not pushed into a buffer
    assert client.get("/v0/health").status == 200  # others are unaffected
    seqs = [f["data"]["$seq"] for f in s.frames(n)]
    assert seqs == list(range(1, n + 1))


@pytest.fixture
def hb_server(server_factory: Any) -> Any:
    srv = server_factory("--heartbeat-ms", "100")
    srv.wait_ready()
    return srv


def test_heartbeat_comment_without_id(hb_server: Any, connect: Any, watch: Any,
                                      topic: str) -> None:
    c = connect(port=hb_server.http_port)
    c.write(topic, 1)
    s = watch(f"/v0/topics/{topic}/watch?from_seq=1", port=hb_server.http_port)
    t0 = time.monotonic()
    ev = s.next_event()
    assert ev == {"comment": "hb"}
    assert time.monotonic() - t0 < 5
    c.write(topic, 2)
    while "event" not in (ev := s.next_event()):
        assert ev == {"comment": "hb"}
    assert ev["data"]["$seq"] == 2
