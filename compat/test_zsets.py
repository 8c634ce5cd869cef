"""Sorted sets (issue 36), differential against redis-server 7.0: replies and errors byte for
byte, RESP2 and RESP3 (compat/harness.py), scores printed as Redis 7.0 prints them (`%.17g`,
`inf`, `-inf`; RESP3 doubles). Both servers keep the same order ((score, member)), so replies
compare exactly; ZRANDMEMBER's picks compare by their properties and a big set's ZSCAN pages
as a set. ZRANK's WITHSCORE is Redis 7.2's (redis-server 7.0 refuses it): tests/resp checks
it on topicsrv alone."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import redis
from compat_harness import S  # type: ignore[import-not-found]

PROTOS = pytest.mark.parametrize("proto", [2, 3])


@pytest.fixture
def limits(targets: list[Any]) -> Iterator[None]:
    """zset-max-listpack-entries/-value back to Redis 7's defaults after the test."""
    yield
    for t in targets:
        r = redis.Redis(port=t.port)
        r.config_set("zset-max-listpack-entries", 128)
        r.config_set("zset-max-listpack-value", 64)
        r.close()


@PROTOS
def test_zadd_options_and_replies(differ: Any, key: str, proto: int) -> None:
    k, m = key + ":z", key + ":missing"
    differ.check([
        S("DEL", k, m), S("ZADD", k, "1", "a", "2", "b", "3", "c"), S("ZADD", k, "1", "a", "5", "b"),
        S("ZADD", k, "CH", "1", "a", "6", "b", "7", "d"), S("ZADD", k, "NX", "9", "a", "9", "e"),
        S("ZADD", k, "XX", "9", "a", "9", "f"), S("ZADD", k, "XX", "CH", "10", "a", "9", "g"),
        S("ZADD", k, "GT", "CH", "1", "a", "11", "b"), S("ZADD", k, "LT", "CH", "1", "a", "100", "b"),
        S("ZADD", k, "GT", "XX", "CH", "0", "c", "50", "c"), S("ZADD", k, "INCR", "5", "a"),
        S("ZADD", k, "INCR", "NX", "5", "a"), S("ZADD", k, "INCR", "XX", "5", "zz"),
        S("ZADD", k, "INCR", "GT", "-1", "a"), S("ZADD", k, "INCR", "LT", "-1", "a"),
        S("ZADD", k, "INCR", "0", "a"), S("ZADD", k, "INCR", "1", "new"),
        S("ZRANGE", k, "0", "-1", "WITHSCORES"), S("ZCARD", k), S("ZCARD", m),
        S("ZADD", k, "NX", "XX", "1", "a"), S("ZADD", k, "GT", "LT", "1", "a"),
        S("ZADD", k, "NX", "GT", "1", "a"), S("ZADD", k, "INCR", "1", "a", "2", "b"),
        S("ZADD", k, "1"), S("ZADD", k, "1", "a", "2"), S("ZADD", k, "NX"), S("ZADD", k, "x", "a"),
        S("ZADD", k, "1", "a", "nan", "b"), S("ZADD", k, "INCR", "nan", "a"), S("ZADD", k),
        S("ZADD", m, "XX", "1", "a"), S("EXISTS", m), S("ZADD", m, "XX", "INCR", "1", "a"),
        S("ZADD", k, "inf", "pinf", "-inf", "ninf", "+inf", "pinf2"), S("ZADD", k, "INCR", "-inf", "pinf"),
        S("ZSCORE", k, "pinf"), S("ZADD", k, "1", "dup", "2", "dup"), S("ZSCORE", k, "dup"),
        S("ZINCRBY", k, "2.5", "a"), S("ZINCRBY", k, "x", "a"), S("ZINCRBY", k, "inf", "ninf"),
        S("ZINCRBY", k, "-inf", "pinf2"), S("ZINCRBY", m + "2", "3", "q"), S("ZRANGE", m + "2", "0", "-1", "WITHSCORES"),
        S("ZINCRBY", k, "1"), S("ZINCRBY", k, "nan", "a"), S("DEL", m + "2"),
    ], proto)


