"""Real processes: a replica follows its primary's journal (issue 37; docs/replication.md).

Every kind of data replicates (strings, TTLs, lists, hashes, sets, sorted sets, streams and
their groups, topics written over HTTP, MULTI and scripts); a replica refuses writes
(READONLY, HTTP 409) and serves reads; it resumes from the backlog after a clean stop (a
partial resync, counted by the primary) and takes a full sync once it fell out of it or
after a kill -9; REPLICAOF NO ONE promotes it and the old primary follows it."""

from __future__ import annotations

import signal
import time
from typing import Any
from urllib.parse import urlsplit

import redis

from conftest import JsonClient
from tests.integration.replhelp import caught_up, dump, wait_until


def _writes(r: redis.Redis, tag: str, n: int = 50) -> None:
    for i in range(n):
        r.set(f"{tag}:s{i}", i)
        r.xadd(f"{tag}:stream", {"i": i})
    r.set(f"{tag}:ttl", "v", ex=100)
    r.rpush(f"{tag}:list", *range(20))
    r.lpop(f"{tag}:list")
    r.hset(f"{tag}:hash", mapping={"a": 1, "b": 2})
    r.hdel(f"{tag}:hash", "a")
    r.sadd(f"{tag}:set", "x", "y", "z")
    r.srem(f"{tag}:set", "y")
    r.zadd(f"{tag}:zset", {"m1": 1.5, "m2": 2.5})
    r.zincrby(f"{tag}:zset", 3, "m1")
    with r.pipeline(transaction=True) as p:
        p.set(f"{tag}:tx", "1")
        p.xadd(f"{tag}:stream", {"i": "tx"})
        p.lpush(f"{tag}:list", "tx")
        p.execute()
    r.eval("redis.call('set', KEYS[1], 'lua'); redis.call('incr', KEYS[2]); return 1", 2,
           f"{tag}:lua", f"{tag}:count")
    # a body past wal.OPEN_BODY_MAX (a frame of its own), and groups whose frames are all
    # the keyspace's (one frame): each fed to the replica once
    r.rpush(f"{tag}:big", *[b"v" * 100 for _ in range(300)])
    r.eval("redis.call('lpush', KEYS[1], 'lua'); return redis.call('rpush', KEYS[1], 'x')", 1,
           f"{tag}:list")
    with r.pipeline(transaction=True) as p:
        p.rpush(f"{tag}:list", "tx2")
        p.hincrby(f"{tag}:hash", "n", 1)
        p.execute()
    first = r.xrange(f"{tag}:stream", count=1)[0][0]
    r.xdel(f"{tag}:stream", first)
    r.delete(f"{tag}:s0")
    r.xgroup_create(f"{tag}:stream", "g", id="0")
    r.xreadgroup("g", "c1", {f"{tag}:stream": ">"}, count=5)
    got = r.xreadgroup("g", "c2", {f"{tag}:stream": ">"}, count=3)
    r.xack(f"{tag}:stream", "g", got[0][1][0][0])


def _http(url: str, method: str, body: Any = None) -> tuple[int, Any]:
    """(status, JSON body) of one request to a server's `http_url` + path."""
    parts = urlsplit(url)
    return JsonClient(parts.port or 80).call(method, parts.path, body)


