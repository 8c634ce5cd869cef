"""Sets (issue 36), differential against redis-server 7.0: replies and errors byte for byte,
RESP2 and RESP3 (compat/harness.py). An intset answers in ascending order on both servers, so
its replies compare exactly; a hashtable's order is each server's own, so the scripts over
sets of other members compare each reply with its arrays of members sorted (`unordered`).
SPOP's and SRANDMEMBER's random picks compare by their properties (how many, distinct or
not, from the set, the reply's shape)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import redis
from compat_harness import S, run_script, show  # type: ignore[import-not-found]

PROTOS = pytest.mark.parametrize("proto", [2, 3])


def _sorted(tree: Any) -> Any:
    """Arrays and sets of bulk strings in sorted order, recursively (a hashtable's order)."""
    kind = tree[0]
    if kind in "*~":
        items = [_sorted(t) for t in tree[1]]
        if items and all(t[0] == "$" for t in items):
            items = sorted(items, key=lambda t: t[1])
        return (kind, items)
    return tree


def unordered(targets: list[Any], steps: list[Any], proto: int) -> None:
    """Both servers' replies, members' order aside, are the same (typed trees)."""
    got = [[_sorted(t) for t in run_script(t, steps, proto)] for t in targets]
    if len(got) < 2:
        return
    bad = [f"{' '.join(st.args)}\n    redis:    {show(w)}\n    topicsrv: {show(g)}"
           for st, w, g in zip(steps, got[0], got[1], strict=True) if w != g]
    assert not bad, f"RESP{proto} replies differ:\n" + "\n".join(bad)


@pytest.fixture
def limits(targets: list[Any]) -> Iterator[None]:
    """set-max-intset-entries back to Redis 7.0's default after the test."""
    yield
    for t in targets:
        r = redis.Redis(port=t.port)
        r.config_set("set-max-intset-entries", 512)
        r.close()


@PROTOS
def test_intset_commands_exactly(differ: Any, key: str, proto: int) -> None:
    k, o, m = key + ":a", key + ":b", key + ":missing"
    differ.check([
        S("DEL", k, o, m), S("SADD", k, "3", "1", "2", "2", "-7", "100"), S("SADD", k, "1"),
        S("SMEMBERS", k), S("SCARD", k), S("TYPE", k), S("OBJECT", "ENCODING", k),
        S("SISMEMBER", k, "2"), S("SISMEMBER", k, "02"), S("SISMEMBER", k, "x"), S("SISMEMBER", m, "1"),
        S("SMISMEMBER", k, "1", "5", "-7", "+1"), S("SMISMEMBER", m, "1", "2"), S("SMEMBERS", m),
        S("SCARD", m), S("SREM", k, "1", "1", "9"), S("SREM", m, "1"), S("SMEMBERS", k),
        S("SADD", o, "2", "3", "4", "9223372036854775807", "-9223372036854775808"),
        S("SMEMBERS", o), S("OBJECT", "ENCODING", o),
        S("SINTER", k, o), S("SINTER", k, m), S("SINTER", m, k), S("SINTER", k),
        S("SUNION", k, o), S("SUNION", k, m), S("SUNION", m), S("SDIFF", k, o), S("SDIFF", o, k),
        S("SDIFF", k, m), S("SDIFF", m, k), S("SDIFF", k, k), S("SINTERCARD", "2", k, o),
        S("SINTERCARD", "2", k, o, "LIMIT", "1"), S("SINTERCARD", "2", k, o, "limit", "0"),
        S("SINTERCARD", "1", m), S("SINTERSTORE", key + ":d", k, o), S("SMEMBERS", key + ":d"),
        S("OBJECT", "ENCODING", key + ":d"), S("SUNIONSTORE", key + ":d", k, o),
        S("SMEMBERS", key + ":d"), S("SDIFFSTORE", key + ":d", o, k), S("SMEMBERS", key + ":d"),
        S("SINTERSTORE", key + ":d", k, m), S("EXISTS", key + ":d"), S("SINTERSTORE", key + ":d", m),
        S("SUNIONSTORE", key + ":d", m), S("SDIFFSTORE", key + ":d", m, k),
        S("SMOVE", k, o, "3"), S("SMOVE", k, o, "100"), S("SMOVE", k, o, "nope"), S("SMOVE", m, o, "2"),
        S("SMOVE", o, o, "2"), S("SMOVE", o, o, "77"), S("SMEMBERS", k), S("SMEMBERS", o),
        S("SMOVE", k, key + ":new", "-7"), S("SMEMBERS", key + ":new"), S("SSCAN", k, "0"),
        S("SSCAN", o, "0", "MATCH", "*9*"), S("SSCAN", o, "0", "COUNT", "1"), S("SSCAN", m, "0"),
        S("SREM", k, "2", "100", "-7"), S("EXISTS", k), S("SPOP", m), S("SPOP", m, "2"),
        S("SRANDMEMBER", m), S("SRANDMEMBER", m, "3"), S("SRANDMEMBER", m, "-3"),
        S("SADD", k, "5"), S("SPOP", k), S("EXISTS", k), S("SADD", k, "5", "6"), S("SPOP", k, "0"),
        S("SPOP", k, "10"), S("EXISTS", k), S("SADD", k, "8"), S("SRANDMEMBER", k), S("SRANDMEMBER", k, "5"),
        S("SRANDMEMBER", k, "-2"), S("SRANDMEMBER", k, "0"), S("DEL", k, o, key + ":d", key + ":new"),
    ], proto)


@PROTOS
def test_errors_and_arity(differ: Any, key: str, proto: int) -> None:
    k, s = key + ":a", key + ":str"
    differ.check([
        S("DEL", k, s), S("SADD", k, "1", "2"), S("SET", s, "v"), S("SADD", k), S("SREM", k),
        S("SMEMBERS"), S("SMEMBERS", k, k), S("SISMEMBER", k), S("SMISMEMBER", k), S("SCARD"),
        S("SPOP"), S("SPOP", k, "1", "2"), S("SPOP", k, "-1"), S("SPOP", k, "x"), S("SPOP", k, "1.5"),
        S("SRANDMEMBER"), S("SRANDMEMBER", k, "1", "2"), S("SRANDMEMBER", k, "x"),
        S("SRANDMEMBER", k, "-9223372036854775808"), S("SRANDMEMBER", k, "9223372036854775808"),
        S("SMOVE", k, k), S("SINTER"), S("SUNION"), S("SDIFF"), S("SINTERSTORE", k), S("SUNIONSTORE", k),
        S("SDIFFSTORE", k), S("SINTERCARD", "1"), S("SINTERCARD", "0", k), S("SINTERCARD", "-1", k),
        S("SINTERCARD", "x", k), S("SINTERCARD", "3", k, k), S("SINTERCARD", "1", k, "LIMIT"),
        S("SINTERCARD", "1", k, "LIMIT", "-1"), S("SINTERCARD", "1", k, "LIMIT", "x"),
        S("SINTERCARD", "1", k, "FOO", "1"), S("SINTERCARD", "1", k, k),
        S("SSCAN", k), S("SSCAN", k, "x"), S("SSCAN", k, "0", "COUNT", "0"), S("SSCAN", k, "0", "COUNT"),
        S("SSCAN", k, "0", "TYPE", "set"), S("SSCAN", k, "0", "MATCH"), S("SSCAN", key + ":m", "0", "BAD"),
        S("SSCAN", k, "-1"), S("SSCAN", k, "18446744073709551616"),
        # WRONGTYPE both ways, every command
        S("SADD", s, "1"), S("SREM", s, "1"), S("SMEMBERS", s), S("SISMEMBER", s, "1"),
        S("SMISMEMBER", s, "1"), S("SCARD", s), S("SPOP", s), S("SPOP", s, "0"), S("SRANDMEMBER", s),
        S("SRANDMEMBER", s, "0"), S("SMOVE", s, k, "1"), S("SMOVE", k, s, "1"), S("SMOVE", k, s, "9"),
        S("SMOVE", key + ":m", s, "1"), S("SINTER", k, s), S("SINTER", key + ":m", s),
        S("SUNION", k, s), S("SDIFF", key + ":m", s), S("SINTERCARD", "2", k, s),
        S("SINTERSTORE", key + ":d", k, s), S("SUNIONSTORE", key + ":d", s), S("SDIFFSTORE", key + ":d", s),
        S("SSCAN", s, "0"), S("GET", k), S("LPUSH", k, "x"), S("HSET", k, "f", "v"), S("INCR", k),
        S("SINTERSTORE", s, k, k), S("TYPE", s), S("SMEMBERS", s), S("DEL", k, s),
    ], proto)


@PROTOS
def test_hashtable_sets_compare_unordered(targets: list[Any], key: str, proto: int) -> None:
    a, b, c, m = key + ":a", key + ":b", key + ":c", key + ":missing"
    d = key + ":d"
    unordered(targets, [S(*x) for x in [
        ("DEL", a, b, c, d), ("SADD", a, "x", "y", "z", "1", "2", ""), ("SADD", b, "y", "z", "w", "2"),
        ("SADD", c, "z", "q"), ("SMEMBERS", a), ("OBJECT", "ENCODING", a), ("SCARD", a),
        ("SISMEMBER", a, ""), ("SMISMEMBER", a, "x", "q", ""), ("SINTER", a, b), ("SINTER", a, b, c),
        ("SUNION", a, b, c), ("SDIFF", a, b), ("SDIFF", a, b, c), ("SDIFF", b, a),
        ("SINTERCARD", "3", a, b, c), ("SINTERCARD", "2", a, b, "LIMIT", "2"),
        ("SINTERSTORE", d, a, b), ("SMEMBERS", d), ("OBJECT", "ENCODING", d),
        ("SDIFFSTORE", d, a, b), ("SMEMBERS", d), ("OBJECT", "ENCODING", d),
        ("SUNIONSTORE", d, b, c), ("SMEMBERS", d), ("SADD", key + ":i", "1", "2", "3"),
        ("SDIFFSTORE", d, key + ":i", c), ("OBJECT", "ENCODING", d), ("SMEMBERS", d),
        ("SINTERSTORE", d, key + ":i", a), ("OBJECT", "ENCODING", d), ("SMEMBERS", d),
        ("SADD", key + ":i", "x"), ("OBJECT", "ENCODING", key + ":i"), ("SREM", key + ":i", "x"),
        ("OBJECT", "ENCODING", key + ":i"), ("SMEMBERS", key + ":i"),
        ("SMOVE", a, b, "x"), ("SMOVE", a, b, "y"), ("SMEMBERS", a), ("SMEMBERS", b),
        ("SMOVE", c, m, "q"), ("SMEMBERS", m), ("SSCAN", a, "0"), ("SSCAN", a, "0", "MATCH", "?"),
        ("SREM", a, "z", "1", "2", "", "nope"), ("EXISTS", a), ("SPOP", c), ("EXISTS", c),
        ("SADD", a, "\x00\xff", "a" * 100), ("SISMEMBER", a, "a" * 100), ("SMEMBERS", a),
        ("SINTER", a, m), ("SUNIONSTORE", d, m), ("EXISTS", d),
        ("DEL", a, b, c, d, m, key + ":i"),
    ]], proto)


def test_encodings_follow_the_intset_limit(differ: Any, key: str, limits: None) -> None:
    k, big = key + ":s", key + ":big"
    many = [str(i) for i in range(513)]
    differ.check([
        S("DEL", k, big), S("SADD", big, *many[:512]), S("OBJECT", "ENCODING", big),
        S("SADD", big, "512"), S("OBJECT", "ENCODING", big), S("SREM", big, *many[1:]),
        S("OBJECT", "ENCODING", big), S("SMEMBERS", big), S("CONFIG", "SET", "set-max-intset-entries", "3"),
        S("SADD", k, "1", "2", "3"), S("OBJECT", "ENCODING", k), S("SADD", k, "4"),
        S("OBJECT", "ENCODING", k), S("SINTERSTORE", key + ":d", k, k), S("OBJECT", "ENCODING", key + ":d"),
        S("CONFIG", "SET", "set-max-intset-entries", "512"), S("SADD", key + ":e", "1", "2", "3", "4"),
        S("OBJECT", "ENCODING", key + ":e"), S("COPY", k, key + ":c"), S("OBJECT", "ENCODING", key + ":c"),
        S("RENAME", key + ":e", key + ":r"), S("OBJECT", "ENCODING", key + ":r"),
        S("CONFIG", "GET", "set-max-intset-entries"),
        S("DEL", k, big, key + ":d", key + ":e", key + ":c", key + ":r"),
    ])


def test_generic_key_commands_on_sets(differ: Any, key: str) -> None:
    k, k2 = key + ":s", key + ":t"
    differ.check([
        S("DEL", k, k2), S("SADD", k, "1", "2"), S("EXPIRE", k, "100"), S("TTL", k), S("SADD", k, "3"),
        S("TTL", k), S("SREM", k, "1"), S("TTL", k), S("SINTERSTORE", k, k), S("TTL", k),
        S("EXPIRE", k, "100"), S("RENAME", k, k2), S("TTL", k2), S("SMEMBERS", k2), S("EXISTS", k),
        S("COPY", k2, k), S("SMEMBERS", k), S("TTL", k), S("PERSIST", k), S("TTL", k), S("TYPE", k),
        S("SCAN", "0", "TYPE", "set", "MATCH", k, "COUNT", "1000"), S("SCAN", "0", "TYPE", "string", "MATCH", k, "COUNT", "1000"),
        S("PEXPIRE", k, "1"), S("SLEEP", "0.01"), S("EXISTS", k), S("SMEMBERS", k), S("SCARD", k),
        S("SADD", k, "9"), S("TTL", k), S("DEL", k2), S("UNLINK", k), S("EXISTS", k, k2),
    ])


@PROTOS
def test_watch_multi_and_scripts(differ: Any, key: str, proto: int) -> None:
    """WATCH sees any change of a set (EXEC aborts), MULTI queues set commands, a script calls
    them (an intset's members sorted through Lua too, RESP3 sets as Lua tables)."""
    k, s = key + ":s", key + ":str"
    differ.check([
        S("DEL", k, s), S("SADD", k, "3", "1"), S("WATCH", k), S("SADD", k, "2"), S("MULTI"),
        S("SCARD", k), S("EXEC"), S("WATCH", k), S("SISMEMBER", k, "2"), S("MULTI"), S("SADD", k, "4"),
        S("SMEMBERS", k), S("SPOP", k, "0"), S("SINTERSTORE", k + "d", k), S("EXEC"),
        S("WATCH", k + "d"), S("SREM", k + "d", "1", "2", "3", "4"), S("MULTI"), S("PING"), S("EXEC"),
        S("SET", s, "v"), S("MULTI"), S("SADD", s, "1"), S("SADD", k, "5"), S("EXEC"),
        S("EVAL", "return redis.call('SMEMBERS', KEYS[1])", "1", k),
        S("EVAL", "redis.call('SADD', KEYS[1], 'x', 'y'); return redis.call('SCARD', KEYS[1])", "1", k),
        S("EVAL", "return redis.call('SMISMEMBER', KEYS[1], 'x', 'q')", "1", k),
        S("EVAL", "return redis.pcall('SADD', KEYS[1], 'x')", "1", s),
        S("EVAL", "return redis.call('SINTERCARD', 1, KEYS[1])", "1", k),
        S("COMMAND", "GETKEYS", "SINTERCARD", "2", "a", "b", "LIMIT", "1"),
        S("COMMAND", "GETKEYS", "SUNIONSTORE", "d", "a", "b"), S("COMMAND", "GETKEYS", "SMOVE", "a", "b", "m"),
        S("COMMAND", "GETKEYSANDFLAGS", "SDIFFSTORE", "d", "a", "b"),
        S("COMMAND", "GETKEYSANDFLAGS", "SINTERCARD", "1", "a"),
        S("DEL", k, k + "d", s),
    ], proto)


def _members(tree: Any, proto: int, kind: str) -> list[bytes]:
    assert tree[0] == (kind if proto == 3 else "*"), tree
    assert all(t[0] == "$" for t in tree[1]), tree
    return [t[1] for t in tree[1]]


@PROTOS
@pytest.mark.parametrize("size", [5, 40, 600])  # intset, small hashtable, big hashtable
@pytest.mark.parametrize("ints", [True, False])
def test_random_picks_by_property(targets: list[Any], key: str, proto: int, size: int,
                                  ints: bool) -> None:
    """SRANDMEMBER's and SPOP's counts: how many, distinct or not, from the set, the shape
    (SRANDMEMBER an array, SPOP with a count a set), the whole set once the count reaches it."""
    k = f"{key}:s"
    want = [str(j).encode() if ints else f"m{j}".encode() for j in range(size)]
    for t in targets:
        conn = t.conn(proto)
        try:
            conn.call("DEL", k)
            conn.call("SADD", k, *want)
            one = conn.call("SRANDMEMBER", k)
            assert one[0] == "$" and one[1] in want, (t.name, one)
            for count in [1, 3, size // 2, size - 1, size, size + 5, -1, -3, -(size * 2)]:
                got = _members(conn.call("SRANDMEMBER", k, str(count)), proto, "*")
                assert len(got) == (min(count, size) if count > 0 else -count), (t.name, count)
                assert set(got) <= set(want), (t.name, count)
                if count > 0:
                    assert len(set(got)) == len(got), (t.name, count)
            popped = conn.call("SPOP", k)
            assert popped[0] == "$" and popped[1] in want
            left = set(want) - {popped[1]}
            for count in [1, 2, size // 3]:
                got = _members(conn.call("SPOP", k, str(count)), proto, "~")
                assert len(got) == len(set(got)) == min(count, len(left)) and set(got) <= left
                left -= set(got)
                assert conn.call("SCARD", k) == (":", len(left))
            rest = _members(conn.call("SPOP", k, str(size)), proto, "~")
            assert set(rest) == left and len(rest) == len(left)
            assert conn.call("EXISTS", k) == (":", 0)
        finally:
            conn.call("DEL", k)
            conn.close()


def test_big_sets_and_sscan_pages(targets: list[Any], key: str) -> None:
    """A hashtable of 1500 members: SMEMBERS as a set; a full SSCAN with a small COUNT returns
    every member (MATCH too); SINTER/SUNION/SDIFF against redis-py's answers."""
    k, o = key + ":big", key + ":other"
    want = {f"member:{j}".encode() for j in range(1500)}
    other = {f"member:{j}".encode() for j in range(0, 3000, 2)}
    for t in targets:
        r = redis.Redis(port=t.port)
        try:
            r.delete(k, o)
            r.sadd(k, *want)
            r.sadd(o, *other)
            assert r.object("encoding", k) == b"hashtable" and r.scard(k) == 1500
            assert r.smembers(k) == want
            cursor, got, pages = 0, [], 0
            while True:
                cursor, page = r.sscan(k, cursor, count=20)
                got += page
                pages += 1
                if cursor == 0:
                    break
            assert set(got) == want and len(got) == len(want) and pages > 10, t.name
            assert set(r.sscan_iter(k, match="member:1?", count=50)) == \
                {m for m in want if len(m) == 9 and m.startswith(b"member:1")}
            assert r.sinter(k, o) == want & other and r.sunion(k, o) == want | other
            assert r.sdiff(k, o) == want - other and r.sdiff(o, k) == other - want
            assert r.sintercard(2, [k, o]) == len(want & other)
            assert r.sintercard(2, [k, o], limit=10) == 10
            assert r.sdiffstore(key + ":d", [k, o]) == len(want - other)
        finally:
            r.delete(k, o, key + ":d")
            r.close()


def test_keyspace_hits_and_misses_of_set_reads(targets: list[Any], key: str) -> None:
    k, m = key + ":s", key + ":missing"
    seen = []
    for t in targets:
        r = redis.Redis(port=t.port)
        try:
            r.delete(k)
            r.sadd(k, "1", "2")
            r.config_resetstat()
            r.smembers(k)
            r.sismember(m, "1")
            r.sinter(k, m, k)
            r.sunion(m, m)
            r.sintercard(2, [k, m])
            r.sinterstore(key + ":d", [k, m])
            r.spop(m)
            r.srandmember(k)
            r.scard(m)
            info = r.info("stats")
            seen.append((info["keyspace_hits"], info["keyspace_misses"]))
        finally:
            r.delete(k, key + ":d")
            r.close()
    assert all(s == seen[0] for s in seen), seen


def test_acl_set_category(targets: list[Any]) -> None:
    got = []
    for t in targets:
        r = redis.Redis(port=t.port)
        try:
            got.append(sorted(r.acl_cat("set")))  # type: ignore[arg-type]
        finally:
            r.close()
    assert all(g == got[0] for g in got), got
