"""Hash field expiry (Redis 7.4's HEXPIRE family) over the RESP front, on the fake clock.

redis-server here is 7.0, which has none of these commands, so the expected replies are Redis
7.4's documented ones (redis.io HEXPIRE/HTTL/HPERSIST pages, 7.4.1's t_hash.c): per-field
integers -2/0/1/2, -2/-1/TTL, -2/-1/1, and 7.4's error texts."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import redis

from topicsrv.clock import FakeClock

from .conftest import InProc, start_inproc


@pytest.fixture(scope="module")
def srv() -> Iterator[tuple[InProc, FakeClock]]:
    clock = FakeClock()
    s, stop = start_inproc(clock=clock)
    yield s, clock
    stop()


@pytest.fixture
def r(srv: tuple[InProc, FakeClock]) -> Iterator[redis.Redis]:
    c = redis.Redis(port=srv[0].port, socket_timeout=10)
    c.flushall()
    yield c
    c.close()


def cmd(r: redis.Redis, *args: Any) -> Any:
    try:
        return r.execute_command(*args)
    except redis.ResponseError as e:
        return f"ERR:{e}"


def test_set_read_and_persist_field_ttls(srv: tuple[InProc, FakeClock], r: redis.Redis) -> None:
    clock = srv[1]
    now = clock.now_ms()
    r.hset("h", mapping={"a": "1", "b": "2", "c": "3"})
    assert cmd(r, "OBJECT", "ENCODING", "h") == b"listpack"
    assert cmd(r, "HEXPIRE", "h", 100, "FIELDS", 3, "a", "b", "nope") == [1, 1, -2]
    assert cmd(r, "OBJECT", "ENCODING", "h") == b"listpackex"
    assert cmd(r, "HTTL", "h", "FIELDS", 3, "a", "c", "nope") == [100, -1, -2]
    assert cmd(r, "HPTTL", "h", "FIELDS", 1, "a") == [100_000]
    assert cmd(r, "HEXPIRETIME", "h", "FIELDS", 1, "a") == [(now + 100_000 + 999) // 1000]
    assert cmd(r, "HPEXPIRETIME", "h", "FIELDS", 2, "a", "c") == [now + 100_000, -1]
    clock.advance(1)  # HTTL rounds the seconds left up, as 7.4
    assert cmd(r, "HTTL", "h", "FIELDS", 1, "a") == [100]
    assert cmd(r, "HPTTL", "h", "FIELDS", 1, "a") == [99_999]
    assert cmd(r, "HPERSIST", "h", "FIELDS", 4, "a", "a", "c", "nope") == [1, -1, -1, -2]
    assert cmd(r, "HTTL", "h", "FIELDS", 2, "a", "b") == [-1, 100]
    assert cmd(r, "OBJECT", "ENCODING", "h") == b"listpackex"  # 7.4 never converts back
    # a missing key: -2 for every field
    for c in ("HTTL", "HPTTL", "HEXPIRETIME", "HPEXPIRETIME", "HPERSIST"):
        assert cmd(r, c, "missing", "FIELDS", 2, "a", "b") == [-2, -2]
    assert cmd(r, "HEXPIRE", "missing", 10, "FIELDS", 1, "a") == [-2]
    assert r.exists("missing") == 0


def test_conditions_nx_xx_gt_lt(r: redis.Redis) -> None:
    r.hset("h", mapping={"a": "1", "b": "2"})
    assert cmd(r, "HEXPIRE", "h", 100, "XX", "FIELDS", 1, "a") == [0]  # no TTL yet
    assert cmd(r, "HEXPIRE", "h", 100, "GT", "FIELDS", 1, "a") == [0]  # none = infinite
    assert cmd(r, "HEXPIRE", "h", 100, "LT", "FIELDS", 1, "a") == [1]
    assert cmd(r, "HEXPIRE", "h", 50, "NX", "FIELDS", 2, "a", "b") == [0, 1]
    assert cmd(r, "HEXPIRE", "h", 200, "xx", "FIELDS", 1, "a") == [1]
    assert cmd(r, "HEXPIRE", "h", 100, "GT", "FIELDS", 2, "a", "b") == [0, 1]
    assert cmd(r, "HEXPIRE", "h", 150, "LT", "FIELDS", 2, "a", "b") == [1, 0]
    assert cmd(r, "HTTL", "h", "FIELDS", 2, "a", "b") == [150, 100]
    # each field sees the changes of the fields before it in the same command
    assert cmd(r, "HPERSIST", "h", "FIELDS", 1, "a") == [1]
    assert cmd(r, "HEXPIRE", "h", 10, "NX", "FIELDS", 2, "a", "a") == [1, 0]


def test_a_past_or_zero_time_deletes_the_fields(r: redis.Redis) -> None:
    r.hset("h", mapping={"a": "1", "b": "2", "c": "3"})
    assert cmd(r, "HPEXPIRE", "h", 0, "FIELDS", 2, "a", "a") == [2, -2]
    assert cmd(r, "HEXPIREAT", "h", 1, "FIELDS", 2, "b", "nope") == [2, -2]
    assert r.hgetall("h") == {b"c": b"3"}
    assert cmd(r, "HPEXPIREAT", "h", 1, "FIELDS", 1, "c") == [2]
    assert r.exists("h") == 0


def test_expired_fields_are_never_visible(srv: tuple[InProc, FakeClock], r: redis.Redis) -> None:
    clock = srv[1]
    r.hset("h", mapping={"a": "1", "b": "2", "c": "3"})
    assert cmd(r, "HPEXPIRE", "h", 1000, "FIELDS", 2, "a", "b") == [1, 1]
    clock.advance(1000)
    assert r.hget("h", "a") is None and r.hexists("h", "b") is False
    assert r.hlen("h") == 1 and r.hgetall("h") == {b"c": b"3"} and r.hkeys("h") == [b"c"]
    assert r.hscan("h") == (0, {b"c": b"3"}) and r.hrandfield("h", -5) == [b"c"] * 5
    assert cmd(r, "HTTL", "h", "FIELDS", 1, "a") == [-2]
    r.hset("h2", "x", "1")
    cmd(r, "HPEXPIRE", "h2", 500, "FIELDS", 1, "x")
    clock.advance(500)
    assert r.exists("h2") == 0 and r.type("h2") == b"none"  # the last field took the hash


def test_hset_clears_the_ttl_and_hincrby_keeps_it(r: redis.Redis) -> None:
    r.hset("h", mapping={"a": "1", "n": "5", "f": "1.5"})
    cmd(r, "HEXPIRE", "h", 100, "FIELDS", 3, "a", "n", "f")
    r.hset("h", "a", "2")
    r.hincrby("h", "n", 1)
    r.hincrbyfloat("h", "f", "1")
    assert cmd(r, "HTTL", "h", "FIELDS", 3, "a", "n", "f") == [-1, 100, 100]
    r.hsetnx("h", "n", "x")  # an HSETNX that sets nothing changes nothing
    assert cmd(r, "HTTL", "h", "FIELDS", 1, "n") == [100]


def test_rename_copy_and_big_hashes_keep_field_ttls(srv: tuple[InProc, FakeClock],
                                                    r: redis.Redis) -> None:
    clock = srv[1]
    r.hset("h", mapping={f"f{i}": str(i) for i in range(600)})
    assert cmd(r, "OBJECT", "ENCODING", "h") == b"hashtable"
    cmd(r, "HPEXPIRE", "h", 1000, "FIELDS", 2, "f1", "f2")
    r.copy("h", "c")
    r.rename("h", "n")
    assert cmd(r, "HPTTL", "n", "FIELDS", 2, "f1", "f3") == [1000, -1]
    assert cmd(r, "HPTTL", "c", "FIELDS", 1, "f2") == [1000]
    assert cmd(r, "OBJECT", "ENCODING", "c") == b"hashtable"
    clock.advance(1000)
    assert r.hlen("n") == 598 and r.hlen("c") == 598 and r.hget("c", "f1") is None


def test_the_active_cycle_reaps_without_a_lookup(srv: tuple[InProc, FakeClock],
                                                 r: redis.Redis) -> None:
    s, clock = srv
    for i in range(20):
        r.hset(f"k{i}", mapping={"a": "1", "b": "2"})
        cmd(r, "HPEXPIRE", f"k{i}", 100, "FIELDS", 2, "a", "b")
    clock.advance(100)
    ks = s.ctx.engine.keyspace
    gone = ks.active_expire()  # from the test thread: the loop is idle between commands
    assert gone == 20 and not ks.fexpiry.deadlines and r.dbsize() == 0


def test_argument_errors_are_redis_7_4s(r: redis.Redis) -> None:
    r.hset("h", "a", "1")
    r.set("s", "v")
    assert "WRONGTYPE" in cmd(r, "HEXPIRE", "s", "x", "FIELDS", 1, "a")  # the type first
    assert "WRONGTYPE" in cmd(r, "HTTL", "s", "FIELDS", 1, "a")
    assert "WRONGTYPE" in cmd(r, "HPERSIST", "s", "x", 1, "a")  # the type before FIELDS
    assert cmd(r, "HEXPIRE", "h", "x", "FIELDS", 1, "a") == \
        "ERR:value is not an integer or out of range"
    assert cmd(r, "HEXPIRE", "h", -1, "FIELDS", 1, "a") == "ERR:invalid expire time, must be >= 0"
    assert cmd(r, "HEXPIRE", "h", 1 << 40, "FIELDS", 1, "a") == \
        "ERR:invalid expire time in 'hexpire' command"
    assert cmd(r, "HPEXPIREAT", "h", 1 << 46, "FIELDS", 1, "a") == \
        "ERR:invalid expire time in 'hpexpireat' command"
    assert cmd(r, "HEXPIRE", "h", 10, "FIELD", 1, "a") == \
        "ERR:Mandatory argument FIELDS is missing or not at the right position"
    assert cmd(r, "HEXPIRE", "h", 10, "NX", "XX", 1, "a") == \
        "ERR:Mandatory argument FIELDS is missing or not at the right position"
    assert cmd(r, "HEXPIRE", "h", 10, "FIELDS", 0, "a") == \
        "ERR:Parameter `numFields` should be greater than 0"
    assert cmd(r, "HEXPIRE", "h", 10, "FIELDS", "x", "a") == \
        "ERR:Parameter `numFields` should be greater than 0"
    assert cmd(r, "HEXPIRE", "h", 10, "FIELDS", 2, "a") == \
        "ERR:The `numfields` parameter must match the number of arguments"
    assert cmd(r, "HTTL", "h", "FIELDS", 0, "a") == \
        "ERR:Number of fields must be a positive integer"
    assert cmd(r, "HPERSIST", "h", "FIELDS", 3, "a") == \
        "ERR:The `numfields` parameter must match the number of arguments"
    assert cmd(r, "HEXPIRE", "h", 10, "FIELDS", 1) == \
        "ERR:wrong number of arguments for 'hexpire' command"
    assert cmd(r, "HTTL", "h", "FIELDS", 1) == "ERR:wrong number of arguments for 'httl' command"


def test_keyspace_events(srv: tuple[InProc, FakeClock], r: redis.Redis) -> None:
    clock = srv[1]
    r.config_set("notify-keyspace-events", "KEA")
    p = r.pubsub()
    p.psubscribe("__keyevent@0__:*")
    assert p.get_message(timeout=5)["type"] == "psubscribe"
    try:
        r.hset("h", mapping={"a": "1", "b": "2"})
        cmd(r, "HEXPIRE", "h", 10, "FIELDS", 1, "a")
        cmd(r, "HEXPIRE", "h", 10, "XX", "FIELDS", 1, "b")  # nothing set: no event
        cmd(r, "HPERSIST", "h", "FIELDS", 1, "a")
        cmd(r, "HPEXPIRE", "h", 100, "FIELDS", 2, "a", "b")
        clock.advance(100)
        r.hget("h", "a")
        r.hset("g", mapping={"a": "1", "b": "2"})
        cmd(r, "HPEXPIRE", "g", 0, "FIELDS", 1, "a")
        cmd(r, "HPEXPIRE", "g", 0, "FIELDS", 1, "b")
        events = []
        while len(events) < 10:
            m = p.get_message(timeout=5)
            assert m is not None, events
            events.append((m["channel"].decode().split(":")[1], m["data"].decode()))
        assert events == [
            ("hset", "h"), ("hexpire", "h"), ("hpersist", "h"), ("hexpire", "h"),
            ("hexpired", "h"), ("del", "h"), ("hset", "g"), ("hdel", "g"), ("hdel", "g"),
            ("del", "g"),
        ]
    finally:
        p.close()
        r.config_set("notify-keyspace-events", "")


def test_command_info_docs_and_lua(r: redis.Redis) -> None:
    conn = r.connection_pool.get_connection()
    try:  # raw replies: redis-py's COMMAND parser wants a COMMAND (no INFO) reply
        conn.send_command("COMMAND", "INFO", "hexpire", "httl", "hpersist")
        hexpire, httl, hpersist = conn.read_response()
        conn.send_command("COMMAND", "DOCS", "hpexpire")
        docs = conn.read_response()
    finally:
        r.connection_pool.release(conn)
    assert hexpire[1] == -6 and b"write" in hexpire[2] and b"@hash" in hexpire[6]
    assert "[b'RW', b'update']" in str(hexpire[8])
    assert httl[1] == -5 and b"readonly" in httl[2] and "[b'RO', b'access']" in str(httl[8])
    assert hpersist[1] == -5 and b"@write" in hpersist[6]
    doc = docs[b"hpexpire"] if isinstance(docs, dict) else docs[1]
    doc = doc if isinstance(doc, dict) else dict(zip(doc[::2], doc[1::2], strict=True))
    assert doc[b"since"] == b"7.4.0" and doc[b"group"] == b"hash"
    r.hset("h", "a", "1")
    assert r.eval("return redis.call('HPEXPIRE', KEYS[1], 5000, 'FIELDS', 1, 'a')", 1, "h") \
        == [1]
    assert r.eval("return redis.call('HPTTL', KEYS[1], 'FIELDS', 1, 'a')", 1, "h") == [5000]