def test_replica_follows_everything(server_factory: Any) -> None:
    primary = server_factory()
    P = redis.Redis(port=primary.resp_port, socket_timeout=10)
    _writes(P, "before")  # what the full sync brings
    assert _http(primary.http_url + "/v0/topics/events", "PUT", {})[0] in (200, 201)
    assert _http(primary.http_url + "/v0/topics/events", "POST",
                 {"records": [{"data": {"n": 1}}, {"data": {"n": 2}, "tag": "t"}]})[0] in (200, 201)
    replica = server_factory("--replicaof", f"127.0.0.1:{primary.resp_port}")
    R = redis.Redis(port=replica.resp_port, socket_timeout=10)
    _writes(P, "after")  # what the stream brings
    assert P.execute_command("WAIT", 1, 5000) == 1
    caught_up(P, R)
    assert dump(R) == dump(P)
    assert _http(replica.http_url + "/v0/topics/events/diff", "POST", {"from_seq": 0})[1]["records"] == \
        _http(primary.http_url + "/v0/topics/events/diff", "POST", {"from_seq": 0})[1]["records"]

    # a replica serves reads and refuses writes, over both fronts
    assert R.get("after:s1") == b"1"
    for cmd in (("SET", "k", "v"), ("XADD", "after:stream", "*", "f", "v"), ("LPUSH", "l", "x"),
                ("XREADGROUP", "GROUP", "g", "c", "STREAMS", "after:stream", ">")):
        try:
            R.execute_command(*cmd)
            raise AssertionError(f"{cmd} was accepted by a replica")
        except redis.ReadOnlyError as e:
            assert str(e) == "You can't write against a read only replica."
    status, body = _http(replica.http_url + "/v0/topics/events", "POST", {"records": [{"data": {}}]})
    assert status == 409 and body["error"]["code"] == "read_only_replica"
    assert body["error"]["detail"]["primary"] == f"127.0.0.1:{primary.resp_port}"
    assert R.publish("chan", "hello") == 0  # pub/sub is not data: it works on a replica

    # what Sentinel and clients read
    role = R.execute_command("ROLE")
    assert role[0] == b"slave" and role[2] == primary.resp_port and role[3] == b"connected"
    prole = P.execute_command("ROLE")
    assert prole[0] == b"master" and prole[2][0][1] == str(replica.resp_port).encode()
    info = P.info("replication")
    assert info["connected_slaves"] == 1 and info["slave0"]["port"] == replica.resp_port
    assert info["slave0"]["state"] == "online"
    rinfo = R.info("replication")
    assert rinfo["role"] == "slave" and rinfo["master_link_status"] == "up"
    assert "master_link_down_since_seconds" not in rinfo
    assert rinfo["slave_repl_offset"] == info["master_repl_offset"]
    assert R.execute_command("REPLICAOF", "127.0.0.1", str(primary.resp_port)) == \
        b"OK Already connected to specified master"

    # function libraries follow their changes (the whole set)
    lib = ("#!lua name=replib\nredis.register_function{function_name='hello', callback="
           "function() return 'hi' end, flags={'no-writes'}}")
    P.function_load(lib)
    assert P.execute_command("WAIT", 1, 5000) == 1
    assert R.fcall_ro("hello", 0) == b"hi"
    P.function_delete("replib")
    caught_up(P, R)
    assert R.function_list() == []

    # expiry is the primary's: its delete reaches the replica
    P.set("short", "v", px=200)
    caught_up(P, R)
    time.sleep(0.3)
    assert R.get("short") is None  # hidden at once, deleted by the primary's expiry
    P.get("short")
    caught_up(P, R)
    assert dump(R) == dump(P)


def _more(P: redis.Redis, url: str, tag: str, n: int) -> None:
    """Keys, streams and groups (`_writes`), a queue's claims and a router's copies."""
    _writes(P, tag, n)
    _queue_round(url, "jobs")
    _post(url, "src", [{"data": {tag: i}, **({"tag": "t"} if i % 2 else {})} for i in range(n)])


def _forwarded(url: str, *names: str) -> None:
    """Wait until each router's cursor on the server at `url` reached its source's head (a
    dest's count can be reached while the cursor has filtered records still to pass)."""
    def done() -> bool:
        for n in names:
            router = _router(url, n)[1]
            if router is None or router["cursor"] != _http(
                    f"{url}/v0/topics/{router['source']}", "GET")[1]["head_seq"]:
                return False
        return True
    wait_until(done, 20, f"routers {names} to catch up")


def _same_everything(P: redis.Redis, R: redis.Redis, url: str, rurl: str) -> None:
    """Every key, stream and group, the queue and the router's source and dest."""
    _forwarded(url, "sel")
    caught_up(P, R)
    assert dump(R) == dump(P)
    assert _queue_state(rurl, "jobs") == _queue_state(url, "jobs")
    _same_routed(url, rurl, ("src", "sel"), ("sel",))


