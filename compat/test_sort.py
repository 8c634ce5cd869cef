"""SORT and SORT_RO (issue 36), differential against redis-server: replies and errors byte for
byte, RESP2 and RESP3 (compat/harness.py). Lists here; sets and sorted sets as sources are in
the same tests once those kinds exist on both servers (the `S*`/`Z*` setup steps)."""

from __future__ import annotations

from typing import Any

from compat_harness import S  # type: ignore[import-not-found]


def test_numeric_alpha_desc_limit(differ: Any) -> None:
    k = "so:l"
    differ.check([
        S("DEL", k, "so:e", "so:s"), S("SORT", "so:e"), S("SORT_RO", "so:e"),
        S("RPUSH", k, "3", "1", "2", "10", "-1.5", "1e1", "0x10", " 7", "2"),
        S("SORT", k), S("SORT", k, "DESC"), S("SORT", k, "ALPHA"), S("SORT", k, "ALPHA", "DESC"),
        S("SORT", k, "LIMIT", "0", "3"), S("SORT", k, "LIMIT", "2", "3"), S("SORT", k, "LIMIT", "-5", "2"),
        S("SORT", k, "LIMIT", "1", "-1"), S("SORT", k, "LIMIT", "8", "5"), S("SORT", k, "LIMIT", "9", "5"),
        S("SORT", k, "LIMIT", "100", "5"), S("SORT", k, "LIMIT", "0", "0"), S("SORT", k, "DESC", "LIMIT", "1", "2"),
        S("SORT", k, "LIMIT", "x", "1"), S("SORT", k, "LIMIT", "1"), S("SORT", k, "FOO"),
        S("SORT_RO", k, "DESC"), S("SORT_RO", k, "STORE", "so:s"),
        S("RPUSH", "so:bad", "1", "two", "3"), S("SORT", "so:bad"), S("SORT", "so:bad", "ALPHA"),
        S("RPUSH", "so:nan", "nan"), S("SORT", "so:nan"),
        S("RPUSH", "so:empty", "", "1", "-1"), S("SORT", "so:empty"),
        S("RPUSH", "so:inf", "inf", "-inf", "+Infinity", "0"), S("SORT", "so:inf"),
        # last: redis-server 7.0 never clears errno before strtod, so after an overflow
        # (ERANGE) every later numeric SORT fails too until something resets errno
        S("RPUSH", "so:big", "1e400"), S("SORT", "so:big"),
        S("SET", "so:str", "x"), S("SORT", "so:str"), S("HSET", "so:h", "a", "1"), S("SORT", "so:h"),
        S("DEL", "so:bad", "so:nan", "so:big", "so:empty", "so:inf", "so:str", "so:h"),
    ])


def test_by_and_get_patterns(differ: Any) -> None:
    k = "so:ids"
    differ.check([
        S("DEL", k, "w_1", "w_2", "w_3", "o_1", "o_2", "h_1", "h_2", "h_3"),
        S("RPUSH", k, "1", "2", "3", "4"),
        S("MSET", "w_1", "30", "w_2", "10", "w_3", "20", "o_1", "one", "o_2", "two"),
        S("HSET", "h_1", "f", "b", "n", "5"), S("HSET", "h_2", "f", "a", "n", "7"),
        S("HSET", "h_3", "f", "c"),
        S("SORT", k, "BY", "w_*"), S("SORT", k, "BY", "w_*", "DESC"),
        S("SORT", k, "BY", "w_*", "GET", "o_*"), S("SORT", k, "BY", "w_*", "GET", "#", "GET", "o_*"),
        S("SORT", k, "BY", "h_*->f", "ALPHA"), S("SORT", k, "BY", "h_*->f", "ALPHA", "DESC"),
        S("SORT", k, "BY", "h_*->n"), S("SORT", k, "GET", "h_*->f", "GET", "h_*->n"),
        S("SORT", k, "GET", "h_*->"), S("SORT", k, "GET", "nostar"), S("SORT", k, "BY", "nosort"),
        S("SORT", k, "BY", "nosort", "DESC"), S("SORT", k, "BY", "nosort", "LIMIT", "1", "2"),
        S("SORT", k, "BY", "nosort", "DESC", "LIMIT", "1", "2"), S("SORT", k, "BY", "o_*"),
        S("SORT", k, "BY", "o_*", "ALPHA"), S("SORT", k, "GET", "#", "BY", "w_*", "LIMIT", "0", "2"),
        S("SORT", k, "GET"), S("SORT", k, "BY"),
    ])


