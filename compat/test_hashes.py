"""Hashes (issue 35), differential against redis-server 7.0: replies and errors byte for byte,
RESP2 and RESP3 (compat/harness.py). A listpack hash answers in insertion order on both
servers, so its replies compare exactly; a hashtable's order is each server's own, so those
compare as sets, and so do HSCAN's pages of a big hash. HRANDFIELD's random picks compare by
their properties (distinct or not, how many, from the hash, the reply's shape)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import redis
from compat_harness import S  # type: ignore[import-not-found]

PROTOS = pytest.mark.parametrize("proto", [2, 3])


@pytest.fixture
def limits(targets: list[Any]) -> Iterator[None]:
    """hash-max-listpack-entries/-value back to Redis 7's defaults after the test."""
    yield
    for t in targets:
        r = redis.Redis(port=t.port)
        r.config_set("hash-max-listpack-entries", 512)
        r.config_set("hash-max-listpack-value", 64)
        r.close()


@PROTOS
def test_set_get_delete_and_counts(differ: Any, key: str, proto: int) -> None:
    k, m = key + ":h", key + ":missing"
    differ.check([
        S("DEL", k, m), S("HSET", k, "f1", "v1", "f2", "v2"), S("HSET", k, "f1", "x", "f3", "a", "f3", "b"),
        S("HGET", k, "f1"), S("HGET", k, "nope"), S("HGET", m, "f"), S("HMGET", k, "f1", "nope", "f3"),
        S("HMGET", m, "a", "b"), S("HGETALL", k), S("HGETALL", m), S("HKEYS", k), S("HVALS", k),
        S("HKEYS", m), S("HVALS", m), S("HLEN", k), S("HLEN", m), S("HEXISTS", k, "f1"),
        S("HEXISTS", k, "nope"), S("HEXISTS", m, "f"), S("HSTRLEN", k, "f1"), S("HSTRLEN", k, "nope"),
        S("HSTRLEN", m, "f"), S("HSETNX", k, "f1", "z"), S("HSETNX", k, "f4", "z"), S("HSETNX", m, "f", "v"),
        S("HMSET", k, "f5", "v5", "f6", ""), S("HGETALL", k), S("HMSET", k, "f5"), S("HMSET", k, "a", "b", "c"),
        S("HSET", k, "f5"), S("HSET", k, "a", "b", "c"), S("HSET", k), S("HGET", k), S("HMGET", k),
        S("HDEL", k, "f1", "f1", "nope"), S("HDEL", k), S("HDEL", m, "f"), S("TYPE", k),
        S("OBJECT", "ENCODING", k), S("HGETALL", k), S("HDEL", m, "f"), S("EXISTS", m),
        S("HDEL", k, "f2", "f3", "f4", "f5", "f6"), S("EXISTS", k), S("HLEN", k), S("HGETALL", k),
        S("HSET", k, "", ""), S("HGETALL", k), S("HSTRLEN", k, ""), S("HSET", k, "\x00b", "\xff"),
        S("HGETALL", k), S("HSETNX", k), S("HSTRLEN", k), S("HEXISTS", k), S("HLEN", k, "x"),
    ], proto)