def test_partial_and_full_resync(server_factory: Any) -> None:
    primary = server_factory("--repl-backlog-size", "64kb")
    P = redis.Redis(port=primary.resp_port, socket_timeout=10)
    url = primary.http_url
    assert _http(f"{url}/v0/topics/jobs", "PUT", {"type": "queue", "lease_ms": 60000})[0] in (200, 201)
    assert _http(f"{url}/v0/routers/sel", "PUT",
                 {"source": "src", "dest": "sel", "filter": ["tag", "Eq", "t"]})[0] in (200, 201)
    replica = server_factory("--replicaof", f"127.0.0.1:{primary.resp_port}")
    R = redis.Redis(port=replica.resp_port, socket_timeout=10)
    _more(P, url, "a", 50)
    _same_everything(P, R, url, replica.http_url)
    full0 = P.info("stats")["sync_full"]

    # stopped cleanly for a while, within the backlog: a partial resync
    replica.stop(signal.SIGTERM)
    _more(P, url, "b", 20)
    replica.start()  # on new ports (the harness binds port 0)
    R = redis.Redis(port=replica.resp_port, socket_timeout=10)
    _same_everything(P, R, url, replica.http_url)
    stats = P.info("stats")
    assert stats["sync_partial_ok"] >= 1 and stats["sync_full"] == full0

    # stopped past what the backlog keeps: a full sync, under writes
    replica.stop(signal.SIGTERM)
    for i in range(300):
        P.set(f"big:{i}", "x" * 500)
    replica.start()
    R = redis.Redis(port=replica.resp_port, socket_timeout=10)
    _more(P, url, "c", 20)
    _same_everything(P, R, url, replica.http_url)
    assert P.info("stats")["sync_full"] == full0 + 1

    # kill -9: the replica's disk may be past what it knows; it takes a full sync
    replica.kill()
    _more(P, url, "d", 10)
    replica.start()
    R = redis.Redis(port=replica.resp_port, socket_timeout=10)
    _same_everything(P, R, url, replica.http_url)
    assert P.info("stats")["sync_full"] == full0 + 2


def _primary_and_replica(server_factory: Any) -> tuple[Any, redis.Redis, Any, redis.Redis]:
    primary = server_factory()
    P = redis.Redis(port=primary.resp_port, socket_timeout=10)
    replica = server_factory("--replicaof", f"127.0.0.1:{primary.resp_port}")
    return primary, P, replica, redis.Redis(port=replica.resp_port, socket_timeout=10)


def test_promotion_and_the_old_primary_follows(server_factory: Any) -> None:
    primary, P, replica, R = _primary_and_replica(server_factory)
    _writes(P, "a", 20)
    head = len(P.xrange("a:stream")) + 1  # 21 XADDs, one XDEL: the head seq is 21
    caught_up(P, R)
    assert R.execute_command("REPLICAOF", "NO", "ONE") == b"OK"
    assert R.info("replication")["role"] == "master"
    R.set("promoted", "1")
    # a promotion leaves a failover gap: a reader crossing it is told, no seq is reused
    new_id = R.xadd("a:stream", {"after": "promotion"})
    assert int(new_id.split(b"-")[1]) == head + 65536 + 1
    got = R.xread({"a:stream": f"0-{head}"})[0][1]
    assert got[0][1][b"$type"] == b"tombstone" and got[0][1][b"reason"] == b"failover"
    assert got[-1][0] == new_id
    status, body = _http(replica.http_url + "/v0/topics/a:stream/diff", "POST",
                         {"from_seq": head})
    assert body["tombstone"]["reason"] == "failover"
    assert (body["tombstone"]["gap_from"], body["tombstone"]["gap_to"]) == (head + 1, head + 65536)
    assert P.execute_command("REPLICAOF", "127.0.0.1", str(replica.resp_port)) == b"OK"
    caught_up(R, P)
    assert P.get("promoted") == b"1"
    try:
        P.set("x", "y")
        raise AssertionError("the demoted primary accepted a write")
    except redis.ReadOnlyError:
        pass
    assert dump(P) == dump(R)
    # the role survives a restart (replication.json, CONFIG REWRITE)
    assert P.execute_command("CONFIG", "REWRITE") == b"OK"
    primary.stop()
    primary.start()
    P = redis.Redis(port=primary.resp_port, socket_timeout=10)
    wait_until(lambda: P.info("replication")["role"] == "slave", 30, "the role after a restart")
    caught_up(R, P)
    assert dump(P) == dump(R)


def _queue_state(url: str, name: str) -> Any:
    status, body = _http(f"{url}/v0/topics/{name}", "GET")
    assert status == 200, body
    queue = {k: v for k, v in body["queue"].items() if k != "oldest_ready_age_ms"}  # a clock
    return queue, body["head_seq"], body["count"]