@PROTOS
def test_score_formatting_edge_cases(differ: Any, key: str, proto: int) -> None:
    k = key + ":z"
    differ.check([
        S("DEL", k),
        S("ZADD", k, "0.1", "a", "1.1", "b", "-0", "c", "1e300", "d", "1.5e-300", "e", "3.0", "f",
          "123456789012345678", "g", "0x10", "h", "+5", "i", ".5", "j", "5.", "k", "1E3", "l",
          "-1.7976931348623157e308", "m", "4.9e-324", "n", "9007199254740993", "o", "0.30000000000000004", "p"),
        S("ZRANGE", k, "0", "-1", "WITHSCORES"), S("ZSCORE", k, "a"), S("ZSCORE", k, "c"), S("ZSCORE", k, "nope"),
        S("ZMSCORE", k, "a", "nope", "b", "e"), S("ZSCAN", k, "0", "COUNT", "100"),
        S("ZADD", k, " 1", "x"), S("ZADD", k, "1 ", "x"), S("ZADD", k, "", "x"), S("ZADD", k, "1e400", "x"),
        S("ZADD", k, "1e-400", "x"), S("ZADD", k, "1_0", "x"), S("ZADD", k, "infinity", "x"), S("ZADD", k, "-INF", "y"),
        S("ZADD", k, "0x", "x"), S("ZADD", k, "0x1p3", "x"), S("ZSCORE", k, "x"), S("ZADD", k, "1e", "x"),
        S("ZINCRBY", k, "0.1", "a"), S("ZINCRBY", k, "0.2", "a"), S("ZINCRBY", k, "1e308", "d"),
        S("ZINCRBY", k, "1e308", "d"), S("ZRANGEBYSCORE", k, "-inf", "+inf", "WITHSCORES", "LIMIT", "0", "5"),
    ], proto)


@PROTOS
def test_ranks_scores_and_counts(differ: Any, key: str, proto: int) -> None:
    k, m, s = key + ":z", key + ":m", key + ":s"
    differ.check([
        S("DEL", k, m, s), S("SET", s, "v"), S("ZADD", k, "1", "a", "1", "b", "2", "c", "3", "d", "3", "e"),
        S("ZRANK", k, "a"), S("ZRANK", k, "e"), S("ZREVRANK", k, "a"), S("ZREVRANK", k, "e"),
        S("ZRANK", k, "nope"), S("ZRANK", m, "a"), S("ZREVRANK", m, "a"), S("ZSCORE", m, "a"),
        S("ZMSCORE", m, "a", "b"), S("ZMSCORE", k), S("ZCOUNT", k, "1", "3"), S("ZCOUNT", k, "(1", "3"),
        S("ZCOUNT", k, "1", "(3"), S("ZCOUNT", k, "(1", "(1"), S("ZCOUNT", k, "-inf", "+inf"),
        S("ZCOUNT", k, "3", "1"), S("ZCOUNT", k, "x", "1"), S("ZCOUNT", k, "1", "(x"), S("ZCOUNT", k, "nan", "1"),
        S("ZCOUNT", k, "( 2", "3"), S("ZCOUNT", k, "(", "3"), S("ZCOUNT", k, "", "3"), S("ZCOUNT", k, "1e400", "inf"),
        S("ZCOUNT", m, "1", "2"), S("ZCOUNT", s, "1", "2"), S("ZCOUNT", s, "x", "2"),
        S("ZRANK", s, "a"), S("ZSCORE", s, "a"), S("ZCARD", s), S("ZADD", s, "1", "a"), S("ZREM", s, "a"),
        S("ZREM", k, "a", "a", "nope"), S("ZREM", m, "a"), S("ZREM", k), S("ZCARD", k),
        S("ZREM", k, "b", "c", "d", "e"), S("EXISTS", k), S("TYPE", k),
    ], proto)


