"""TOPIC.CLAIM / ACK / NACK / EXTEND over real sockets, on both RESP I/O paths, with an
in-process server whose engine runs on a FakeClock (lease deadlines move only when a test
moves them) and whose HTTP front shares the engine (a produce over HTTP wakes a RESP claim)."""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from typing import Any

import pytest
import redis

from topicsrv.clock import FakeClock
from topicsrv.engine.queues.leases import state_of

from .conftest import InProc, frame, read_to_eof, read_until, start_inproc, wait_for

Srv = tuple[InProc, FakeClock]
NOT_INT = "value is not an integer or out of range"


def conn(s: InProc, protocol: int = 3, **kw: Any) -> redis.Redis:
    kw.setdefault("decode_responses", True)
    return redis.Redis(port=s.port, protocol=protocol, socket_timeout=10, **kw)


def queue(r: redis.Redis, name: str = "q", *opts: Any, jobs: int = 0) -> list[str]:
    r.execute_command("TOPIC.CREATE", name, "TYPE", "queue", *opts)
    return [r.xadd(name, {"n": str(i)}) for i in range(jobs)]


JOB = ("id", "fields", "seq", "lease_id", "deadline", "delivery")  # a job's array, by position


def claim(r: redis.Redis, node: str, *opts: Any, key: str = "q") -> Any:
    """TOPIC.CLAIM's jobs as dicts named by JOB (None: BLOCK timed out)."""
    jobs = r.execute_command("TOPIC.CLAIM", key, node, *opts)
    return None if jobs is None else [dict(zip(JOB, j, strict=True)) for j in jobs]


def flat(reply: Any) -> dict[str, Any]:
    """A RESP2 flat map as a dict (a RESP3 map as it is)."""
    return reply if isinstance(reply, dict) else dict(zip(reply[::2], reply[1::2], strict=True))


def qstats(r: redis.Redis, key: str = "q") -> dict[str, int]:
    return flat(flat(r.execute_command("TOPIC.INFO", key))["queue"])