def _queue_round(url: str, name: str) -> None:
    """Produce six jobs, claim four: ack one, nack one, extend one, keep one in flight."""
    status, _ = _http(f"{url}/v0/topics/{name}", "POST",
                      {"records": [{"data": {"job": i}} for i in range(6)]})
    assert status in (200, 201)
    status, claim = _http(f"{url}/v0/topics/{name}/claim", "POST", {"node": "w1", "max": 4})
    assert status == 200 and len(claim["jobs"]) == 4
    jobs = claim["jobs"]
    assert _http(f"{url}/v0/topics/{name}/ack", "POST", {
        "node": "w1", "seqs": [jobs[0]["$seq"]], "lease_ids": [jobs[0]["lease_id"]]})[0] == 200
    assert _http(f"{url}/v0/topics/{name}/nack", "POST",
                 {"node": "w1", "seqs": [jobs[1]["$seq"]]})[0] == 200
    assert _http(f"{url}/v0/topics/{name}/extend", "POST",
                 {"node": "w1", "seqs": [jobs[2]["$seq"]], "lease_ms": 120000})[0] == 200


def test_queues_and_leases_replicate(server_factory: Any) -> None:
    """Claims, acks, nacks and extends reach a replica, through a full sync (leases that are
    not durable included: they are alive in the primary) and through the stream; after a
    promotion the new primary hands out exactly the jobs nobody holds, with their counts."""
    primary = server_factory()
    P = redis.Redis(port=primary.resp_port, socket_timeout=10)
    url = primary.http_url
    queues = {"jobs": {"type": "queue", "durable": True, "lease_ms": 60000, "max_deliveries": 5},
              "fast": {"type": "queue", "durability": "memory", "lease_ms": 60000}}
    for name, cfg in queues.items():
        assert _http(f"{url}/v0/topics/{name}", "PUT", cfg)[0] in (200, 201)
        _queue_round(url, name)  # before the replica: the full sync carries it
    replica = server_factory("--replicaof", f"127.0.0.1:{primary.resp_port}")
    R = redis.Redis(port=replica.resp_port, socket_timeout=10)
    assert P.execute_command("WAIT", 1, 10000) == 1
    for name in queues:
        _queue_round(url, name)  # the stream carries it
    assert P.execute_command("WAIT", 1, 5000) == 1
    caught_up(P, R)
    for name in queues:
        assert (name, _queue_state(replica.http_url, name)) == (name, _queue_state(url, name))
    # a claim is a write: refused on the replica
    status, body = _http(f"{replica.http_url}/v0/topics/jobs/claim", "POST", {"node": "w2"})
    assert status == 409 and body["error"]["code"] == "read_only_replica"
    # promoted, it hands out exactly what the old primary would: the same jobs, the same
    # delivery counts (the old primary, not demoted here, is asked the same claim)
    assert R.execute_command("REPLICAOF", "NO", "ONE") == b"OK"
    for name in queues:
        got = [_http(f"{u}/v0/topics/{name}/claim", "POST", {"node": "w2", "max": 20})[1]["jobs"]
               for u in (replica.http_url, url)]
        assert [(j["$seq"], j["data"], j["delivery"]) for j in got[0]] == \
            [(j["$seq"], j["data"], j["delivery"]) for j in got[1]]
        assert len(got[0]) == 6 and any(j["delivery"] > 1 for j in got[0])  # nacked, redelivered


def test_synchronous_replication(server_factory: Any) -> None:
    """--min-replicas-to-ack 1: a write's reply waits until a replica holds it; with the
    replica stopped it answers NOREPLICAS once --min-replicas-max-lag passed (the write
    stands on the primary and reaches the replica when it comes back)."""
    primary = server_factory("--min-replicas-to-ack", "1")  # acks within 10 s, however loaded
    P = redis.Redis(port=primary.resp_port, socket_timeout=10)
    replica = server_factory("--replicaof", f"127.0.0.1:{primary.resp_port}")
    R = redis.Redis(port=replica.resp_port, socket_timeout=10)
    wait_until(lambda: P.info("replication")["connected_slaves"] == 1, 30, "the replica")
    for i in range(20):
        assert P.set(f"k{i}", i) is True
        assert R.get(f"k{i}") == str(i).encode()  # acknowledged: already on the replica
    with P.pipeline(transaction=True) as p:
        p.set("tx", "1")
        p.xadd("s", {"a": 1})
        assert p.execute()[0] is True
    assert R.get("tx") == b"1" and R.xlen("s") == 1
    assert P.get("k1") == b"1"  # reads do not wait
    assert P.config_get("min-replicas-to-ack") == {"min-replicas-to-ack": "1"}
    assert P.config_set("min-replicas-max-lag", 1)  # how long a write waits for its acks
    replica.proc.send_signal(signal.SIGSTOP)
    try:
        t0 = time.monotonic()
        try:
            P.set("late", "v")
            raise AssertionError("a write was acknowledged with its replica stopped")
        except redis.ResponseError as e:
            assert str(e).startswith("NOREPLICAS Not enough good replicas acknowledged"), e
        assert time.monotonic() - t0 >= 0.9
        assert P.get("late") == b"v"
    finally:
        replica.proc.send_signal(signal.SIGCONT)
    caught_up(P, R)
    assert R.get("late") == b"v"