@PROTOS
def test_zrange_family(differ: Any, key: str, proto: int) -> None:
    k, m = key + ":z", key + ":m"
    differ.check([
        S("DEL", k, m), S("ZADD", k, "1", "a", "2", "b", "3", "c", "4", "d", "5", "e"),
        S("ZRANGE", k, "0", "-1"), S("ZRANGE", k, "1", "2", "WITHSCORES"), S("ZRANGE", k, "-2", "-1", "withscores"),
        S("ZRANGE", k, "3", "1"), S("ZRANGE", k, "10", "20"), S("ZRANGE", k, "-100", "100"),
        S("ZRANGE", k, "0", "-1", "REV"), S("ZRANGE", k, "0", "1", "REV", "WITHSCORES"),
        S("ZRANGE", k, "(1", "4", "BYSCORE"), S("ZRANGE", k, "4", "(1", "BYSCORE", "REV", "WITHSCORES"),
        S("ZRANGE", k, "-inf", "+inf", "BYSCORE", "LIMIT", "1", "2"), S("ZRANGE", k, "+inf", "-inf", "BYSCORE", "REV", "LIMIT", "1", "2"),
        S("ZRANGE", k, "-inf", "+inf", "BYSCORE", "LIMIT", "-1", "2"), S("ZRANGE", k, "-inf", "+inf", "BYSCORE", "LIMIT", "1", "-1"),
        S("ZRANGE", k, "-inf", "+inf", "BYSCORE", "LIMIT", "5", "2"), S("ZRANGE", k, "-inf", "+inf", "BYSCORE", "LIMIT", "0", "0"),
        S("ZRANGE", k, "0", "-1", "LIMIT", "0", "1"), S("ZRANGE", k, "0", "-1", "LIMIT", "0", "-1"),
        S("ZRANGE", k, "[a", "[c", "BYLEX", "WITHSCORES"), S("ZRANGE", k, "0", "-1", "BYSCORE", "BYLEX"),
        S("ZRANGE", k, "0", "-1", "REV", "REV"), S("ZRANGE", k, "0", "-1", "FOO"), S("ZRANGE", k, "a", "b"),
        S("ZRANGE", k, "x", "y", "BYSCORE"), S("ZRANGE", k, "a", "b", "BYLEX"), S("ZRANGE", k, "0", "1", "LIMIT", "x", "1"),
        S("ZRANGE", k, "0", "1", "LIMIT", "1"), S("ZRANGE", m, "0", "-1"), S("ZRANGE", m, "x", "y"),
        S("ZRANGEBYSCORE", k, "2", "4"), S("ZRANGEBYSCORE", k, "2", "4", "WITHSCORES", "LIMIT", "1", "1"),
        S("ZRANGEBYSCORE", k, "2", "4", "REV"), S("ZRANGEBYSCORE", k, "2", "4", "BYLEX"), S("ZRANGEBYSCORE", k, "(2", "(4"),
        S("ZREVRANGEBYSCORE", k, "4", "2"), S("ZREVRANGEBYSCORE", k, "2", "4"), S("ZREVRANGEBYSCORE", k, "+inf", "-inf", "WITHSCORES", "LIMIT", "0", "2"),
        S("ZREVRANGE", k, "0", "1"), S("ZREVRANGE", k, "0", "-1", "WITHSCORES"), S("ZREVRANGE", k, "0", "1", "LIMIT", "0", "1"),
        S("ZREVRANGE", k, "0", "1", "REV"), S("ZRANGEBYSCORE", k, "1"), S("ZREVRANGE", k, "0"),
    ], proto)