@PROTOS
def test_increments(differ: Any, key: str, proto: int) -> None:
    k, m = key + ":h", key + ":m"
    differ.check([
        S("DEL", k, m), S("HINCRBY", k, "n", "5"), S("HINCRBY", k, "n", "-10"), S("HINCRBY", k, "n", "x"),
        S("HINCRBY", k, "n", "1.5"), S("HINCRBY", k, "n", " 1"),
        S("HSET", k, "s", "abc", "big", "9223372036854775807", "sp", " 1", "z", "01", "small", "-9223372036854775808"),
        S("HINCRBY", k, "s", "1"), S("HINCRBY", k, "big", "1"), S("HINCRBY", k, "big", "-1"),
        S("HINCRBY", k, "sp", "1"), S("HINCRBY", k, "z", "1"), S("HINCRBY", k, "small", "-1"),
        S("HINCRBY", k, "neg", "-9223372036854775808"), S("HINCRBY", k, "neg", "-1"), S("HINCRBY", m, "f", "x"),
        S("EXISTS", m), S("HINCRBYFLOAT", k, "fl", "0.1"), S("HINCRBYFLOAT", k, "fl", "0.2"),
        S("HINCRBYFLOAT", k, "fl", "1.5e3"), S("HINCRBYFLOAT", k, "fl", "abc"), S("HINCRBYFLOAT", k, "fl", "inf"),
        S("HINCRBYFLOAT", k, "fl", "-inf"), S("HINCRBYFLOAT", k, "fl", "nan"), S("HINCRBYFLOAT", k, "fl", "1e5000"),
        S("HINCRBYFLOAT", k, "fl", ""), S("HINCRBYFLOAT", k, "s", "1"), S("HINCRBYFLOAT", k, "sp", "1"),
        S("HINCRBYFLOAT", k, "n", "1.5"), S("HINCRBYFLOAT", k, "new", "10.5e1"), S("HINCRBYFLOAT", k, "z", "1"),
        S("HINCRBYFLOAT", k, "h", "0x10"), S("HINCRBYFLOAT", k, "big", "1"), S("HSET", k, "huge", "1e4932"),
        S("HINCRBYFLOAT", k, "huge", "1e4932"), S("HINCRBYFLOAT", k, "tiny", "1e-20"),
        S("HINCRBYFLOAT", m, "f", "1e5000"), S("EXISTS", m), S("HGETALL", k), S("HINCRBY", k, "f"),
        S("HINCRBYFLOAT", k, "f"), S("HINCRBY", k, "f", "1", "2"),
    ], proto)


@PROTOS
def test_wrongtype_both_ways_and_generic_commands(differ: Any, key: str, proto: int) -> None:
    s, h, ls = key + ":s", key + ":h", key + ":l"
    differ.check([
        S("DEL", s, h, ls, h + "c", h + "r"), S("SET", s, "v"), S("HSET", s, "f", "v"), S("HMSET", s, "f", "v"),
        S("HSETNX", s, "f", "v"), S("HGET", s, "f"), S("HMGET", s, "f"), S("HGETALL", s), S("HKEYS", s),
        S("HVALS", s), S("HLEN", s), S("HEXISTS", s, "f"), S("HSTRLEN", s, "f"), S("HDEL", s, "f"),
        S("HINCRBY", s, "f", "1"), S("HINCRBYFLOAT", s, "f", "1"), S("HRANDFIELD", s),
        S("HRANDFIELD", s, "0"), S("HRANDFIELD", s, "2", "WITHVALUES"), S("HSCAN", s, "0"),
        S("RPUSH", ls, "a"), S("HSET", ls, "f", "v"), S("HGET", ls, "f"), S("GET", s),
        S("HSET", h, "f", "v", "g", "w"), S("GET", h), S("INCR", h), S("APPEND", h, "x"), S("STRLEN", h),
        S("LPUSH", h, "x"), S("LRANGE", h, "0", "-1"), S("XADD", h, "*", "f", "v"), S("TYPE", h),
        S("EXISTS", h), S("EXPIRE", h, "100"), S("TTL", h), S("PERSIST", h), S("TTL", h),
        S("COPY", h, h + "c"), S("HGETALL", h + "c"), S("RENAME", h + "c", h + "r"), S("HGETALL", h + "r"),
        S("EXISTS", h + "c"), S("SCAN", "0", "MATCH", h + "?", "COUNT", "1000", "TYPE", "hash", mask=[[0]]),
        S("SET", h + "r", "now a string"), S("TYPE", h + "r"), S("DEL", h), S("EXISTS", h),
        S("HGET", h, "f"),
    ], proto)


