"""Lists (issue 35), differential against redis-server: replies and errors byte-for-byte,
RESP2 and RESP3 (compat/harness.py), the non-blocking commands."""

from __future__ import annotations

from typing import Any

from compat_harness import S  # type: ignore[import-not-found]


def test_push_pop_and_ranges(differ: Any) -> None:
    k = "l:pp"
    differ.check([
        S("DEL", k, k + "2"), S("LPUSH", k, "a", "b", "c"), S("RPUSH", k, "d", "e"),
        S("LRANGE", k, "0", "-1"), S("LLEN", k), S("TYPE", k), S("OBJECT", "ENCODING", k),
        S("LPUSHX", k + "2", "x"), S("RPUSHX", k + "2", "x"), S("EXISTS", k + "2"),
        S("LPUSHX", k, "z", "y"), S("RPUSHX", k, "f"), S("LRANGE", k, "0", "-1"),
        S("LRANGE", k, "-3", "-1"), S("LRANGE", k, "5", "2"), S("LRANGE", k, "-100", "100"),
        S("LRANGE", k, "100", "200"), S("LRANGE", k, "x", "1"), S("LRANGE", k + "2", "0", "-1"),
        S("LINDEX", k, "0"), S("LINDEX", k, "-1"), S("LINDEX", k, "100"), S("LINDEX", k, "-100"),
        S("LINDEX", k, "x"), S("LPOP", k), S("RPOP", k), S("LPOP", k, "2"), S("RPOP", k, "2"),
        S("LPOP", k, "0"), S("LPOP", k, "-1"), S("LPOP", k, "x"), S("LPOP", k, "1", "2"),
        S("LPOP", k + "2"), S("LPOP", k + "2", "1"), S("RPOP", k, "100"), S("EXISTS", k),
        S("LPOP", k), S("LLEN", k), S("LPUSH", k), S("RPUSH", k),
    ])


def test_set_insert_rem_trim_pos(differ: Any) -> None:
    k = "l:edit"
    differ.check([
        S("DEL", k), S("LSET", k, "0", "x"), S("RPUSH", k, "a", "b", "c", "b", "a", "b"),
        S("LSET", k, "1", "B"), S("LSET", k, "-1", "Z"), S("LSET", k, "10", "x"),
        S("LSET", k, "x", "y"), S("LRANGE", k, "0", "-1"),
        S("LINSERT", k, "BEFORE", "c", "c0"), S("LINSERT", k, "after", "c", "c1"),
        S("LINSERT", k, "AFTER", "nope", "x"), S("LINSERT", k, "MIDDLE", "c", "x"),
        S("LINSERT", k + "2", "BEFORE", "c", "x"), S("LRANGE", k, "0", "-1"),
        S("LPOS", k, "a"), S("LPOS", k, "a", "RANK", "-1"), S("LPOS", k, "a", "COUNT", "0"),
        S("LPOS", k, "b", "RANK", "2", "COUNT", "5"), S("LPOS", k, "a", "RANK", "0"),
        S("LPOS", k, "a", "COUNT", "-1"), S("LPOS", k, "a", "MAXLEN", "-1"),
        S("LPOS", k, "a", "MAXLEN", "2", "COUNT", "0"), S("LPOS", k, "zz"),
        S("LPOS", k, "zz", "COUNT", "1"), S("LPOS", k + "2", "a"), S("LPOS", k + "2", "a", "COUNT", "2"),
        S("LPOS", k, "a", "RANK"), S("LPOS", k, "a", "FOO", "1"),
        S("LREM", k, "1", "a"), S("LRANGE", k, "0", "-1"), S("LREM", k, "-1", "b"),
        S("LRANGE", k, "0", "-1"), S("LREM", k, "0", "c0"), S("LREM", k, "0", "zz"),
        S("LREM", k, "x", "a"), S("RPUSH", k, "q", "q", "q"), S("LREM", k, "0", "q"),
        S("LRANGE", k, "0", "-1"), S("LTRIM", k, "1", "-2"), S("LRANGE", k, "0", "-1"),
        S("LTRIM", k, "0", "100"), S("LTRIM", k, "-1", "-1"), S("LRANGE", k, "0", "-1"),
        S("LTRIM", k, "5", "1"), S("EXISTS", k), S("LTRIM", k, "0", "1"),
    ])