@PROTOS
def test_lex_ranges(differ: Any, key: str, proto: int) -> None:
    k, m = key + ":z", key + ":m"
    differ.check([
        S("DEL", k, m), S("ZADD", k, "0", "a", "0", "b", "0", "c", "0", "d", "0", "e", "0", "ab", "0", ""),
        S("ZRANGEBYLEX", k, "-", "+"), S("ZRANGEBYLEX", k, "[a", "[c"), S("ZRANGEBYLEX", k, "(a", "(c"),
        S("ZRANGEBYLEX", k, "[b", "+", "LIMIT", "1", "2"), S("ZRANGEBYLEX", k, "+", "-"), S("ZRANGEBYLEX", k, "-", "[a"),
        S("ZRANGEBYLEX", k, "[", "(b"), S("ZRANGEBYLEX", k, "a", "c"), S("ZRANGEBYLEX", k, "[a", "c"),
        S("ZRANGEBYLEX", k, "-", "+", "WITHSCORES"), S("ZREVRANGEBYLEX", k, "+", "-"), S("ZREVRANGEBYLEX", k, "[c", "(a"),
        S("ZREVRANGEBYLEX", k, "+", "-", "LIMIT", "1", "3"), S("ZREVRANGEBYLEX", k, "-", "+"),
        S("ZLEXCOUNT", k, "-", "+"), S("ZLEXCOUNT", k, "[b", "(d"), S("ZLEXCOUNT", k, "x", "+"), S("ZLEXCOUNT", m, "-", "+"),
        S("ZREMRANGEBYLEX", k, "[b", "[c"), S("ZRANGE", k, "0", "-1"), S("ZREMRANGEBYLEX", k, "x", "+"),
        S("ZREMRANGEBYLEX", m, "-", "+"), S("ZREMRANGEBYLEX", k, "-", "+"), S("EXISTS", k),
    ], proto)


@PROTOS
def test_removals_by_range(differ: Any, key: str, proto: int) -> None:
    k, m = key + ":z", key + ":m"
    adds = ["1", "a", "2", "b", "3", "c", "4", "d", "5", "e", "6", "f"]
    differ.check([
        S("DEL", k, m), S("ZADD", k, *adds), S("ZREMRANGEBYRANK", k, "0", "0"), S("ZREMRANGEBYRANK", k, "-1", "-1"),
        S("ZREMRANGEBYRANK", k, "5", "10"), S("ZREMRANGEBYRANK", k, "2", "1"), S("ZRANGE", k, "0", "-1"),
        S("ZREMRANGEBYRANK", k, "x", "1"), S("ZREMRANGEBYRANK", m, "0", "1"), S("ZREMRANGEBYSCORE", k, "(2", "4"),
        S("ZRANGE", k, "0", "-1", "WITHSCORES"), S("ZREMRANGEBYSCORE", k, "x", "4"), S("ZREMRANGEBYSCORE", m, "0", "1"),
        S("ZREMRANGEBYSCORE", k, "10", "20"), S("ZREMRANGEBYSCORE", k, "-inf", "+inf"), S("EXISTS", k),
        S("ZADD", k, *adds), S("ZREMRANGEBYRANK", k, "0", "-1"), S("EXISTS", k), S("ZREMRANGEBYRANK", k, "0"),
    ], proto)


@PROTOS
def test_pops(differ: Any, key: str, proto: int) -> None:
    k, m, s = key + ":z", key + ":m", key + ":s"
    differ.check([
        S("DEL", k, m, s), S("SET", s, "v"), S("ZADD", k, "1", "a", "2", "b", "3", "c", "4", "d", "5", "e"),
        S("ZPOPMIN", k), S("ZPOPMAX", k), S("ZPOPMIN", k, "2"), S("ZPOPMAX", k, "0"), S("ZPOPMIN", k, "-1"),
        S("ZPOPMIN", k, "x"), S("ZPOPMIN", k, "1", "2"), S("ZPOPMIN", m), S("ZPOPMIN", m, "3"), S("ZPOPMIN", s),
        S("ZPOPMIN", s, "0"), S("ZPOPMAX", k, "10"), S("EXISTS", k), S("ZADD", k, "1", "a", "2", "b", "3", "c"),
        S("ZMPOP", "2", m, k, "MIN"), S("ZMPOP", "1", k, "MAX", "COUNT", "5"), S("ZMPOP", "1", k, "MAX"),
        S("ZMPOP", "0", k, "MIN"), S("ZMPOP", "x", k, "MIN"), S("ZMPOP", "1", k, "LEFT"), S("ZMPOP", "2", k, "MIN"),
        S("ZMPOP", "1", k, "MIN", "COUNT", "0"), S("ZMPOP", "1", k, "MIN", "COUNT", "1", "COUNT", "1"),
        S("ZMPOP", "1", k, "MIN", "COUNT"), S("ZMPOP", "1", s, "MIN"), S("ZMPOP", "2", m, s, "MAX"),
    ], proto)


