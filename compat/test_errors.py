"""Errors, differential: wrong arity for every stream and group command, unknown commands and
subcommands, syntax errors; the connection stays usable after each (RESP2 and RESP3)."""

from __future__ import annotations

from typing import Any

import pytest
from compat_harness import S  # type: ignore[import-not-found]

ARITY = [
    ("XADD", "k"), ("XADD", "k", "*"), ("XRANGE", "k", "-"), ("XREVRANGE", "k"), ("XLEN",),
    ("XLEN", "a", "b"), ("XDEL", "k"), ("XTRIM", "k"), ("XREAD",), ("XREAD", "STREAMS"),
    ("XREADGROUP", "GROUP", "g", "c"), ("XACK", "k", "g"), ("XPENDING", "k"),
    ("XCLAIM", "k", "g", "c", "0"), ("XAUTOCLAIM", "k", "g", "c", "0"), ("XGROUP",),
    ("XGROUP", "CREATE", "k", "g"), ("XGROUP", "SETID", "k", "g"), ("XGROUP", "DESTROY", "k"),
    ("XGROUP", "CREATECONSUMER", "k", "g"), ("XGROUP", "DELCONSUMER", "k", "g", "c", "x"),
    ("XGROUP", "HELP", "x"), ("XINFO",), ("XINFO", "STREAM"), ("XINFO", "GROUPS"),
    ("XINFO", "CONSUMERS", "k"), ("PING", "a", "b"),
]


@pytest.mark.parametrize("proto", [2, 3])
def test_wrong_arity(differ: Any, proto: int) -> None:
    differ.check([S(*a) for a in ARITY] + [S("PING")], proto)


@pytest.mark.parametrize("proto", [2, 3])
def test_unknown_and_syntax(differ: Any, key: str, proto: int) -> None:
    k = f"{key}:{proto}"
    differ.check([
        S("NOSUCHCOMMAND", "a", "b"),
        S("XGROUP", "NOSUCH"),
        S("XINFO", "NOSUCH", k),
        S("XADD", k, "*", "f", "v"),
        S("XADD", k, "BOGUS", "*", "f", "v"),
        S("XADD", k, "MAXLEN", "=", "1", "LIMIT", "5", "*", "f", "v"),
        S("XREAD", "GROUP", "g", "c", "STREAMS", k, "0"),
        S("XREAD", "NOACK", "STREAMS", k, "0"),
        S("XREAD", "COUNT", "-1", "STREAMS", k, "0"),
        S("XRANGE", k, "-", "+", "COUNT"),
        S("XTRIM", k, "MAXLEN", "~", "1", "LIMIT", "x"),
        S("XTRIM", k, "MINID", "(1", "x"),
        S("PING"),
    ], proto)


def test_wrongtype_between_strings_and_streams(differ: Any, key: str) -> None:
    differ.check([S("SET", key, "v"), S("XADD", key, "*", "f", "v"), S("LPUSH", key, "x"),
                  S("DEL", key), S("RPUSH", key, "a"), S("XADD", key, "*", "f", "v"),
                  S("GET", key), S("SADD", key, "m")])