@PROTOS
def test_encodings_follow_the_listpack_limits(differ: Any, key: str, proto: int, limits: None) -> None:
    e, v, f, i, n, u, d = (key + ":" + c for c in "evfinud")
    differ.check([
        S("CONFIG", "SET", "hash-max-listpack-entries", "4"), S("CONFIG", "SET", "hash-max-listpack-value", "8"),
        S("CONFIG", "GET", "hash-max-listpack-entries"), S("CONFIG", "GET", "hash-max-ziplist-value"),
        S("DEL", e, v, f, i, n, u, d, d + "c", d + "r"), S("HSET", e, "a", "1", "b", "2", "c", "3", "d", "4"),
        S("OBJECT", "ENCODING", e), S("HGETALL", e), S("HSET", e, "a", "x"), S("OBJECT", "ENCODING", e),
        S("HSET", e, "e", "5"), S("OBJECT", "ENCODING", e), S("HLEN", e),
        S("HSET", v, "a", "12345678"), S("OBJECT", "ENCODING", v), S("HSET", v, "b", "123456789"),
        S("OBJECT", "ENCODING", v), S("HSET", f, "123456789", "x"), S("OBJECT", "ENCODING", f),
        S("HSET", i, "a", "1"), S("HINCRBYFLOAT", i, "a", "0.5"), S("OBJECT", "ENCODING", i),
        S("HINCRBYFLOAT", i, "a", "0.123456789"), S("OBJECT", "ENCODING", i),
        S("HSETNX", n, "a", "123456789"), S("OBJECT", "ENCODING", n),
        S("HSET", u, "a", "1", "b", "2", "c", "3"), S("CONFIG", "SET", "hash-max-listpack-entries", "2"),
        S("OBJECT", "ENCODING", u), S("HDEL", u, "nope"), S("OBJECT", "ENCODING", u), S("HSET", u, "a", "3"),
        S("OBJECT", "ENCODING", u), S("CONFIG", "SET", "hash-max-listpack-entries", "4"),
        S("HSET", d, "a", "1", "b", "2", "c", "3", "d", "4", "e", "5"), S("HDEL", d, "a", "b", "c", "d"),
        S("OBJECT", "ENCODING", d), S("HGETALL", d), S("COPY", d, d + "c"), S("OBJECT", "ENCODING", d + "c"),
        S("RENAME", d + "c", d + "r"), S("OBJECT", "ENCODING", d + "r"), S("HSCAN", e, "0", "COUNT", "100", mask=[[1]]),
        S("CONFIG", "SET", "hash-max-listpack-entries", "x"), S("CONFIG", "SET", "hash-max-listpack-entries", "-1"),
        S("CONFIG", "SET", "hash-max-ziplist-entries", "1.5"), S("CONFIG", "SET", "hash-max-listpack-value", "-1"),
        S("CONFIG", "SET", "hash-max-listpack-value", "x"), S("CONFIG", "SET", "hash-max-listpack-value", "1k"),
        S("CONFIG", "GET", "hash-max-listpack-value"), S("CONFIG", "SET", "hash-max-ziplist-entries", "99999999999"),
        S("CONFIG", "GET", "hash-max-listpack-entries"), S("HSET", v, "c", "3"), S("HLEN", v),
    ], proto)


@PROTOS
def test_hscan_of_a_listpack_and_its_errors(differ: Any, key: str, proto: int) -> None:
    k, s = key + ":h", key + ":s"
    differ.check([
        S("DEL", k, s), S("HSET", k, "f1", "a", "f2", "b", "g1", "c"), S("SET", s, "v"),
        S("HSCAN", k, "0"), S("HSCAN", k, "12345"), S("HSCAN", k, "0", "COUNT", "1"),
        S("HSCAN", k, "0", "MATCH", "f*"), S("HSCAN", k, "0", "match", "*1", "count", "5"),
        S("HSCAN", k, "0", "MATCH", "*"), S("HSCAN", k, "0", "MATCH", "zz*"), S("HSCAN", k, "-1"),
        S("HSCAN", k, "+3"), S("HSCAN", k, "18446744073709551615"), S("HSCAN", k, "18446744073709551616"),
        S("HSCAN", k, "x"), S("HSCAN", k, " 1"), S("HSCAN", k, "-"), S("HSCAN", k, "0x1"),
        S("HSCAN", k, "0", "COUNT", "0"), S("HSCAN", k, "0", "COUNT", "x"), S("HSCAN", k, "0", "COUNT"),
        S("HSCAN", k, "0", "MATCH"), S("HSCAN", k, "0", "TYPE", "string"), S("HSCAN", k, "0", "NOVALUES"),
        S("HSCAN", key + ":missing", "0", "BOGUS"), S("HSCAN", key + ":missing", "x"),
        S("HSCAN", s, "0"), S("HSCAN", s, "x"), S("HSCAN", k),
    ], proto)


