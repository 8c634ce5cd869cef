"""Option parsing, differential: every command that walks options (topicsrv/resp/args.py)
answers a bad option, a missing value or a bad value with redis-server's exact error, in the
order redis-server checks them, and keeps the connection."""

from __future__ import annotations

from typing import Any

import pytest
from compat_harness import S  # type: ignore[import-not-found]


def setup(k: str) -> list[Any]:
    return [S("XADD", k, "*", "f", "v"), S("XADD", k, "*", "f", "w"),
            S("XGROUP", "CREATE", k, "g", "0")]


def test_xadd_and_xtrim_options(differ: Any, key: str) -> None:
    k = key
    differ.check([
        *setup(k),
        S("XADD", k, "MAXLEN", "*", "f", "v"),
        S("XADD", k, "MAXLEN", "~", "x", "*", "f", "v"),
        S("XADD", k, "MAXLEN", "-1", "*", "f", "v"),
        S("XADD", k, "MAXLEN", "1", "MINID", "1", "*", "f", "v"),
        S("XADD", k, "MINID", "bad", "*", "f", "v"),
        S("XADD", k, "MINID", "=", "1-x", "*", "f", "v"),
        S("XADD", k, "LIMIT", "5", "*", "f", "v"),
        S("XADD", k, "MAXLEN", "5", "LIMIT", "5", "*", "f", "v"),
        S("XADD", k, "MAXLEN", "~", "5", "LIMIT", "-1", "*", "f", "v"),
        S("XADD", k, "MAXLEN", "~", "5", "LIMIT", "x", "*", "f", "v"),
        S("XADD", k, "*", "f", "v", "x"),
        S("XADD", k, "NOMKSTREAM", "*", "f", "v", "x"),
        S("XADD", k, "nomkstream", "maxlen", "=", "5", "*", "f", "v"),
        S("XADD", k + ":none", "NOMKSTREAM", "*", "f", "v"),
        S("XADD", k, "MAXLEN", "5", "*"),
        S("XTRIM", k, "BOGUS", "1"),
        S("XTRIM", k, "MAXLEN", "x"),
        S("XTRIM", k, "LIMIT", "1"),
        S("XTRIM", k, "MAXLEN", "1", "LIMIT"),
        S("XTRIM", k, "MAXLEN", "=", "5"),
        S("XTRIM", k, "MINID", "0", "MAXLEN", "1"),
        S("XLEN", k),
    ])


def test_range_and_read_options(differ: Any, key: str) -> None:
    k = key
    differ.check([
        *setup(k),
        S("XRANGE", k, "-", "+", "COUNT"),
        S("XRANGE", k, "-", "+", "COUNT", "x"),
        S("XRANGE", k, "-", "+", "FOO", "1"),
        S("XRANGE", k, "-", "+", "count", "1", "COUNT", "2"),
        S("XRANGE", k, "-", "+", "COUNT", "-5"),
        S("XREVRANGE", k, "+", "-", "COUNT", "1", "x"),
        S("XREAD", "COUNT", "x", "STREAMS", k, "0"),
        S("XREAD", "BLOCK", "x", "STREAMS", k, "0"),
        S("XREAD", "BLOCK", "-1", "STREAMS", k, "0"),
        S("XREAD", "STREAMS", k, k, "0"),
        S("XREAD", "FOO", "STREAMS", k, "0"),
        S("XREAD", "COUNT", "1", "BLOCK"),
        S("XREAD", "count", "-3", "streams", k, "bad"),
        S("XREAD", "GROUP", "g", "STREAMS"),
        S("XREAD", "COUNT", "1", "COUNT", "2", "STREAMS", k, k + ":x", "0", "0"),
    ])