@PROTOS
def test_union_inter_diff_and_stores(differ: Any, key: str, proto: int) -> None:
    a, b, c, d, s, m = (key + ":" + x for x in "abcdsm")
    differ.check([
        S("DEL", a, b, c, d, s, m), S("ZADD", a, "1", "x", "2", "y", "3", "z"), S("ZADD", b, "10", "y", "20", "z", "30", "w"),
        S("ZADD", c, "inf", "x", "-inf", "y"), S("SET", s, "v"),
        S("ZUNION", "2", a, b), S("ZUNION", "2", a, b, "WITHSCORES"), S("ZUNION", "2", a, b, "WEIGHTS", "2", "0.5", "WITHSCORES"),
        S("ZUNION", "2", a, b, "AGGREGATE", "MIN", "WITHSCORES"), S("ZUNION", "2", a, b, "AGGREGATE", "max", "WITHSCORES"),
        S("ZUNION", "3", a, b, m, "WITHSCORES"), S("ZUNION", "2", a, c, "WITHSCORES"), S("ZUNION", "2", c, c, "WITHSCORES"),
        S("ZUNION", "2", a, c, "WEIGHTS", "0", "0", "WITHSCORES"), S("ZINTER", "2", a, b, "WITHSCORES"),
        S("ZINTER", "2", a, b, "WEIGHTS", "1", "-1", "AGGREGATE", "SUM", "WITHSCORES"), S("ZINTER", "2", a, m),
        S("ZINTER", "2", a, a, "WITHSCORES"), S("ZDIFF", "2", a, b), S("ZDIFF", "2", a, b, "WITHSCORES"),
        S("ZDIFF", "1", a, "WITHSCORES"), S("ZDIFF", "2", m, a), S("ZDIFF", "2", a, b, "WEIGHTS", "1", "1"),
        S("ZDIFF", "2", a, b, "AGGREGATE", "SUM"), S("ZUNION", "0", a), S("ZUNION", "-1", a), S("ZUNION", "x", a),
        S("ZUNION", "3", a, b), S("ZUNION", "2", a, s), S("ZUNION", "2", a, b, "WEIGHTS", "1"),
        S("ZUNION", "2", a, b, "WEIGHTS", "1", "x"), S("ZUNION", "2", a, b, "AGGREGATE", "AVG"), S("ZUNION", "2", a, b, "FOO"),
        S("ZUNION", "2", a, s, "FOO"), S("ZINTERCARD", "2", a, b), S("ZINTERCARD", "2", a, b, "LIMIT", "1"),
        S("ZINTERCARD", "2", a, b, "LIMIT", "0"), S("ZINTERCARD", "2", a, b, "LIMIT", "-1"), S("ZINTERCARD", "0", a),
        S("ZINTERCARD", "2", a, b, "WITHSCORES"), S("ZINTERCARD", "1", m), S("ZINTERCARD", "2", a, s),
        S("ZUNIONSTORE", d, "2", a, b), S("ZRANGE", d, "0", "-1", "WITHSCORES"), S("ZUNIONSTORE", d, "2", a, b, "WITHSCORES"),
        S("ZINTERSTORE", d, "2", a, b, "WEIGHTS", "2", "3"), S("ZRANGE", d, "0", "-1", "WITHSCORES"),
        S("ZINTERSTORE", d, "2", a, m), S("EXISTS", d), S("ZDIFFSTORE", d, "2", a, b), S("ZRANGE", d, "0", "-1", "WITHSCORES"),
        S("ZDIFFSTORE", s, "1", a), S("TYPE", s), S("ZUNIONSTORE", d, "0", a), S("ZINTERSTORE", d, "x", a),
        S("ZDIFFSTORE", d, "1", m), S("EXISTS", d), S("ZUNIONSTORE", d, "1", m), S("SET", s, "v"),
    ], proto)