def _post(url: str, topic: str, records: list[dict[str, Any]]) -> None:
    assert _http(f"{url}/v0/topics/{topic}", "POST", {"records": records})[0] in (200, 201)


def _records(url: str, topic: str) -> Any:
    status, body = _http(f"{url}/v0/topics/{topic}/diff", "POST", {"from_seq": 0, "limit": 10_000})
    assert status == 200, body
    return body["records"]


def _router(url: str, name: str) -> tuple[int, Any]:
    status, body = _http(f"{url}/v0/routers/{name}", "GET")
    if status != 200:
        return status, None
    # the counters (forwarded, skipped) are this process's, as a restart's would be
    return status, {k: body[k] for k in ("source", "dest", "filter", "cursor", "source_epoch",
                                         "hop_cap", "created_ts")}


def _same_routed(pu: str, ru: str, topics: tuple[str, ...], names: tuple[str, ...]) -> None:
    for t in topics:
        assert _records(ru, t) == _records(pu, t), t
    for n in names:
        assert _router(ru, n) == _router(pu, n), n


def test_routers_replicate_live(server_factory: Any) -> None:
    """A router made, changed or deleted after the full sync reaches the replica, its copies
    land at the primary's seqs, IDs and timestamps (the replica runs the primary's steps:
    engine/routing/routerrepl.py), a direct write to a dest keeps its place, and all of it
    survives the replica's restart (its own recovery re-derives the copies) and a promotion."""
    primary = server_factory()
    P = redis.Redis(port=primary.resp_port, socket_timeout=10)
    url = primary.http_url
    assert _http(f"{url}/v0/routers/copy", "PUT", {"source": "src", "dest": "dst"})[0] in (200, 201)
    _post(url, "src", [{"data": {"n": i}} for i in range(5)])
    wait_until(lambda: _http(f"{url}/v0/topics/dst", "GET")[1]["count"] == 5, 20, "the copies")
    replica = server_factory("--replicaof", f"127.0.0.1:{primary.resp_port}")
    R = redis.Redis(port=replica.resp_port, socket_timeout=10)
    assert P.execute_command("WAIT", 1, 10000) == 1
    caught_up(P, R)
    rurl = replica.http_url

    # after the sync: a new filtered router, copies through both, a direct write to a dest
    assert _http(f"{url}/v0/routers/tagged", "PUT",
                 {"source": "src", "dest": "dst2", "filter": ["tag", "Eq", "t"]})[0] in (200, 201)
    for i in range(4):
        _post(url, "src", [{"data": {"n": 10 * i + k}, **({"tag": "t"} if k % 3 == 0 else {})}
                           for k in range(6)])
        _post(url, "dst", [{"data": {"direct": i}}])
    wait_until(lambda: _http(f"{url}/v0/topics/dst", "GET")[1]["count"] == 5 + 24 + 4 and
               _http(f"{url}/v0/topics/dst2", "GET")[1]["count"] == 8, 20, "the copies")
    _forwarded(url, "copy", "tagged")
    assert P.execute_command("WAIT", 1, 10000) == 1
    caught_up(P, R)
    _same_routed(url, rurl, ("src", "dst", "dst2"), ("copy", "tagged"))
    time.sleep(0.6)  # a paused worker looks every 0.5 s: it must not forward on its own
    _same_routed(url, rurl, ("src", "dst", "dst2"), ("copy", "tagged"))

    # changed and deleted on the primary
    assert _http(f"{url}/v0/routers/tagged", "PUT",
                 {"source": "src", "dest": "dst2", "filter": ["tag", "Glob", "t*"]})[0] == 200
    assert _http(f"{url}/v0/routers/copy", "DELETE")[0] in (200, 204)
    _post(url, "src", [{"data": {"m": i}, "tag": "tx" if i % 2 else "u"} for i in range(6)])
    wait_until(lambda: _http(f"{url}/v0/topics/dst2", "GET")[1]["count"] == 11, 20, "the copies")
    _forwarded(url, "tagged")
    caught_up(P, R)
    _same_routed(url, rurl, ("src", "dst", "dst2"), ("copy", "tagged"))
    assert _router(rurl, "copy")[0] == 404

    # the replica's own restart: its recovery re-derives dst2's copies from its own src
    replica.stop(signal.SIGTERM)
    _post(url, "src", [{"data": {"late": 1}, "tag": "t"}])
    replica.start()
    R = redis.Redis(port=replica.resp_port, socket_timeout=10)
    rurl = replica.http_url
    _forwarded(url, "tagged")
    caught_up(P, R)
    wait_until(lambda: _http(f"{rurl}/v0/topics/dst2", "GET")[1]["count"] == 12, 20, "the copy")
    _same_routed(url, rurl, ("src", "dst", "dst2"), ("tagged",))
    assert P.info("stats")["sync_partial_ok"] >= 1

    # promoted, the replica forwards on its own from where its primary's steps left it
    assert R.execute_command("REPLICAOF", "NO", "ONE") == b"OK"
    _post(rurl, "src", [{"data": {"after": 1}, "tag": "t"}, {"data": {"after": 2}}])
    wait_until(lambda: _http(f"{rurl}/v0/topics/dst2", "GET")[1]["count"] == 13, 20,
               "the promoted replica's router")
    assert _records(rurl, "dst2")[:12] == _records(url, "dst2")  # then the failover gap
    newest = R.xrevrange("dst2", count=1)[0][1]
    assert b'"after":1' in b"".join(newest.values()), newest