def test_store(differ: Any) -> None:
    k, d = "so:st", "so:dst"
    differ.check([
        S("DEL", k, d, "so:x"), S("RPUSH", k, "b", "a", "c"), S("SET", d, "old"), S("EXPIRE", d, "100"),
        S("SORT", k, "ALPHA", "STORE", d), S("TYPE", d), S("LRANGE", d, "0", "-1"), S("TTL", d),
        S("SORT", k, "ALPHA", "GET", "nokey_*", "STORE", d), S("LRANGE", d, "0", "-1"),
        S("SORT", "so:x", "STORE", d), S("EXISTS", d), S("SORT", "so:x", "STORE", d),
        S("SORT", k, "STORE"), S("SORT", k, "STORE", d, "ALPHA", "LIMIT", "0", "1"),
        S("LRANGE", d, "0", "-1"), S("SORT", k, "STORE", k), S("SORT", k, "ALPHA", "STORE", k),
        S("LRANGE", k, "0", "-1"), S("OBJECT", "ENCODING", d),
    ])


def test_command_keys(differ: Any) -> None:
    """COMMAND INFO of both is in compat/test_keyspace_command_info.py."""
    differ.check([
        S("COMMAND", "GETKEYSANDFLAGS", "sort", "a", "limit", "0", "1", "store", "b", "get", "c"),
        S("COMMAND", "GETKEYS", "sort", "a", "store"), S("COMMAND", "GETKEYS", "sort", "a", "STORE", "b", "STORE", "c"),
        S("COMMAND", "GETKEYS", "sort_ro", "a", "store", "b"), S("COMMAND", "GETKEYS", "sort", "a", "by", "store", "x"),
    ])


def test_in_a_script_and_a_transaction(differ: Any) -> None:
    differ.check([
        S("DEL", "so:t"), S("RPUSH", "so:t", "2", "1"),
        S("EVAL", "return redis.call('SORT', KEYS[1])", "1", "so:t"),
        S("EVAL", "return redis.call('SORT', KEYS[1], 'STORE', KEYS[1])", "1", "so:t"),
        S("EVAL", "return redis.call('SORT_RO', KEYS[1], 'DESC')", "1", "so:t"),
        S("MULTI"), S("SORT", "so:t", "DESC"), S("SORT", "so:t", "LIMIT", "x", "1"), S("EXEC"),
    ])


def test_sets_and_sorted_sets_as_sources(differ: Any) -> None:
    differ.check([
        S("DEL", "so:set", "so:z", "so:sd"), S("SADD", "so:set", "3", "1", "2", "10"),
        S("SORT", "so:set"), S("SORT", "so:set", "DESC", "LIMIT", "1", "2"),
        S("SORT", "so:set", "BY", "nosort", "STORE", "so:sd"), S("LRANGE", "so:sd", "0", "-1"),
        S("EVAL", "return redis.call('SORT', KEYS[1], 'BY', 'nosort')", "1", "so:set"),
        S("SADD", "so:sa", "b", "a", "c"), S("SORT", "so:sa", "ALPHA"), S("SORT", "so:sa"),
        S("ZADD", "so:z", "3", "a", "1", "b", "2", "c"), S("SORT", "so:z", "ALPHA"),
        S("SORT", "so:z", "BY", "nosort"), S("SORT", "so:z", "BY", "nosort", "DESC"),
        S("SORT", "so:z", "BY", "nosort", "LIMIT", "1", "1"),
        S("SORT", "so:z", "BY", "nosort", "DESC", "LIMIT", "0", "2"),
        S("ZADD", "so:zn", "1", "30", "2", "10", "3", "20"), S("SORT", "so:zn"),
        S("SORT_RO", "so:zn", "DESC"), S("DEL", "so:sa", "so:zn"),
    ])