@PROTOS
def test_hrandfield_replies_and_errors(differ: Any, key: str, proto: int) -> None:
    """The deterministic cases: a count reaching the hash's length answers the whole hash in
    its (listpack) order; the errors in Redis's order."""
    k, s, m = key + ":h", key + ":s", key + ":m"
    differ.check([
        S("DEL", k, s, m), S("HSET", k, "a", "1", "b", "2", "c", "3"), S("SET", s, "v"),
        S("HRANDFIELD", m), S("HRANDFIELD", m, "5"), S("HRANDFIELD", m, "-5", "WITHVALUES"),
        S("HRANDFIELD", k, "0"), S("HRANDFIELD", k, "0", "WITHVALUES"), S("HRANDFIELD", k, "3"),
        S("HRANDFIELD", k, "100", "WITHVALUES"), S("HRANDFIELD", k, "x"), S("HRANDFIELD", k, "1", "WITHVALUES", "x"),
        S("HRANDFIELD", k, "1", "NOVALUES"), S("HRANDFIELD", k, "-9223372036854775808"),
        S("HRANDFIELD", k, "4611686018427387904", "WITHVALUES"), S("HRANDFIELD", k, "-4611686018427387904", "WITHVALUES"),
        S("HRANDFIELD", m, "x"), S("HRANDFIELD", s, "x"), S("HRANDFIELD", s, "0"), S("HRANDFIELD", m, "0"),
        S("HSET", k + "1", "only", "one"), S("HRANDFIELD", k + "1"), S("HRANDFIELD", k + "1", "-3"),
        S("HRANDFIELD", k + "1", "-2", "WITHVALUES"), S("HRANDFIELD", k + "1", "1", "WITHVALUES"),
    ], proto)


def _flat(tree: Any, withvalues: bool, proto: int) -> list[tuple[bytes, bytes | None]]:
    """A HRANDFIELD reply tree as (field, value) pairs, checking its RESP shape."""
    assert tree[0] == "*", tree
    items = tree[1]
    if not withvalues:
        return [(t[1], None) for t in items]
    if proto == 3:
        assert all(t[0] == "*" and len(t[1]) == 2 for t in items), tree
        return [(t[1][0][1], t[1][1][1]) for t in items]
    assert len(items) % 2 == 0
    return [(items[j][1], items[j + 1][1]) for j in range(0, len(items), 2)]


@PROTOS
@pytest.mark.parametrize("size", [5, 600])  # listpack and hashtable
def test_hrandfield_random_picks_by_property(targets: list[Any], key: str, proto: int,
                                             size: int) -> None:
    k = f"{key}:h"
    want = {f"f{j}".encode(): f"v{j}".encode() for j in range(size)}
    for t in targets:
        conn = t.conn(proto)
        try:
            conn.call("DEL", k)
            conn.call("HSET", k, *[x for kv in want.items() for x in kv])
            one = conn.call("HRANDFIELD", k)
            assert one[0] == "$" and one[1] in want, (t.name, one)
            for count, withvalues in [(3, False), (3, True), (-8, False), (-8, True), (1, True),
                                      (size - 1, True), (size, False), (-(size * 2), True)]:
                args = ["HRANDFIELD", k, str(count)] + (["WITHVALUES"] if withvalues else [])
                got = _flat(conn.call(*args), withvalues, proto)
                fields = [f for f, _ in got]
                assert len(got) == (min(count, size) if count > 0 else -count), (t.name, args)
                assert set(fields) <= set(want), (t.name, args)
                if count > 0:
                    assert len(set(fields)) == len(fields), (t.name, args)  # distinct
                if withvalues:
                    assert all(want[f] == v for f, v in got), (t.name, args)
            enc = conn.call("OBJECT", "ENCODING", k)[1]
            assert enc == (b"listpack" if size <= 512 else b"hashtable"), (t.name, enc)
        finally:
            conn.call("DEL", k)
            conn.close()