def test_a_lost_link_resumes_from_the_backlog(server_factory: Any) -> None:
    """A replica whose link drops (the primary closes it) resumes with a partial resync."""
    _, P, _, R = _primary_and_replica(server_factory)
    _writes(P, "a", 10)
    caught_up(P, R)
    full0, partial0 = P.info("stats")["sync_full"], P.info("stats")["sync_partial_ok"]
    pid = R.info("server")["process_id"]
    assert P.execute_command("CLIENT", "KILL", "TYPE", "replica") == 1
    _writes(P, "b", 10)
    caught_up(P, R)
    stats = P.info("stats")
    assert (stats["sync_full"], stats["sync_partial_ok"]) == (full0, partial0 + 1)
    assert R.info("server")["process_id"] == pid
    assert dump(R) == dump(P)


def test_the_read_only_user_cannot_touch_replication(server_factory: Any) -> None:
    """A reader (--read-token) cannot make the server follow another (an attacker's) nor
    take its journal: REPLICAOF, SLAVEOF, PSYNC, SYNC, REPLCONF and CONFIG REWRITE are @admin."""
    srv = server_factory("--requirepass", "admin-secret", "--token", "http-secret",
                         "--read-token", "read-secret")
    reader = redis.Redis(port=srv.resp_port, username="reader", password="read-secret")
    for cmd in (("REPLICAOF", "127.0.0.1", "1"), ("SLAVEOF", "127.0.0.1", "1"),
                ("PSYNC", "?", "-1"), ("SYNC",), ("REPLCONF", "capa", "topicsrv"),
                ("CONFIG", "REWRITE")):
        try:
            reader.execute_command(*cmd)
            raise AssertionError(f"the reader ran {cmd}")
        except redis.exceptions.NoPermissionError:
            pass
    assert reader.execute_command("ROLE")[0] == b"master"
    admin = redis.Redis(port=srv.resp_port, password="admin-secret")
    assert admin.info("replication")["role"] == "master"


def test_a_replica_authenticates_with_masterauth(server_factory: Any) -> None:
    primary = server_factory("--requirepass", "s3cret")
    P = redis.Redis(port=primary.resp_port, password="s3cret", socket_timeout=10)
    P.set("k", "v")
    without = server_factory("--replicaof", f"127.0.0.1:{primary.resp_port}")
    W = redis.Redis(port=without.resp_port, socket_timeout=10)
    time.sleep(1.5)
    info = W.info("replication")
    assert info["master_link_status"] == "down" and info["master_link_down_since_seconds"] >= 0
    assert "NOAUTH" in without.log_path.read_text() or "Authentication" in without.log_path.read_text()
    replica = server_factory("--replicaof", f"127.0.0.1:{primary.resp_port}",
                             env={"TOPICS_MASTERAUTH": "s3cret"})
    R = redis.Redis(port=replica.resp_port, socket_timeout=10)
    caught_up(P, R)
    assert R.get("k") == b"v"