@PROTOS
def test_zrangestore(differ: Any, key: str, proto: int) -> None:
    k, d, m = key + ":z", key + ":d", key + ":m"
    differ.check([
        S("DEL", k, d, m), S("ZADD", k, "1", "a", "2", "b", "3", "c", "4", "d"),
        S("ZRANGESTORE", d, k, "0", "1"), S("ZRANGE", d, "0", "-1", "WITHSCORES"), S("ZRANGESTORE", d, k, "(1", "+inf", "BYSCORE", "LIMIT", "0", "2"),
        S("ZRANGE", d, "0", "-1", "WITHSCORES"), S("ZRANGESTORE", d, k, "[c", "-", "BYLEX", "REV"), S("ZRANGE", d, "0", "-1"),
        S("ZRANGESTORE", d, k, "0", "-1", "WITHSCORES"), S("ZRANGESTORE", d, k, "5", "10"), S("EXISTS", d),
        S("ZRANGESTORE", d, m, "0", "-1"), S("ZRANGESTORE", d, k, "x", "1"), S("ZRANGESTORE", d, k, "0"),
    ], proto)


@PROTOS
def test_wrongtype_both_ways_and_generic_commands(differ: Any, key: str, proto: int) -> None:
    s, z, h = key + ":s", key + ":z", key + ":h"
    differ.check([
        S("DEL", s, z, h, z + "c", z + "r"), S("SET", s, "v"), S("ZADD", s, "1", "a"), S("ZINCRBY", s, "1", "a"),
        S("ZRANGE", s, "0", "-1"), S("ZRANGEBYSCORE", s, "0", "1"), S("ZRANGEBYLEX", s, "-", "+"), S("ZCARD", s),
        S("ZPOPMAX", s), S("ZRANDMEMBER", s), S("ZSCAN", s, "0"), S("ZREMRANGEBYRANK", s, "0", "1"),
        S("ZRANGESTORE", z, s, "0", "1"), S("HSET", h, "f", "v"), S("ZMSCORE", h, "f"),
        S("ZADD", z, "1", "a", "2", "b"), S("GET", z), S("HGET", z, "f"), S("LPUSH", z, "x"), S("TYPE", z),
        S("OBJECT", "ENCODING", z), S("EXISTS", z), S("EXPIRE", z, "100"), S("TTL", z), S("PERSIST", z),
        S("COPY", z, z + "c"), S("ZRANGE", z + "c", "0", "-1", "WITHSCORES"), S("RENAME", z + "c", z + "r"),
        S("ZRANGE", z + "r", "0", "-1", "WITHSCORES"), S("EXISTS", z + "c"),
        S("SCAN", "0", "MATCH", z + "?", "COUNT", "1000", "TYPE", "zset", mask=[[0]]),
        S("SET", z + "r", "now a string"), S("TYPE", z + "r"), S("DEL", z), S("EXISTS", z),
    ], proto)