def test_big_hashes_compare_as_sets_and_hscan_pages(targets: list[Any], key: str) -> None:
    """A hashtable hash: HGETALL/HKEYS/HVALS as sets; a full HSCAN with a small COUNT returns
    every field exactly as HGETALL (a page never repeats a field here: nothing changes during
    the scan), with MATCH too; OBJECT ENCODING and MEMORY USAGE's presence on both."""
    k = key + ":big"
    want = {f"field:{j}".encode(): f"value-{j}".encode() for j in range(1500)}
    seen = []
    for t in targets:
        r = redis.Redis(port=t.port)
        try:
            r.delete(k)
            r.hset(k, mapping=want)  # type: ignore[arg-type]
            assert r.object("encoding", k) == b"hashtable"
            assert r.hgetall(k) == want and set(r.hkeys(k)) == set(want)
            assert sorted(r.hvals(k)) == sorted(want.values()) and r.hlen(k) == 1500
            cursor, got, pages = 0, [], 0
            while True:
                cursor, page = r.hscan(k, cursor, count=20)
                got += list(page.items())
                pages += 1
                if cursor == 0:
                    break
            assert dict(got) == want and len(got) == len(want) and pages > 10, t.name
            matched = dict(r.hscan_iter(k, match="field:1?", count=50))
            assert matched == {f: v for f, v in want.items() if len(f) == 8 and f.startswith(b"field:1")}
            seen.append(sorted(got))
        finally:
            r.delete(k)
            r.close()
    assert all(s == seen[0] for s in seen)


def test_hscan_returns_every_field_present_throughout(targets: list[Any], key: str) -> None:
    """SCAN's guarantee under changes: fields added and deleted between pages come or go,
    every field present for the whole scan is returned (both servers)."""
    k = key + ":moving"
    for t in targets:
        r = redis.Redis(port=t.port)
        try:
            r.delete(k)
            r.hset(k, mapping={f"stay{j}": "x" for j in range(800)})
            r.hset(k, mapping={f"go{j}": "y" for j in range(400)})
            cursor, got, n = 0, set(), 0
            while True:
                cursor, page = r.hscan(k, cursor, count=25)
                got |= set(page)
                r.hdel(k, f"go{n}", f"go{n + 200}")
                r.hset(k, f"new{n}", "z")
                n += 1
                if cursor == 0:
                    break
            assert {f"stay{j}".encode() for j in range(800)} <= got, t.name
        finally:
            r.delete(k)
            r.close()


def test_keyspace_hits_and_misses_of_hash_reads(targets: list[Any], key: str) -> None:
    """INFO keyspace_hits / keyspace_misses count the hash reads as Redis's lookupKeyRead
    (a key of another kind is a hit); HSET, HINCRBY and HDEL count nothing."""
    seen = []
    for t in targets:
        r = redis.Redis(port=t.port)
        try:
            r.delete(key, key + "s")
            r.set(key + "s", "v")
            r.config_resetstat()
            r.hset(key, "f", "v")
            r.hincrby(key, "n", 1)
            r.hdel(key, "nope")
            for cmd in (("HGET", key, "f"), ("HGET", key + "x", "f"), ("HMGET", key, "f", "g"),
                        ("HGETALL", key + "x"), ("HLEN", key), ("HEXISTS", key + "x", "f"),
                        ("HKEYS", key), ("HVALS", key + "x"), ("HSTRLEN", key, "f"),
                        ("HRANDFIELD", key), ("HRANDFIELD", key + "x", "2"), ("HSCAN", key, "0"),
                        ("HSCAN", key + "x", "0"), ("HSCAN", key, "x"), ("HGET", key + "s", "f")):
                try:
                    r.execute_command(*cmd)
                except redis.ResponseError:
                    pass
            st = r.info("stats")
            seen.append((st["keyspace_hits"], st["keyspace_misses"]))
        finally:
            r.delete(key, key + "s")
            r.close()
    assert seen[-1] == seen[0] == (8, 6)


def test_acl_hash_category(targets: list[Any]) -> None:
    """`COMMAND LIST FILTERBY ACLCAT hash` names the same commands on both servers, and
    topicsrv the 7.4 field-expiry ones as well (redis-server 7.0 has not them)."""
    got = []
    for t in targets:
        r = redis.Redis(port=t.port, decode_responses=True)
        r.response_callbacks.pop("COMMAND", None)
        got.append(set(r.execute_command("COMMAND", "LIST", "FILTERBY", "ACLCAT", "hash")))
        r.close()
    field_expiry = {"hexpire", "hpexpire", "hexpireat", "hpexpireat", "httl", "hpttl",
                    "hexpiretime", "hpexpiretime", "hpersist"}
    assert got[-1] ^ got[0] == field_expiry and "hscan" in got[0] and len(got[0] & got[1]) == 16