def test_move_and_mpop(differ: Any) -> None:
    a, b = "l:src", "l:dst"
    differ.check([
        S("DEL", a, b, "l:str"), S("RPUSH", a, "1", "2", "3"), S("LMOVE", a, b, "LEFT", "RIGHT"),
        S("LMOVE", a, b, "RIGHT", "LEFT"), S("LRANGE", a, "0", "-1"), S("LRANGE", b, "0", "-1"),
        S("LMOVE", a, a, "LEFT", "RIGHT"), S("LRANGE", a, "0", "-1"), S("RPOPLPUSH", a, b),
        S("LMOVE", a, b, "LEFT", "LEFT"), S("EXISTS", a), S("RPOPLPUSH", a, b),
        S("LMOVE", a, b, "UP", "LEFT"), S("SET", "l:str", "x"), S("RPOPLPUSH", b, "l:str"),
        S("LRANGE", b, "0", "-1"), S("RPOPLPUSH", "l:str", b),
        S("LMPOP", "2", a, b, "LEFT"), S("LMPOP", "2", a, b, "RIGHT", "COUNT", "10"),
        S("LMPOP", "2", a, b, "LEFT"), S("LMPOP", "0", a, "LEFT"), S("LMPOP", "1", a),
        S("LMPOP", "1", a, "LEFT", "COUNT", "0"), S("LMPOP", "1", a, "LEFT", "COUNT"),
        S("LMPOP", "1", a, "MIDDLE"), S("LMPOP", "x", a, "LEFT"), S("LMPOP", "3", a, "LEFT"),
        S("LMPOP", "1", "l:str", "LEFT"), S("RPUSH", a, "z"), S("LMPOP", "1", a, "LEFT", "COUNT", "1", "COUNT", "2"),
    ])


def test_wrong_types_and_generic_commands(differ: Any) -> None:
    k, s = "l:gen", "l:gstr"
    differ.check([
        S("DEL", k, s, k + "c", k + "r"), S("SET", s, "v"), S("LPUSH", s, "x"), S("LRANGE", s, "0", "1"),
        S("LLEN", s), S("LPOP", s), S("RPUSH", k, "a", "b"), S("GET", k), S("INCR", k),
        S("APPEND", k, "x"), S("STRLEN", k), S("TYPE", k), S("EXISTS", k),
        S("EXPIRE", k, "100"), S("TTL", k), S("PERSIST", k), S("TTL", k),
        S("COPY", k, k + "c"), S("LRANGE", k + "c", "0", "-1"), S("RENAME", k + "c", k + "r"),
        S("LRANGE", k + "r", "0", "-1"), S("EXISTS", k + "c"), S("SET", k + "r", "now a string"),
        S("TYPE", k + "r"), S("DEL", k), S("EXISTS", k), S("SCAN", "0", "TYPE", "list"),
    ])


def test_list_settings(differ: Any) -> None:
    """list-max-listpack-size (and its old name), list-compress-depth: set and read back."""
    differ.check([
        S("CONFIG", "SET", "list-max-listpack-size", "-1"),
        S("CONFIG", "GET", "list-max-listpack-size"), S("CONFIG", "GET", "list-max-ziplist-size"),
        S("CONFIG", "SET", "list-max-ziplist-size", "-2"),
        S("CONFIG", "SET", "list-compress-depth", "2"), S("CONFIG", "GET", "list-compress-depth"),
        S("CONFIG", "SET", "list-compress-depth", "0"), S("CONFIG", "SET", "list-compress-depth", "x"),
    ])