def http_post(s: InProc, path: str, body: Any) -> Any:
    req = urllib.request.Request(f"http://127.0.0.1:{s.http_port}{path}", data=json.dumps(body).encode(),
                                 method="POST", headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        return json.loads(resp.read())


# ---- lifecycle and reply shapes ----------------------------------------------------------------


@pytest.mark.parametrize("protocol", [2, 3])
def test_lifecycle_claim_ack_with_redis_py(srv: Srv, protocol: int) -> None:
    s, clock = srv
    r = conn(s, protocol)
    ids = queue(r, "q", "LEASE_MS", "30000", jobs=3)
    now = clock.now_ms()
    jobs = r.execute_command("TOPIC.CLAIM", "q", "w1", "MAX", "2")  # the same array on both
    assert [(j[0], j[1], j[2], j[4], j[5]) for j in jobs] == [
        (ids[0], ["n", "0"], 1, now + 30000, 1), (ids[1], ["n", "1"], 2, now + 30000, 1)]
    assert len(jobs[0]) == 6 and jobs[0][3] != jobs[1][3]  # lease ids
    stats = qstats(r)
    assert (stats["in_flight"], stats["ready"]) == (2, 1)
    acked = r.execute_command("TOPIC.ACK", "q", "w1", "1", "2")
    if protocol == 2:
        assert acked == ["topic", "q", "acked", [1, 2], "skipped", []]
    else:
        assert acked == {"topic": "q", "acked": [1, 2], "skipped": []}
    assert [e[0] for e in r.xrange("q")] == [ids[2]]  # an ack deletes the job
    assert r.execute_command("TOPIC.ACK", "q", "w1", "1") == (
        ["topic", "q", "acked", [], "skipped", [[1, "not_held"]]] if protocol == 2 else
        {"topic": "q", "acked": [], "skipped": [[1, "not_held"]]})
    last = claim(r, "w2", "MAX", "5")
    assert len(last) == 1
    assert claim(r, "w2") == []  # nothing ready: an empty array at once
    r.close()


def test_ack_names_each_seq_once_in_order_whatever_mix_it_gets(srv: Srv) -> None:
    """An ack of only held seqs answers them in argument order (the bulk path); a repeated
    seq, another node's seq or a non-canonical one is skipped or parsed one by one, and what
    was acked is still exact."""
    s, _ = srv
    r = conn(s, 3)
    queue(r, "q", jobs=6)
    assert [j["seq"] for j in claim(r, "w1", "MAX", "4")] == [1, 2, 3, 4]
    assert [j["seq"] for j in claim(r, "w2", "MAX", "2")] == [5, 6]
    assert r.execute_command("TOPIC.ACK", "q", "w1", "2", "1") == {
        "topic": "q", "acked": [2, 1], "skipped": []}
    assert r.execute_command("TOPIC.ACK", "q", "w1", "3", "3", "5") == {
        "topic": "q", "acked": [3], "skipped": [[3, "not_held"], [5, "not_holder"]]}
    with pytest.raises(redis.ResponseError, match="not an integer"):
        r.execute_command("TOPIC.ACK", "q", "w1", "04")
    assert r.execute_command("TOPIC.ACK", "q", "w2", "5", "6") == {
        "topic": "q", "acked": [5, 6], "skipped": []}
    assert r.execute_command("TOPIC.ACK", "q", "w1", "4") == {
        "topic": "q", "acked": [4], "skipped": []}
    assert r.xlen("q") == 0
    r.close()


def test_reply_bytes_resp2_and_resp3_raw_socket(srv: Srv) -> None:
    """Rule 2 of the command module, byte for byte: the job is the stream entry XREADGROUP
    would send, its lease fields appended by position, the same array on RESP2 and RESP3."""
    s, clock = srv
    r = conn(s)
    queue(r, "q", "LEASE_MS", "1000")
    entry_id = r.execute_command("XADD", "q", "*", "f", "v\r\n\x00", "f", "2")  # binary, repeated
    now = clock.now_ms()
    sock = s.connect()
    sock.sendall(frame(b"TOPIC.CLAIM", b"q", b"w"))
    two = read_until(sock, b"*4\r\n$1\r\nf\r\n$4\r\nv\r\n\x00\r\n$1\r\nf\r\n$1\r\n2\r\n")
    lease_id = state_of(s.ctx.engine.get("q")).leases[1].lease_id.encode()
    eid = entry_id.encode()
    body = (b"$%d\r\n%b\r\n*4\r\n$1\r\nf\r\n$4\r\nv\r\n\x00\r\n$1\r\nf\r\n$1\r\n2\r\n"
            b":1\r\n$%d\r\n%b\r\n:%d\r\n") % (len(eid), eid, len(lease_id), lease_id, now + 1000)
    assert two == b"*1\r\n*6\r\n" + body + b":1\r\n"
    r.execute_command("TOPIC.NACK", "q", "w", "1")
    sock.sendall(frame(b"HELLO", b"3"))
    read_until(sock, b"modules\r\n*0\r\n")  # the end of HELLO's reply
    sock.sendall(frame(b"TOPIC.CLAIM", b"q", b"w"))
    three = read_until(sock, b":2\r\n")  # delivery 2
    lease_id2 = state_of(s.ctx.engine.get("q")).leases[1].lease_id.encode()
    assert three == b"*1\r\n*6\r\n" + body.replace(lease_id, lease_id2) + b":2\r\n"
    sock.sendall(frame(b"TOPIC.CLAIM", b"q", b"w") + frame(b"TOPIC.CLAIM", b"q", b"w", b"BLOCK", b"20"))
    assert read_until(sock, b"_\r\n") == b"*0\r\n_\r\n"  # nothing: empty; BLOCK timed out: null
    sock.sendall(frame(b"HELLO", b"2"))
    read_until(sock, b"modules\r\n*0\r\n")
    sock.sendall(frame(b"TOPIC.CLAIM", b"q", b"w", b"BLOCK", b"20"))
    assert read_until(sock, b"*-1\r\n") == b"*-1\r\n"  # RESP2's null array, as XREADGROUP
    sock.close()
    r.close()


def test_ack_nack_extend_reply_shapes_resp2_flat(srv: Srv) -> None:
    s, clock = srv
    r = conn(s, 2)
    queue(r, "q", "LEASE_MS", "1000", jobs=2)
    claim(r, "w", "MAX", "2")
    now = clock.now_ms()
    assert r.execute_command("TOPIC.EXTEND", "q", "w", "LEASE", "5000", "1", "7") == [
        "topic", "q", "extended", [1], "deadlines", [now + 5000], "skipped", [[7, "not_held"]]]
    assert r.execute_command("TOPIC.NACK", "q", "w", "DELAY", "10", "2", "1") == [
        "topic", "q", "released", [2, 1], "skipped", [], "ready_at", now + 10]
    r3 = conn(s, 3)
    assert r3.execute_command("TOPIC.NACK", "q", "w", "1") == {
        "topic": "q", "released": [], "skipped": [[1, "not_held"]], "ready_at": now}
    r.close()
    r3.close()


# ---- fencing, nack delay, extend, expiry ----------------------------------------------------------


def test_fencing_with_leaseids_after_expiry_and_reclaim(srv: Srv) -> None:
    s, clock = srv
    r = conn(s)
    queue(r, "q", jobs=1)
    old = claim(r, "w1", "LEASE", "100")[0]
    clock.advance(101)  # the lease expired; the same node claims the job again
    new = claim(r, "w1", "LEASE", "100")[0]
    assert (new["seq"], new["delivery"]) == (1, 2) and new["lease_id"] != old["lease_id"]
    stale = r.execute_command("TOPIC.ACK", "q", "w1", "1", "LEASEIDS", old["lease_id"])
    assert stale == {"topic": "q", "acked": [], "skipped": [[1, "stale_lease"]]}
    assert r.execute_command("TOPIC.EXTEND", "q", "w1", "1", "LEASEIDS", old["lease_id"])["skipped"] == [
        [1, "stale_lease"]]
    assert r.execute_command("TOPIC.NACK", "q", "w1", "1", "LEASEIDS", old["lease_id"])["skipped"] == [
        [1, "stale_lease"]]
    assert r.execute_command("TOPIC.ACK", "q", "w2", "1")["skipped"] == [[1, "not_holder"]]
    assert qstats(r)["in_flight"] == 1  # the stale token changed nothing
    ok = r.execute_command("TOPIC.ACK", "q", "w1", "1", "leaseids", new["lease_id"])
    assert ok == {"topic": "q", "acked": [1], "skipped": []}
    assert r.xlen("q") == 0
    r.close()


def test_nack_delay_keeps_the_job_back_until_it_passes(srv: Srv) -> None:
    s, clock = srv
    r = conn(s)
    queue(r, "q", jobs=1)
    job = claim(r, "w")[0]
    r.execute_command("TOPIC.NACK", "q", "w", "DELAY", "500", "1", "LEASEIDS", job["lease_id"])
    assert qstats(r)["delayed"] == 1
    clock.advance(499)
    assert claim(r, "w") == []
    clock.advance(1)
    again = claim(r, "w2")
    assert [(j["seq"], j["delivery"]) for j in again] == [(1, 2)]
    r.close()


def test_extend_moves_the_deadline(srv: Srv) -> None:
    s, clock = srv
    r = conn(s)
    queue(r, "q", jobs=1)
    claim(r, "w1", "LEASE", "1000")
    clock.advance(900)
    reply = r.execute_command("TOPIC.EXTEND", "q", "w1", "LEASE", "1000", "1")
    assert reply["extended"] == [1] and reply["deadlines"] == [clock.now_ms() + 1000]
    clock.advance(200)  # past the first deadline
    assert claim(r, "w2") == []
    clock.advance(801)  # past the extended one
    assert [j["seq"] for j in claim(r, "w2")] == [1]
    r.close()


def test_expired_job_is_served_before_fresh_ones(srv: Srv) -> None:
    s, clock = srv
    r = conn(s)
    queue(r, "q", jobs=3)
    claim(r, "w1", "LEASE", "100")  # seq 1
    clock.advance(101)
    got = claim(r, "w2", "MAX", "2")
    assert [(j["seq"], j["delivery"]) for j in got] == [(1, 2), (2, 1)]
    assert r.execute_command("TOPIC.ACK", "q", "w1", "1")["skipped"] == [[1, "not_holder"]]
    r.close()


# ---- BLOCK ---------------------------------------------------------------------------------------


def _blocked_claim(s: InProc, box: dict[str, Any], *opts: str) -> threading.Thread:
    def run() -> None:
        r = conn(s)
        t0 = time.monotonic()
        box["jobs"] = claim(r, "w", *opts)
        box["seconds"] = time.monotonic() - t0
        r.close()

    t = threading.Thread(target=run)
    t.start()
    w = conn(s)
    wait_for(lambda: w.info("clients")["blocked_clients"] == 1)
    w.close()
    return t


def test_block_claim_woken_by_http_produce(srv: Srv) -> None:
    s, _ = srv
    r = conn(s)
    queue(r)
    box: dict[str, Any] = {}
    t = _blocked_claim(s, box, "BLOCK", "5000")
    http_post(s, "/v0/topics/q", {"records": [{"data": {"k": "v"}, "node": "producer"}]})
    t.join(10)
    assert box["seconds"] < 4
    [job] = box["jobs"]
    assert job["seq"] == 1 and job["fields"] == ["k", "v", "$node", "producer"]
    assert qstats(r)["in_flight"] == 1
    r.close()


def test_block_claim_woken_by_xadd_from_another_client(srv: Srv) -> None:
    s, _ = srv
    r = conn(s)
    queue(r)
    box: dict[str, Any] = {}
    t = _blocked_claim(s, box, "MAX", "10", "BLOCK", "0")  # 0: for as long as it takes
    r.xadd("q", {"a": "1"})
    t.join(10)
    assert box["seconds"] < 4 and [j["fields"] for j in box["jobs"]] == [["a", "1"]]
    r.close()


def test_block_claim_of_a_killed_client_leases_nothing(srv: Srv) -> None:
    s, _ = srv
    r = conn(s)
    queue(r)
    victim = s.connect()
    victim.sendall(frame(b"CLIENT", b"ID") + frame(b"TOPIC.CLAIM", b"q", b"w", b"BLOCK", b"5000"))
    victim_id = int(read_until(victim, b"\r\n")[1:])
    wait_for(lambda: r.info("clients")["blocked_clients"] == 1)
    assert r.client_kill_filter(_id=victim_id) == 1
    assert read_to_eof(victim) == b""  # closed without a reply
    r.xadd("q", {"a": "1"})
    stats = qstats(r)
    assert (stats["ready"], stats["in_flight"]) == (1, 0)  # nothing leased to the gone client
    victim.close()
    r.close()


def test_block_timeout_is_a_null_reply_for_redis_py(srv: Srv) -> None:
    s, _ = srv
    for protocol in (2, 3):
        r = conn(s, protocol)
        queue(r)
        assert claim(r, "w", "BLOCK", "30") is None
        assert claim(r, "w") == []
        r.close()


def test_claim_on_a_coalescing_queue_waits_for_its_cohort(srv: Srv) -> None:
    """claim_jitter_ms > 0: even a claim without BLOCK waits for the window, and the claims
    that arrived meanwhile share the jobs (seeds 10.3): 10 workers x MAX 10 over 50 jobs."""
    s, _ = srv
    r = conn(s)
    queue(r, "q", "CLAIM_JITTER_MS", "1000", jobs=50)
    counts: list[int] = []
    start = threading.Barrier(10)

    def worker(i: int) -> None:
        c = conn(s)
        c.ping()  # connected before the race starts
        start.wait()
        counts.append(len(claim(c, f"w{i}", "MAX", "10")))
        c.close()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert sum(counts) == 50 and all(3 <= n <= 7 for n in counts), counts
    assert s.ctx.claims_service().cohort_passes >= 1
    r.close()


# ---- limits, dead letters, pipelines ---------------------------------------------------------------


def test_jobs_past_the_output_limit_go_back_to_the_queue() -> None:
    s, stop = start_inproc(clock=FakeClock(), client_output_limit=20_000)
    try:
        r = conn(s)
        queue(r)
        for i in range(10):
            r.xadd("q", {"blob": str(i) * 3000})
        got = claim(r, "w", "MAX", "10")
        assert 1 <= len(got) < 10
        stats = qstats(r)
        assert (stats["in_flight"], stats["ready"]) == (len(got), 10 - len(got))
        rest = claim(r, "w2", "MAX", "10")  # the others are claimable at once
        assert {j["seq"] for j in rest}.isdisjoint({j["seq"] for j in got})
        r.close()
    finally:
        stop()


def test_dead_letter_after_max_deliveries(srv: Srv) -> None:
    s, _ = srv
    r = conn(s)
    queue(r, "q", "MAX_DELIVERIES", "1", "DEAD_LETTER", "dlq", jobs=1)
    claim(r, "w")
    r.execute_command("TOPIC.NACK", "q", "w", "1")
    assert claim(r, "w") == []  # the second delivery would pass max_deliveries: moved instead
    wait_for(lambda: r.exists("q") and r.xlen("q") == 0)
    [(_, fields)] = r.xrange("dlq")
    assert fields["$meta"] and json.loads(fields["$meta"])["$dead_letter_topic"] == "q"
    assert qstats(r)["dead_lettered"] == 1
    r.close()


def test_pipelined_claims_and_acks(srv: Srv) -> None:
    s, _ = srv
    r = conn(s, 2)
    queue(r, "q", jobs=6)
    pipe = r.pipeline(transaction=False)
    for _ in range(3):
        pipe.execute_command("TOPIC.CLAIM", "q", "w", "MAX", "2")
    batches = pipe.execute()
    seqs = [j[2] for batch in batches for j in batch]
    assert seqs == [1, 2, 3, 4, 5, 6]
    pipe = r.pipeline(transaction=False)
    for seq in seqs:
        pipe.execute_command("TOPIC.ACK", "q", "w", seq)
    assert [reply[3] for reply in pipe.execute()] == [[q] for q in seqs]
    assert r.xlen("q") == 0
    r.close()


# ---- errors ----------------------------------------------------------------------------------------


BAD: list[tuple[tuple[str, ...], str]] = [
    (("TOPIC.CLAIM", "q"), "^wrong number of arguments for 'topic.claim' command$"),
    (("TOPIC.ACK", "q", "w"), "^wrong number of arguments for 'topic.ack' command$"),
    (("TOPIC.NACK", "q", "w"), "^wrong number of arguments for 'topic.nack' command$"),
    (("TOPIC.EXTEND", "q", "w"), "^wrong number of arguments for 'topic.extend' command$"),
    (("TOPIC.CLAIM", "q", "w", "MAX", "x"), f"^{NOT_INT}$"),
    (("TOPIC.CLAIM", "q", "w", "MAX", "1.5"), f"^{NOT_INT}$"),
    (("TOPIC.CLAIM", "q", "w", "LEASE", "ten"), f"^{NOT_INT}$"),
    (("TOPIC.CLAIM", "q", "w", "MAX", "0"), "^MAX must be between 1 and 10000$"),
    (("TOPIC.CLAIM", "q", "w", "MAX", "-3"), "^MAX must be between 1 and 10000$"),
    (("TOPIC.CLAIM", "q", "w", "LEASE", "0"), "^LEASE must be between 1 and"),
    (("TOPIC.CLAIM", "q", "w", "BLOCK", "x"), "^timeout is not an integer or out of range$"),
    (("TOPIC.CLAIM", "q", "w", "BLOCK", "-1"), "^timeout is negative$"),
    (("TOPIC.CLAIM", "q", "w", "MAX"), "^syntax error$"),
    (("TOPIC.CLAIM", "q", "w", "BOGUS", "1"), "^syntax error$"),
    (("TOPIC.CLAIM", "q", ""), "^'node' is required"),
    (("TOPIC.CLAIM", "q", "n" * 129), "^node is 129 bytes; the limit is 128"),
    (("TOPIC.ACK", "q", "w", "1", "x"), f"^{NOT_INT}$"),
    (("TOPIC.ACK", "q", "w", "1", "-2"), "^seq must be >= 0"),
    (("TOPIC.ACK", "q", "w", "1", "2", "LEASEIDS", "a"), "^LEASEIDS names 1 lease ids for 2 seqs"),
    (("TOPIC.ACK", "q", "w", "1", "LEASEIDS"), "^LEASEIDS names 0 lease ids for 1 seqs"),
    (("TOPIC.ACK", "q", "w", "LEASEIDS", "a"), "^at least one seq is required$"),
    (("TOPIC.NACK", "q", "w", "DELAY", "x", "1"), f"^{NOT_INT}$"),
    (("TOPIC.NACK", "q", "w", "DELAY", "-1", "1"), "^DELAY must be between 0 and"),
    (("TOPIC.NACK", "q", "w", "DELAY", "5"), "^at least one seq is required$"),
    (("TOPIC.NACK", "q", "w", "1", "DELAY", "5"), f"^{NOT_INT}$"),
    (("TOPIC.EXTEND", "q", "w", "LEASE", "0", "1"), "^LEASE must be between 1 and"),
    (("TOPIC.EXTEND", "q", "w", "LEASE", "1.0", "1"), f"^{NOT_INT}$"),
    (("TOPIC.CLAIM", "nope", "w"), "^topic 'nope' does not exist$"),
    (("TOPIC.ACK", "nope", "w", "1"), "^topic 'nope' does not exist$"),
    (("TOPIC.CLAIM", "log", "w"), r"^WRONGTYPE Operation against a key holding the wrong kind of value "
                                  r"\(not_a_queue: 'log' is a log topic"),
    (("TOPIC.NACK", "log", "w", "1"), r"\(not_a_queue: 'log' is a log topic"),
]


def test_bad_input_is_an_error_and_changes_nothing(srv: Srv) -> None:
    s, _ = srv
    r = conn(s)
    queue(r, "q", jobs=3)
    r.xadd("log", {"a": "b"})
    job = claim(r, "w")[0]
    before = (qstats(r), r.xlen("q"), r.execute_command("TOPIC.INFO", "log"))
    for cmd, pattern in BAD:
        with pytest.raises(redis.ResponseError, match=pattern):
            r.execute_command(*cmd)
        assert (qstats(r), r.xlen("q"), r.execute_command("TOPIC.INFO", "log")) == before, cmd
    assert r.ping()  # the connection stayed open
    assert r.execute_command("TOPIC.ACK", "q", "w", "1", "LEASEIDS", job["lease_id"])["acked"] == [1]
    r.close()


def test_wrongtype_both_ways_over_raw_socket(srv: Srv) -> None:
    """A log topic refuses the queue commands; a queue topic refuses consumer groups."""
    s, _ = srv
    r = conn(s)
    queue(r, "q", jobs=1)
    r.xadd("log", {"a": "b"})
    sock = s.connect()
    sock.sendall(frame(b"TOPIC.CLAIM", b"log", b"w") + frame(b"XREADGROUP", b"GROUP", b"g", b"c",
                                                              b"STREAMS", b"q", b">"))
    out = read_until(sock, b")\r\n-WRONGTYPE Operation against a key holding the wrong kind of value\r\n")
    lines = out.split(b"\r\n")
    assert lines[0].startswith(b"-WRONGTYPE Operation against a key holding the wrong kind of value (not_a_queue")
    assert lines[1] == b"-WRONGTYPE Operation against a key holding the wrong kind of value"
    sock.close()
    r.close()


def test_command_docs_and_info(srv: Srv) -> None:
    s, _ = srv
    r = conn(s)
    docs = r.execute_command("COMMAND DOCS", "topic.claim", "topic.ack", "topic.nack", "topic.extend")
    assert set(docs) == {"topic.claim", "topic.ack", "topic.nack", "topic.extend"}
    tokens = {name: [a.get("token") or a["name"] for a in d["arguments"]] for name, d in docs.items()}
    assert tokens["topic.claim"] == ["key", "node", "MAX", "LEASE", "BLOCK"]
    assert tokens["topic.ack"] == ["key", "node", "seq", "leaseids"]
    assert tokens["topic.nack"] == ["key", "node", "DELAY", "seq", "leaseids"]
    assert tokens["topic.extend"] == ["key", "node", "LEASE", "seq", "leaseids"]
    assert "not available" not in docs["topic.claim"]["summary"]
    info = {row[0]: row for row in r.execute_command("COMMAND INFO", "topic.claim", "topic.ack",
                                                      "topic.nack", "topic.extend")}
    assert (info["topic.claim"][1], set(info["topic.claim"][2])) == (-3, {"write", "blocking"})
    for name in ("topic.ack", "topic.nack", "topic.extend"):
        assert (info[name][1], set(info[name][2])) == (-4, {"write", "fast"})
        assert info[name][3:6] == [1, 1, 1]  # the key is the first argument
    r.close()


# ---- a worker, as a user would write it ---------------------------------------------------------------


def test_redis_py_worker_loop_example(srv: Srv) -> None:
    """The loop of docs/resp.md: claim a batch (waiting up to a second), process, ack."""
    s, _ = srv
    producer = conn(s)
    queue(producer)
    done: dict[str, list[int]] = {"a": [], "b": []}

    def worker(name: str) -> None:
        r = redis.Redis(port=s.port, protocol=3, decode_responses=True, socket_timeout=10)
        while True:
            jobs = r.execute_command("TOPIC.CLAIM", "q", name, "MAX", "5", "BLOCK", "300")
            if not jobs:  # None: BLOCK timed out, the queue stayed empty
                break
            for _id, fields, _seq, _lease_id, _deadline, _delivery in jobs:
                data = dict(zip(fields[::2], fields[1::2], strict=True))
                done[name].append(int(data["n"]))  # "process" the job (idempotently)
            r.execute_command("TOPIC.ACK", "q", name, *[j[2] for j in jobs],
                              "LEASEIDS", *[j[3] for j in jobs])
        r.close()

    threads = [threading.Thread(target=worker, args=(n,)) for n in done]
    for t in threads:
        t.start()
    for i in range(40):
        producer.xadd("q", {"n": str(i)})
    for t in threads:
        t.join(15)
    assert sorted(done["a"] + done["b"]) == list(range(40))  # each job once
    assert producer.xlen("q") == 0 and qstats(producer)["in_flight"] == 0
    producer.close()