@PROTOS
def test_encodings_follow_the_listpack_limits(differ: Any, key: str, proto: int, limits: None) -> None:
    e, v, u, st, c = (key + ":" + x for x in "evusc")
    differ.check([
        S("CONFIG", "SET", "zset-max-listpack-entries", "3"), S("CONFIG", "SET", "zset-max-listpack-value", "8"),
        S("CONFIG", "GET", "zset-max-listpack-entries"), S("CONFIG", "GET", "zset-max-ziplist-value"),
        S("DEL", e, v, u, st, c, c + "r"), S("ZADD", e, "1", "a", "2", "b", "3", "c"), S("OBJECT", "ENCODING", e),
        S("ZADD", e, "4", "a"), S("OBJECT", "ENCODING", e), S("ZADD", e, "4", "d"), S("OBJECT", "ENCODING", e),
        S("ZREM", e, "a", "b", "c"), S("OBJECT", "ENCODING", e), S("COPY", e, c), S("OBJECT", "ENCODING", c),
        S("RENAME", c, c + "r"), S("OBJECT", "ENCODING", c + "r"),
        S("ZADD", v, "1", "12345678"), S("OBJECT", "ENCODING", v), S("ZADD", v, "1", "123456789"), S("OBJECT", "ENCODING", v),
        S("ZADD", u, "1", "123456789", "2", "a"), S("OBJECT", "ENCODING", u),
        S("ZUNIONSTORE", st, "1", e), S("OBJECT", "ENCODING", st), S("ZUNIONSTORE", st, "1", v), S("OBJECT", "ENCODING", st),
        S("ZRANGESTORE", st, u, "1", "1"), S("OBJECT", "ENCODING", st),
        S("CONFIG", "SET", "zset-max-listpack-entries", "0"), S("DEL", st), S("ZADD", st, "1", "a"), S("OBJECT", "ENCODING", st),
        S("CONFIG", "SET", "zset-max-listpack-entries", "x"), S("CONFIG", "SET", "zset-max-listpack-value", "-1"),
        S("CONFIG", "SET", "zset-max-listpack-value", "1k"), S("CONFIG", "GET", "zset-max-listpack-value"),
        S("CONFIG", "SET", "zset-max-ziplist-entries", "7"), S("CONFIG", "GET", "zset-max-listpack-entries"),
    ], proto)


@PROTOS
def test_zscan_of_a_listpack_and_its_errors(differ: Any, key: str, proto: int) -> None:
    k, s = key + ":z", key + ":s"
    differ.check([
        S("DEL", k, s), S("ZADD", k, "1", "f1", "2.5", "f2", "-inf", "g1"), S("SET", s, "v"),
        S("ZSCAN", k, "0"), S("ZSCAN", k, "0", "COUNT", "1"), S("ZSCAN", k, "0", "MATCH", "f*"),
        S("ZSCAN", k, "x"), S("ZSCAN", k, "0", "COUNT", "0"), S("ZSCAN", k, "0", "MATCH"), S("ZSCAN", k, "0", "NOVALUES"),
        S("ZSCAN", key + ":missing", "0", "BOGUS"), S("ZSCAN", s, "0"), S("ZSCAN", k),
    ], proto)


@PROTOS
def test_zrandmember_replies_and_errors(differ: Any, key: str, proto: int) -> None:
    k, s, m = key + ":z", key + ":s", key + ":m"
    differ.check([
        S("DEL", k, s, m), S("ZADD", k, "1", "a", "2", "b", "3", "c"), S("SET", s, "v"),
        S("ZRANDMEMBER", m), S("ZRANDMEMBER", m, "5"), S("ZRANDMEMBER", m, "-5", "WITHSCORES"),
        S("ZRANDMEMBER", k, "0"), S("ZRANDMEMBER", k, "3", "WITHSCORES"), S("ZRANDMEMBER", k, "100"),
        S("ZRANDMEMBER", k, "x"), S("ZRANDMEMBER", k, "1", "WITHSCORES", "x"), S("ZRANDMEMBER", k, "1", "NOSCORES"),
        S("ZRANDMEMBER", k, "-9223372036854775808"), S("ZRANDMEMBER", k, "4611686018427387904", "WITHSCORES"),
        S("ZRANDMEMBER", s, "1"), S("ZRANDMEMBER", s), S("ZADD", k + "1", "7", "only"), S("ZRANDMEMBER", k + "1"),
        S("ZRANDMEMBER", k + "1", "-3", "WITHSCORES"),
    ], proto)


