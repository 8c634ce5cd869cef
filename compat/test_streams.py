"""Stream commands, differential (API.md section 9): XADD and its options, XRANGE/XREVRANGE,
XLEN, XDEL, XTRIM, XREAD, XINFO STREAM [FULL], TYPE/EXISTS/DEL, in RESP2 and RESP3."""

from __future__ import annotations

from typing import Any

import pytest
from compat_harness import S  # type: ignore[import-not-found]

TREE = [("radix-tree-keys",), ("radix-tree-nodes",)]
FULL_TIMES = [("groups", "*", "pending", "*", 2), ("groups", "*", "consumers", "*", "seen-time"),
              ("groups", "*", "consumers", "*", "pending", "*", 1)]


@pytest.mark.parametrize("proto", [2, 3])
def test_xadd_options(differ: Any, key: str, proto: int) -> None:
    k = f"{key}:{proto}"
    differ.check([
        S("XADD", k, "NOMKSTREAM", "*", "a", "1"),
        S("EXISTS", k),
        S("XADD", k, "*", "a", "1", "b", "2"),
        S("XADD", k, "*", "dup", "1", "dup", "2"),  # repeated fields round-trip
        S("XADD", k, "NOMKSTREAM", "*", "a", "3"),
        S("XADD", k, "*", "bin", "\x00\xff\r\n"),
        S("XRANGE", k, "-", "+"),
        S("XLEN", k),
        S("TYPE", k),
        S("XADD", k, "MAXLEN", "3", "*", "a", "4"),
        S("XLEN", k),
        S("XADD", k, "MAXLEN", "=", "2", "*", "a", "5"),
        S("XRANGE", k, "-", "+"),
        S("XADD", k, "MINID", "{ID 5}", "*", "a", "6"),
        S("XRANGE", k, "-", "+"),
        S("XADD", k, "MAXLEN", "=", "2", "LIMIT", "10", "*", "a", "7"),
        S("XADD", k, "MAXLEN", "x", "*", "a", "7"),
        S("XADD", k, "MAXLEN", "-1", "*", "a", "7"),
        S("XADD", k, "MINID", "bad", "*", "a", "7"),
        S("XADD", k, "*", "a"),
        S("XADD", k, "*"),
        S("XADD", k, "1-1", "a", "1"),  # an explicit ID below the top item: Redis's error
        S("XADD", k, "MAXLEN", "~", "1", "*", "a", "8"),
        S("XLEN", k, diff="approx-trim-exact"),
    ], proto)


@pytest.mark.parametrize("proto", [2, 3])
def test_ranges_and_reads(differ: Any, key: str, proto: int) -> None:
    k, k2 = f"{key}:{proto}", f"{key}:{proto}:b"
    differ.check([
        *[S("XADD", k, "*", "n", str(i)) for i in range(5)],
        S("SLEEP", "0.003"),  # a later ms, so k2's ID differs from k's on both servers
        S("XADD", k2, "*", "other", "1"),
        S("XRANGE", k, "-", "+", "COUNT", "2"),
        S("XRANGE", k, "({ID 2}", "+"),
        S("XRANGE", k, "{ID 2}", "({ID 4}"),
        S("XRANGE", k, "{ID 3}", "{ID 3}"),
        S("XRANGE", k, "+", "-"),
        S("XRANGE", k, "-", "+", "COUNT", "0"),
        S("XRANGE", k, "-", "+", "COUNT", "x"),
        S("XRANGE", k, "-", "+", "LIMIT", "1"),
        S("XRANGE", k, "(-", "+"),
        S("XRANGE", k, "bad", "+"),
        S("XRANGE", "no:such:key", "-", "+"),
        S("XREVRANGE", k, "+", "-"),
        S("XREVRANGE", k, "+", "-", "COUNT", "1"),
        S("XREVRANGE", k, "({ID 4}", "{ID 2}"),
        S("XREAD", "STREAMS", k, "0"),
        S("XREAD", "COUNT", "2", "STREAMS", k, "{ID 2}"),
        S("XREAD", "COUNT", "1", "STREAMS", k, k2, "0", "0"),
        S("XREAD", "STREAMS", k, "$"),
        S("XREAD", "STREAMS", k, "{ID 5}"),
        S("XREAD", "BLOCK", "10", "STREAMS", k, "$"),
        S("XREAD", "STREAMS", "no:such:key", "0"),
        S("XREAD", "STREAMS", k),
        S("XREAD", "STREAMS", k, "0", "1"),
        S("XREAD", "COUNT", "STREAMS", k, "0"),
        S("XREAD", "FOO", "STREAMS", k, "0"),
        S("XREAD", "BLOCK", "-1", "STREAMS", k, "0"),
        S("XREAD", "STREAMS", k, ">"),
        S("XREAD", "STREAMS", k, "bad"),
        S("XDEL", k, "{ID 2}", "{ID 2}", "{ID 3}"),
        S("XDEL", k, "bad"),
        S("XDEL", "no:such:key", "{ID 1}"),
        S("XREAD", "STREAMS", k, "{ID 1}"),  # XDEL gaps are silent
        S("XLEN", k),
        S("XTRIM", k, "MAXLEN", "2"),
        S("XTRIM", k, "MAXLEN", "=", "0"),
        S("XLEN", k),
        S("XTRIM", k, "MAXLEN"),
        S("XTRIM", k, "FOO", "1"),
        S("XTRIM", "no:such:key", "MAXLEN", "1"),
        S("XLEN", "no:such:key"),
        S("DEL", k, k2),
        S("EXISTS", k),
    ], proto)


@pytest.mark.parametrize("proto", [2, 3])
def test_xinfo_stream(differ: Any, key: str, proto: int) -> None:
    k = f"{key}:{proto}"
    differ.check([
        S("XINFO", "STREAM", k),
        *[S("XADD", k, "*", "n", str(i)) for i in range(3)],
        S("XGROUP", "CREATE", k, "g", "0"),
        S("XREADGROUP", "GROUP", "g", "c", "COUNT", "2", "STREAMS", k, ">"),
        S("XGROUP", "CREATECONSUMER", k, "g", "idle"),
        S("XINFO", "STREAM", k, mask=TREE),
        S("XINFO", "STREAM", k, "FULL", mask=[*TREE, *FULL_TIMES]),
        S("XINFO", "STREAM", k, "FULL", "COUNT", "1", mask=[*TREE, *FULL_TIMES]),
        S("XINFO", "STREAM", k, "FULL", "COUNT", "x"),
        S("XINFO", "STREAM", k, "BOGUS"),
        S("XINFO", "STREAM", k, "FULL", "COUNT"),
        S("XINFO", "STREAM", k, "FULL", "BOGUS", "1"),
        S("XINFO", "FROB", k),
        S("XINFO", "HELP"),
    ], proto)