def test_group_options(differ: Any, key: str) -> None:
    k = key
    differ.check([
        *setup(k),
        S("XREADGROUP", "GROUP", "g", "c", "STREAMS", k, k, ">"),
        S("XREADGROUP", "GROUP", "g", "c", "COUNT", "x", "STREAMS", k, ">"),
        S("XREADGROUP", "GROUP", "g", "c", "BLOCK", "-1", "STREAMS", k, ">"),
        S("XREADGROUP", "GROUP", "g", "c", "BLOCK", "x", "STREAMS", k, ">"),
        S("XREADGROUP", "COUNT", "1", "BLOCK", "1", "STREAMS", k, ">"),
        S("XREADGROUP", "GROUP", "g", "c", "FOO", "STREAMS", k, ">"),
        S("XREADGROUP", "GROUP", "g", "c", "NOACK", "STREAMS", k, "$"),
        S("XREADGROUP", "GROUP", "g", "c", "STREAMS", k, "bad-id"),
        S("XREADGROUP", "GROUP", "g", "c", "COUNT", "1", "GROUP", "x", "y", "z"),
        S("XREADGROUP", "GROUP", "g", "c", "count", "1", "noack", "streams", k, ">"),
        S("XGROUP", "CREATE", k, "g2", "0", "MKSTREAM", "BOGUS"),
        S("XGROUP", "CREATE", k, "g2", "0", "ENTRIESREAD"),
        S("XGROUP", "CREATE", k, "g2", "0", "ENTRIESREAD", "x"),
        S("XGROUP", "CREATE", k, "g2", "0", "ENTRIESREAD", "-3"),
        S("XGROUP", "CREATE", k, "g2", "0", "mkstream", "MKSTREAM"),
        S("XCLAIM", k, "g", "c", "x", "0-1"),
        S("XCLAIM", k, "g", "c", "0", "0-1", "IDLE", "x"),
        S("XCLAIM", k, "g", "c", "0", "0-1", "TIME", "x"),
        S("XCLAIM", k, "g", "c", "0", "0-1", "RETRYCOUNT", "x"),
        S("XCLAIM", k, "g", "c", "0", "0-1", "LASTID", "bad"),
        S("XCLAIM", k, "g", "c", "0", "0-1", "BOGUS"),
        S("XCLAIM", k, "g", "c", "0", "0-1", "IDLE"),
        S("XCLAIM", k, "g", "c", "0", "{ID 1}", "force", "JUSTID", "retrycount", "3"),
        S("XAUTOCLAIM", k, "g", "c", "0", "0", "COUNT", "0"),
        S("XAUTOCLAIM", k, "g", "c", "0", "0", "COUNT", "x"),
        S("XAUTOCLAIM", k, "g", "c", "0", "0", "BOGUS"),
        S("XAUTOCLAIM", k, "g", "c", "0", "0", "COUNT"),
        S("XAUTOCLAIM", k, "g", "c", "x", "0"),
        S("XAUTOCLAIM", k, "g", "c", "0", "0", "count", "5", "justid"),
    ])


def test_keyspace_and_connection_options(differ: Any, key: str) -> None:
    differ.check([
        S("SCAN", "0", "COUNT", "0"),
        S("SCAN", "0", "COUNT", "x"),
        S("SCAN", "0", "MATCH"),
        S("SCAN", "0", "BOGUS", "x"),
        S("SCAN", "x"),
        S("HELLO", "3", "BOGUS"),
        S("HELLO", "2", "AUTH", "default"),
        S("HELLO", "2", "SETNAME"),
        S("HELLO", "x"),
        S("HELLO", "4"),
        S("CLIENT", "LIST", "TYPE", "bogus"),
        S("CLIENT", "LIST", "ID", "x"),
        S("CLIENT", "LIST", "BOGUS"),
        S("CLIENT", "KILL", "ID", "x"),
        S("CLIENT", "KILL", "TYPE", "bogus"),
        S("CLIENT", "KILL", "SKIPME", "maybe"),
        S("CLIENT", "KILL", "BOGUS", "x"),
        S("CLIENT", "KILL", "ID", "1", "SKIPME"),
        S("CLIENT", "KILL", "1.2.3.4:5"),
        S("CLIENT", "KILL", "ID", "999999"),
        S("PING"),
    ])


@pytest.mark.parametrize("proto", [3])
def test_errors_are_the_same_under_resp3(differ: Any, key: str, proto: int) -> None:
    differ.check([*setup(key), S("XADD", key, "MAXLEN", "-1", "*", "f", "v"),
                  S("XREADGROUP", "GROUP", "g", "c", "COUNT", "x", "STREAMS", key, ">"),
                  S("SCAN", "0", "COUNT", "0")], proto)
