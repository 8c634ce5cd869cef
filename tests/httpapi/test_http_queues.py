"""Queue routes over HTTP (API.md section 7, seeds section 10): claim, ack, nack, extend and the
/v0/work job stream, against an in-process server (both fronts, trio in a background thread)
whose engine reads a FakeClock, so lease deadlines and nack delays move only when a test says."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import redis

from .conftest import SSE, Client, metric, sse_opener, wait_until
from .inproc import Srv, start_server

LEASE_MS = 30_000


@pytest.fixture
def q(c: Client, topic: str) -> str:
    """A fresh queue (lease 30 s)."""
    r = c.put(f"/v0/topics/{topic}", {"type": "queue", "lease_ms": LEASE_MS})
    assert r.status == 201, r
    return topic


@pytest.fixture
def streams(srv: Srv) -> Iterator[Any]:
    """SSE streams on the in-process server (closed at teardown)."""
    yield from sse_opener(srv.http_port)


def produce(c: Client, q: str, n: int, start: int = 0) -> list[int]:
    r = c.post(f"/v0/topics/{q}", {"records": [{"data": {"n": start + i}} for i in range(n)]})
    assert r.status == 200, r
    return r.json["seqs"]  # type: ignore[no-any-return]


def claim(c: Client, q: str, node: str, max: int = 1, **extra: Any) -> list[dict[str, Any]]:
    r = c.post(f"/v0/topics/{q}/claim", {"node": node, "max": max, **extra})
    assert r.status == 200, r
    assert r.json["topic"] == q and "server_total_ms" in r.json["performance"]
    return r.json["jobs"]  # type: ignore[no-any-return]


def lease_op(c: Client, q: str, op: str, node: str, jobs: list[dict[str, Any]],
             fenced: bool = True, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"node": node, "seqs": [j["$seq"] for j in jobs], **extra}
    if fenced:
        body["lease_ids"] = [j["lease_id"] for j in jobs]
    r = c.post(f"/v0/topics/{q}/{op}", body)
    assert r.status == 200, r
    return r.json  # type: ignore[no-any-return]


def queue_state(c: Client, q: str) -> dict[str, Any]:
    state = c.get(f"/v0/topics/{q}?touch=false").json
    return {"count": state["count"], **{k: state["queue"][k] for k in
                                        ("ready", "in_flight", "delayed", "dead_lettered")}}


def seqs(jobs: list[dict[str, Any]]) -> list[int]:
    return [j["$seq"] for j in jobs]


# ---- lifecycle ---------------------------------------------------------------------------------


def test_lifecycle_produce_claim_ack_end_to_end(srv: Srv, c: Client, q: str) -> None:
    produce(c, q, 3)
    now = srv.clock.now_ms()
    jobs = claim(c, q, "w1", max=2)
    assert [(j["$seq"], j["data"], j["delivery"], j["deadline"]) for j in jobs] == [
        (1, {"n": 0}, 1, now + LEASE_MS), (2, {"n": 1}, 1, now + LEASE_MS)]
    assert all(isinstance(j["lease_id"], str) and "$ts" in j for j in jobs)
    assert queue_state(c, q) == {"count": 3, "ready": 1, "in_flight": 2, "delayed": 0,
                                 "dead_lettered": 0}
    r = lease_op(c, q, "ack", "w1", jobs)
    assert (r["topic"], r["acked"], r["skipped"]) == (q, [1, 2], [])
    assert queue_state(c, q) == {"count": 1, "ready": 1, "in_flight": 0, "delayed": 0,
                                 "dead_lettered": 0}
    assert [x["$seq"] for x in c.diff(q)["records"]] == [3]  # an ack deletes the job
    assert lease_op(c, q, "ack", "w1", jobs)["skipped"] == [
        {"seq": 1, "reason": "not_held"}, {"seq": 2, "reason": "not_held"}]  # idempotent
    assert seqs(claim(c, q, "w2", max=5)) == [3]
    assert claim(c, q, "w2") == []  # nothing left: an empty answer, not a wait


def test_fencing_a_stale_lease_id_is_skipped_and_the_job_stays(srv: Srv, c: Client, q: str) -> None:
    produce(c, q, 1)
    old = claim(c, q, "w", lease_ms=1000)
    srv.clock.advance(1001)
    new = claim(c, q, "w")  # the same worker again: the expired lease was reclaimed
    assert seqs(new) == [1] and new[0]["delivery"] == 2
    assert new[0]["lease_id"] != old[0]["lease_id"]
    r = lease_op(c, q, "ack", "w", old)
    assert r["acked"] == [] and r["skipped"] == [{"seq": 1, "reason": "stale_lease"}]
    assert lease_op(c, q, "nack", "w", old)["skipped"][0]["reason"] == "stale_lease"
    assert lease_op(c, q, "extend", "w", old)["skipped"][0]["reason"] == "stale_lease"
    assert queue_state(c, q)["count"] == 1 and queue_state(c, q)["in_flight"] == 1
    assert lease_op(c, q, "ack", "other", new)["skipped"] == [{"seq": 1, "reason": "not_holder"}]
    assert lease_op(c, q, "ack", "w", new)["acked"] == [1]
    assert queue_state(c, q)["count"] == 0


def test_a_lease_id_of_a_deleted_queue_never_fences_in_its_successor(c: Client, q: str) -> None:
    produce(c, q, 1)
    old = claim(c, q, "w")
    assert c.delete(f"/v0/topics/{q}").status == 200
    assert c.put(f"/v0/topics/{q}", {"type": "queue"}).status == 201
    produce(c, q, 1)
    new = claim(c, q, "w")  # same seq, same node, new queue instance
    assert seqs(new) == seqs(old) and new[0]["lease_id"] != old[0]["lease_id"]
    assert lease_op(c, q, "ack", "w", old)["skipped"] == [{"seq": 1, "reason": "stale_lease"}]
    assert queue_state(c, q)["count"] == 1


def test_nack_with_delay_is_claimable_only_after_the_delay(srv: Srv, c: Client, q: str) -> None:
    produce(c, q, 1)
    jobs = claim(c, q, "w")
    now = srv.clock.now_ms()
    r = lease_op(c, q, "nack", "w", jobs, delay_ms=5000)
    assert (r["released"], r["skipped"], r["ready_at"]) == ([1], [], now + 5000)
    assert queue_state(c, q) == {"count": 1, "ready": 0, "in_flight": 0, "delayed": 1,
                                 "dead_lettered": 0}
    assert claim(c, q, "w2") == []
    srv.clock.advance(4999)
    assert claim(c, q, "w2") == []
    srv.clock.advance(1)
    again = claim(c, q, "w2")
    assert seqs(again) == [1] and again[0]["delivery"] == 2
    assert lease_op(c, q, "nack", "w2", again, fenced=False)["released"] == [1]  # no delay
    assert seqs(claim(c, q, "w3")) == [1]


def test_extend_moves_the_deadline(srv: Srv, c: Client, q: str) -> None:
    produce(c, q, 1)
    jobs = claim(c, q, "w", lease_ms=1000)
    srv.clock.advance(800)
    now = srv.clock.now_ms()
    r = lease_op(c, q, "extend", "w", jobs, lease_ms=1000)
    assert (r["extended"], r["deadlines"], r["skipped"]) == ([1], [now + 1000], [])
    srv.clock.advance(800)  # past the first deadline, within the extended one
    assert claim(c, q, "thief") == []
    assert queue_state(c, q)["in_flight"] == 1
    srv.clock.advance(201)
    stolen = claim(c, q, "thief")
    assert seqs(stolen) == [1]
    r = lease_op(c, q, "extend", "thief", stolen)  # without lease_ms: the queue's lease_ms
    assert r["deadlines"] == [srv.clock.now_ms() + LEASE_MS]


def test_expired_leases_are_served_before_fresh_jobs(srv: Srv, c: Client, q: str) -> None:
    produce(c, q, 4)
    assert seqs(claim(c, q, "slow", max=2, lease_ms=1000)) == [1, 2]
    srv.clock.advance(1001)
    first = claim(c, q, "b")
    assert seqs(first) == [1] and first[0]["delivery"] == 2  # not the fresh seq 3
    assert [(j["$seq"], j["delivery"]) for j in claim(c, q, "b", max=2)] == [(2, 2), (3, 1)]
    assert metric(c, "topicsrv_queue_events_total", f'{{topic="{q}",event="expired"}}') == 2


# ---- fairness and waits ------------------------------------------------------------------------


def test_cohort_fairness_ten_claimers_share_fifty_jobs(srv: Srv, c: Client, topic: str) -> None:
    r = c.put(f"/v0/topics/{topic}", {"type": "queue", "claim_jitter_ms": 300})
    assert r.status == 201
    produce(c, topic, 50)
    clients = [srv.client() for _ in range(10)]
    for x in clients:
        assert x.get("/v0/health").status == 200  # connected before the race starts
    start = threading.Barrier(10)

    def one(i: int) -> list[int]:
        start.wait()
        return seqs(claim(clients[i], topic, f"w{i}", max=10))

    with ThreadPoolExecutor(10) as pool:
        got = list(pool.map(one, range(10)))
    for x in clients:
        x.close()
    assert all(3 <= len(g) <= 7 for g in got), [len(g) for g in got]
    flat = [s for g in got for s in g]
    assert sorted(flat) == list(range(1, 51))  # all 50 handed out, none twice


def test_long_poll_claim_is_woken_by_a_produce_over_resp(srv: Srv, c: Client, q: str) -> None:
    box: dict[str, Any] = {}

    def poll() -> None:
        poller = srv.client()
        t0 = time.monotonic()
        box["jobs"] = claim(poller, q, "w", wait_ms=20_000)
        box["s"] = time.monotonic() - t0
        poller.close()

    thread = threading.Thread(target=poll)
    thread.start()
    wait_until(lambda: polling(srv, q))
    assert "jobs" not in box
    r = redis.Redis(port=srv.resp_port, decode_responses=True, socket_timeout=10)
    try:
        r.xadd(q, {"job": "resize", "size": "64"})
    finally:
        r.close()
    thread.join(15)
    assert box["s"] < 15
    assert [(j["$seq"], j["data"], j["delivery"]) for j in box["jobs"]] == [
        (1, {"job": "resize", "size": "64"}, 1)]


def polling(srv: Srv, q: str) -> bool:
    """A claim of `q` is waiting: it arms its waiter in the same step as its (empty) pass,
    then waits, and only a change of `q` disarms it."""
    return srv.ctx.notifier.armed(q)


def test_an_abandoned_long_poll_claim_takes_no_job(srv: Srv, c: Client, q: str) -> None:
    body = b'{"node": "gone", "wait_ms": 20000}'
    with socket.create_connection(("127.0.0.1", srv.http_port), timeout=5) as s:
        s.sendall(b"POST /v0/topics/%b/claim HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                  b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%b"
                  % (q.encode(), len(body), body))
        wait_until(lambda: polling(srv, q))
    wait_until(lambda: srv.ctx.metrics.http.connections == 1)  # only `c` is left
    produce(c, q, 1)
    assert [(j["$seq"], j["delivery"]) for j in claim(c, q, "here")] == [(1, 1)]


def test_long_poll_claim_times_out_empty(c: Client, q: str) -> None:
    t0 = time.monotonic()
    assert claim(c, q, "w", wait_ms=150) == []
    assert time.monotonic() - t0 >= 0.14


# ---- /v0/work ----------------------------------------------------------------------------------


def next_job(s: SSE, heartbeats: int = 400) -> dict[str, Any]:
    """The next job frame (heartbeats skipped; fails after `heartbeats` of them)."""
    for _ in range(heartbeats):
        ev = s.next_event()
        if "event" in ev:
            assert ev["event"] == "job" and "id" not in ev, ev
            return ev["data"]  # type: ignore[no-any-return]
    raise AssertionError("no job frame")


def quiet(s: SSE, heartbeats: int = 4) -> None:
    """The stream sends only heartbeats for a while (no job)."""
    for _ in range(heartbeats):
        ev = s.next_event()
        assert "comment" in ev and "event" not in ev, ev


def test_work_stream_honours_max_in_flight(srv: Srv, c: Client, q: str, streams: Any) -> None:
    produce(c, q, 5)
    s = streams(f"/v0/work?topics={q}&node=W&max_in_flight=2")
    assert s.status == 200 and s.resp.getheader("content-type").startswith("text/event-stream")
    held = [next_job(s), next_job(s)]
    assert [(j["topic"], j["$seq"], j["delivery"]) for j in held] == [(q, 1, 1), (q, 2, 1)]
    quiet(s)  # holding two: nothing more is pushed
    assert queue_state(c, q)["in_flight"] == 2
    assert lease_op(c, q, "ack", "W", held[:1])["acked"] == [1]
    third = next_job(s)
    assert third["$seq"] == 3
    quiet(s)
    assert lease_op(c, q, "nack", "W", [third], delay_ms=60_000)["released"] == [3]
    assert next_job(s)["$seq"] == 4  # a nack frees the slot too
    assert queue_state(c, q) == {"count": 4, "ready": 1, "in_flight": 2, "delayed": 1,
                                 "dead_lettered": 0}


def test_work_stream_is_woken_by_a_produce_and_by_its_own_expired_lease(
        srv: Srv, c: Client, q: str, streams: Any) -> None:
    s = streams(f"/v0/work?topics={q}&node=W")
    quiet(s, 2)
    produce(c, q, 2)
    first = next_job(s)
    assert (first["$seq"], first["deadline"]) == (1, srv.clock.now_ms() + LEASE_MS)
    quiet(s, 2)
    srv.clock.advance(LEASE_MS + 1)  # the lease expired: the slot is free, the job reclaimable
    again = next_job(s)
    assert (again["$seq"], again["delivery"]) == (1, 2)  # reclaimed work before fresh seq 2


def test_work_stream_wakes_on_produce_ack_and_deadline_not_on_heartbeats() -> None:
    slow, stop = start_server(heartbeat_s=30)  # a wake-up here is never a heartbeat's
    c = slow.client()
    s: SSE | None = None
    try:
        assert c.put("/v0/topics/q", {"type": "queue", "lease_ms": 200}).status == 201
        s = SSE(slow.http_port, "/v0/work?topics=q&node=W")
        produce(c, "q", 2)
        assert next_job(s, 1)["$seq"] == 1  # woken by the produce
        assert lease_op(c, "q", "ack", "W", [{"$seq": 1}], fenced=False)["acked"] == [1]
        second = next_job(s, 1)  # woken by the ack of its own lease
        assert (second["$seq"], second["delivery"]) == (2, 1)
        slow.clock.advance(201)  # its own lease passes its deadline: slot free, job reclaimable
        again = next_job(s, 1)
        assert (again["$seq"], again["delivery"]) == (2, 2)
    finally:
        if s is not None:
            s.close()
        c.close()
        stop()


def test_work_stream_serves_several_queues(c: Client, q: str, streams: Any) -> None:
    other = q + "-b"
    assert c.put(f"/v0/topics/{other}", {"type": "queue"}).status == 201
    produce(c, q, 1)
    produce(c, other, 1)
    s = streams(f"/v0/work?topics={q},{other}&node=W&max_in_flight=5")
    got = {(j["topic"], j["$seq"]) for j in (next_job(s), next_job(s))}
    assert got == {(q, 1), (other, 1)}


def test_work_stream_shares_jobs_with_polling_claimers(c: Client, q: str, streams: Any) -> None:
    produce(c, q, 3)
    s = streams(f"/v0/work?topics={q}&node=W&max_in_flight=1")
    pushed = next_job(s)
    polled = seqs(claim(c, q, "poller", max=10))
    assert sorted([pushed["$seq"], *polled]) == [1, 2, 3]


def test_work_stream_and_a_poller_meet_in_one_cohort(srv: Srv, c: Client, topic: str,
                                                     streams: Any) -> None:
    r = c.put(f"/v0/topics/{topic}", {"type": "queue", "claim_jitter_ms": 400})
    assert r.status == 201
    produce(c, topic, 10)
    poller = srv.client()
    assert poller.get("/v0/health").status == 200  # connected before the window opens
    s = streams(f"/v0/work?topics={topic}&node=W&max_in_flight=10")  # opens the cohort
    polled = seqs(claim(poller, topic, "poller", max=10))
    poller.close()
    pushed = [next_job(s)["$seq"] for _ in range(10 - len(polled))]
    assert len(polled) == 5  # dealt in proportion to max (10 and 10), not first come
    assert sorted(polled + pushed) == list(range(1, 11))


def test_work_disconnect_releases_held_leases(srv: Srv, c: Client, q: str, streams: Any) -> None:
    produce(c, q, 4)
    s = streams(f"/v0/work?topics={q}&node=W&max_in_flight=2")
    held = [next_job(s), next_job(s)]
    assert lease_op(c, q, "ack", "W", held[:1])["acked"] == [1]
    assert next_job(s)["$seq"] == 3  # the freed slot is refilled: holding 2 and 3
    s.close()
    # no time passes (fake clock): only the release can make 2 and 3 claimable again
    wait_until(lambda: queue_state(c, q)["in_flight"] == 0)
    jobs = claim(c, q, "other", max=5)
    assert [(j["$seq"], j["delivery"]) for j in jobs] == [(2, 2), (3, 2), (4, 1)]
    assert metric(c, "topicsrv_queue_events_total", f'{{topic="{q}",event="nacked"}}') == 2


# ---- errors ------------------------------------------------------------------------------------

BAD = [
    ("claim", {}, "node"),
    ("claim", {"node": ""}, "node"),
    ("claim", {"node": 7}, "node"),
    ("claim", {"node": "w", "max": 0}, "max"),
    ("claim", {"node": "w", "max": -1}, "max"),
    ("claim", {"node": "w", "max": "3"}, "max"),
    ("claim", {"node": "w", "max": 1.5}, "max"),
    ("claim", {"node": "w", "max": True}, "max"),
    ("claim", {"node": "w", "max": 10_001}, "max"),
    ("claim", {"node": "w", "lease_ms": 0}, "lease_ms"),
    ("claim", {"node": "w", "wait_ms": -5}, "wait_ms"),
    ("claim", {"node": "w", "maxx": 2}, "maxx"),
    ("ack", {"seqs": [1]}, "node"),
    ("ack", {"node": "w"}, "seqs"),
    ("ack", {"node": "w", "seqs": []}, "seqs"),
    ("ack", {"node": "w", "seqs": 1}, "seqs"),
    ("ack", {"node": "w", "seqs": ["1"]}, "seqs"),
    ("ack", {"node": "w", "seqs": [1.0]}, "seqs"),
    ("ack", {"node": "w", "seqs": [True]}, "seqs"),
    ("ack", {"node": "w", "seqs": [-1]}, "seqs"),
    ("ack", {"node": "w", "seqs": [1], "lease_ids": ["a", "b"]}, "lease_ids"),
    ("ack", {"node": "w", "seqs": [1], "lease_ids": [1]}, "lease_ids"),
    ("ack", {"node": "w", "seqs": [1], "delay_ms": 5}, "delay_ms"),
    ("nack", {"node": "w", "seqs": [1], "delay_ms": -1}, "delay_ms"),
    ("nack", {"node": "w", "seqs": [1], "delay_ms": "5"}, "delay_ms"),
    ("nack", {"node": "w", "seqs": [1], "lease_ms": 5}, "lease_ms"),
    ("extend", {"node": "w", "seqs": [1], "lease_ms": 0}, "lease_ms"),
    ("extend", {"node": "w", "seqs": [1], "lease_ms": 2.5}, "lease_ms"),
    ("extend", {"node": "w", "seqs": ["x"]}, "seqs"),
]


def test_bad_input_is_400_and_changes_nothing(srv: Srv, c: Client, q: str) -> None:
    produce(c, q, 3)
    claim(c, q, "w")
    before = queue_state(c, q)
    events = metric(c, "topicsrv_queue_events_total", f'{{topic="{q}",event="claimed"}}')
    for op, body, field in BAD:
        r = c.post(f"/v0/topics/{q}/{op}", body)
        assert (r.status, r.code) == (400, "invalid_request"), (op, body, r)
        assert r.json["error"]["detail"]["field"] == field, (op, body, r)
    assert "maxx" in c.post(f"/v0/topics/{q}/claim", {"node": "w", "maxx": 2}).json["error"]["message"]
    r = c.post(f"/v0/topics/{q}/claim", raw=b'{"node": "w", "max": ')
    assert (r.status, r.code) == (400, "invalid_json")
    r = c.post(f"/v0/topics/{q}/ack", raw=b'{"node":"w","seqs":[1]}',
               headers={"Content-Type": "text/plain"})
    assert (r.status, r.code) == (415, "unsupported_media_type")
    assert queue_state(c, q) == before
    assert metric(c, "topicsrv_queue_events_total", f'{{topic="{q}",event="claimed"}}') == events
    for query in ("node=w", f"topics={q}", f"topics={q}&node=", f"topics={q}&node=w&max_in_flight=0",
                  f"topics={q}&node=w&max_in_flight=1001", f"topics={q}&node=w&max_in_flight=x",
                  f"topics={q}&node=w&max_inflight=2", "topics=-bad&node=w"):
        r = c.get(f"/v0/work?{query}")
        assert r.status == 400 and r.code in ("invalid_request", "invalid_topic_name"), (query, r)
    assert queue_state(c, q) == before


def test_log_topics_answer_not_a_queue_and_missing_topics_404(c: Client, topic: str) -> None:
    c.write(topic, 1)
    body = {"node": "w", "seqs": [1]}
    for name, status, code in ((topic, 409, "not_a_queue"), ("no-such-queue", 404, "topic_not_found")):
        for op, b in (("claim", {"node": "w"}), ("ack", body), ("nack", body), ("extend", body)):
            r = c.post(f"/v0/topics/{name}/{op}", b)
            assert (r.status, r.code) == (status, code), (op, r)
        r = c.get(f"/v0/work?topics={name}&node=w")
        assert (r.status, r.code) == (status, code), r
    assert c.diff(topic)["records"][0]["data"] == 1  # untouched
    r = c.get(f"/v0/topics/{topic}/claim")
    assert (r.status, r.code, r.headers["allow"]) == (405, "method_not_allowed", "POST")


# ---- dead letters and metrics ------------------------------------------------------------------


def test_dead_letter_after_max_deliveries_over_http(srv: Srv, c: Client, q: str) -> None:
    dlq = q + "-dead"
    r = c.put(f"/v0/topics/{q}", {"max_deliveries": 1, "dead_letter": dlq})
    assert r.status == 200, r
    produce(c, q, 1)
    jobs = claim(c, q, "w")
    lease_op(c, q, "nack", "w", jobs)
    assert claim(c, q, "w") == []  # a second delivery would pass max_deliveries: moved
    wait_until(lambda: queue_state(c, q)["count"] == 0)
    assert queue_state(c, q)["dead_lettered"] == 1
    moved = c.diff(dlq)["records"]
    assert [m["data"] for m in moved] == [{"n": 0}]
    meta = moved[0]["meta"]
    assert (meta["$dead_letter_topic"], meta["$dead_letter_seq"], meta["$dead_letter_deliveries"],
            meta["$dead_letter_reason"]) == (q, "1", "1", "max_deliveries")


def test_a_refused_dead_letter_copy_is_retried_after_a_while_not_on_every_pass(
        srv: Srv, c: Client, q: str) -> None:
    dlq = q + "-full"
    assert c.put(f"/v0/topics/{dlq}", {"cap_records": 1, "discard": "reject"}).status == 201
    c.write(dlq, "occupied")
    assert c.put(f"/v0/topics/{q}", {"max_deliveries": 1, "dead_letter": dlq}).status == 200
    produce(c, q, 1)
    lease_op(c, q, "nack", "w", claim(c, q, "w"))
    errors = f'{{topic="{q}",event="dead_letter_errors"}}'
    assert claim(c, q, "w", wait_ms=300) == []  # the copy is refused: the job stays
    assert metric(c, "topicsrv_queue_events_total", errors) == 1  # was ~1 per ms of the wait
    assert queue_state(c, q) == {"count": 1, "ready": 0, "in_flight": 0, "delayed": 1,
                                 "dead_lettered": 0}
    assert c.post(f"/v0/topics/{dlq}/delete", {"before_seq": 2}).status == 200  # room again
    srv.clock.advance(1000)
    assert claim(c, q, "w") == []  # moved, not delivered a second time
    wait_until(lambda: queue_state(c, q)["count"] == 0)
    assert queue_state(c, q)["dead_lettered"] == 1
    assert [r["meta"]["$dead_letter_seq"] for r in c.diff(dlq)["records"]] == ["1"]


def test_metrics_show_the_queue_families(srv: Srv, c: Client, q: str) -> None:
    produce(c, q, 4)
    jobs = claim(c, q, "w", max=3)
    lease_op(c, q, "ack", "w", jobs[:1])
    lease_op(c, q, "nack", "w", jobs[1:2], delay_ms=1000)
    lease_op(c, q, "extend", "w", jobs[2:])
    text = c.get("/metrics").body.decode()
    assert "# TYPE topicsrv_queue_jobs gauge" in text
    assert "# TYPE topicsrv_queue_events_total counter" in text
    want = {"ready": 1, "in_flight": 1, "delayed": 1}
    for state, n in want.items():
        assert metric(c, "topicsrv_queue_jobs", f'{{topic="{q}",state="{state}"}}') == n
    for event, n in {"claimed": 3, "acked": 1, "nacked": 1, "extended": 1, "expired": 0,
                     "dead_lettered": 0}.items():
        assert metric(c, "topicsrv_queue_events_total", f'{{topic="{q}",event="{event}"}}') == n
    assert metric(c, "topicsrv_queue_oldest_ready_age_seconds", f'{{topic="{q}"}}') == 0
    c.write(q + "-log", 1)  # log topics have no queue samples
    assert f'topic="{q}-log",state=' not in c.get("/metrics").body.decode()


def test_a_claim_answer_is_capped_in_bytes_and_the_rest_stays_ready(c: Client, q: str) -> None:
    """Issue 23 item 5: `max` 10000 over 20 jobs of 900 KB answers what fits in 16 MiB (at
    least one job); the jobs not sent are not leased, so the next claim gets them at once."""
    from topicsrv.engine.queues.queues import CLAIM_MAX_BYTES

    for i in range(20):
        produce_r = c.post(f"/v0/topics/{q}", {"records": [{"data": f"{i}" + "x" * 900_000}]})
        assert produce_r.status == 200, produce_r
    r = c.post(f"/v0/topics/{q}/claim", {"node": "w", "max": 10_000})
    assert r.status == 200
    n = len(r.json["jobs"])
    assert 0 < n < 20 and len(r.body) <= CLAIM_MAX_BYTES + 20 * 200  # lease fields per job
    assert seqs(r.json["jobs"]) == list(range(1, n + 1))
    assert queue_state(c, q) == {"count": 20, "ready": 20 - n, "in_flight": n, "delayed": 0,
                                 "dead_lettered": 0}
    assert seqs(claim(c, q, "w2", max=10_000)) == list(range(n + 1, 21))


def test_a_work_stream_that_is_not_read_stops_claiming(srv: Srv, c: Client, q: str) -> None:
    """Issue 23 item 3: 30 jobs of 900 KB, `max_in_flight=1000`, a client with a 4 KB receive
    buffer that never reads. The stream claims a round of at most ~1 MB and the next one only
    once the socket took it, so the jobs leased stay within what the socket buffers hold
    (a few MB), far below the 30 the old stream leased (and buffered) at once. When the client
    leaves, every lease comes back."""
    for i in range(30):
        assert c.post(f"/v0/topics/{q}", {"records": [{"data": f"{i}" + "x" * 900_000}]}).status == 200
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(("127.0.0.1", srv.http_port))
    try:
        s.sendall(f"GET /v0/work?topics={q}&node=slow&max_in_flight=1000 HTTP/1.1\r\n"
                  f"Host: 127.0.0.1\r\n\r\n".encode())
        wait_until(lambda: queue_state(c, q)["in_flight"] > 0)
        most = 0
        deadline = time.monotonic() + 1.0  # watch it: the count may only climb to the bound
        while time.monotonic() < deadline:
            most = max(most, queue_state(c, q)["in_flight"])
            time.sleep(0.02)
        assert 1 <= most <= 10, most
    finally:
        s.close()
    wait_until(lambda: queue_state(c, q)["in_flight"] == 0)
    assert queue_state(c, q)["ready"] == 30