@PROTOS
@pytest.mark.parametrize("size", [5, 300])  # listpack and skiplist
def test_zrandmember_and_zscan_by_property(targets: list[Any], key: str, proto: int, size: int) -> None:
    k = f"{key}:z"
    want = {f"m{j}".encode(): float(j) for j in range(size)}
    for t in targets:
        conn = t.conn(proto)
        try:
            conn.call("DEL", k)
            conn.call("ZADD", k, *[x for m, s in want.items() for x in (str(s), m.decode())])
            for count in (3, -8, size - 1, size, -(size * 2)):
                tree = conn.call("ZRANDMEMBER", k, str(count), "WITHSCORES")
                items = tree[1]
                if proto == 3:
                    got = [(p[1][0][1], float(p[1][1][1])) for p in items]
                else:
                    got = [(items[j][1], float(items[j + 1][1])) for j in range(0, len(items), 2)]
                assert len(got) == (min(count, size) if count > 0 else -count), (t.name, count)
                assert all(want[m] == s for m, s in got), t.name
                if count > 0:
                    assert len({m for m, _ in got}) == len(got), t.name
            seen: set[bytes] = set()
            cursor = b"0"
            while True:
                tree = conn.call("ZSCAN", k, cursor, "COUNT", "7")
                cursor = tree[1][0][1]
                flat = [x[1] for x in tree[1][1][1]]
                seen.update(flat[0::2])
                assert all(float(s) == want[m] for m, s in zip(flat[0::2], flat[1::2], strict=True))
                if cursor == b"0":
                    break
            assert seen == set(want), t.name
            enc = conn.call("OBJECT", "ENCODING", k)[1]
            assert enc == (b"listpack" if size <= 128 else b"skiplist"), (t.name, enc)
        finally:
            conn.call("DEL", k)
            conn.close()


def test_big_sets_answer_as_small_ones(differ: Any, key: str) -> None:
    """A skiplist set: ranks, ranges, counts and pops over 1,000 members with ties."""
    k = key + ":z"
    adds = [x for j in range(1000) for x in (str(j % 97), f"m{j:04d}")]
    differ.check([
        S("DEL", k), S("ZADD", k, *adds), S("OBJECT", "ENCODING", k), S("ZCARD", k), S("ZRANK", k, "m0500"),
        S("ZREVRANK", k, "m0500"), S("ZRANGE", k, "100", "110", "WITHSCORES"), S("ZRANGE", k, "-5", "-1", "REV"),
        S("ZRANGEBYSCORE", k, "(5", "7", "LIMIT", "3", "4"), S("ZREVRANGEBYSCORE", k, "50", "(48", "WITHSCORES"),
        S("ZCOUNT", k, "10", "(20"), S("ZREMRANGEBYSCORE", k, "90", "+inf"), S("ZREMRANGEBYRANK", k, "0", "9"),
        S("ZPOPMIN", k, "3"), S("ZPOPMAX", k, "3"), S("ZCARD", k), S("ZINCRBY", k, "1000", "m0500"),
        S("ZRANK", k, "m0500"), S("ZRANGE", k, "-1", "-1", "WITHSCORES"), S("ZREM", k, "m0500", "m0501"),
        S("ZMSCORE", k, "m0502", "m0500"),
    ])


def test_transactions_and_scripts(differ: Any, key: str) -> None:
    k, d = key + ":z", key + ":d"
    differ.check([
        S("DEL", k, d), S("MULTI"), S("ZADD", k, "1", "a", "2", "b"), S("ZINCRBY", k, "5", "a"),
        S("ZRANGE", k, "0", "-1", "WITHSCORES"), S("ZADD", k, "x", "y"), S("EXEC"),
        S("EVAL", "redis.call('zadd', KEYS[1], 3, 'c'); return redis.call('zrangebyscore', KEYS[1], 2, '+inf', 'WITHSCORES')", "1", k),
        S("EVAL", "return redis.call('zscore', KEYS[1], 'c')", "1", k),
        S("EVAL", "return redis.call('zpopmin', KEYS[1])", "1", k),
        S("EVAL", "return redis.call('zmpop', 1, KEYS[1], 'MAX', 'COUNT', 5)", "1", k),
        S("EVAL", "return redis.call('bzpopmin', KEYS[1], 0)", "1", k),
        S("EVAL", "return redis.call('bzmpop', 0, 1, KEYS[1], 'MIN')", "1", k),
        S("EXISTS", k),
    ])
