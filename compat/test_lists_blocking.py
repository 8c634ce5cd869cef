"""Blocking list pops, differential against redis-server (issue 35): the immediate answers,
the errors, and the pops inside MULTI (never blocking)."""

from __future__ import annotations

from typing import Any

from compat_harness import S  # type: ignore[import-not-found]


def test_blocking_pops_that_need_not_wait(differ: Any) -> None:
    a, b = "bl:a", "bl:b"
    differ.check([
        S("DEL", a, b, "bl:s"), S("RPUSH", a, "1", "2", "3"), S("BLPOP", b, a, "0"),
        S("BRPOP", a, "0.01"), S("BLMOVE", a, b, "LEFT", "RIGHT", "0"), S("LRANGE", b, "0", "-1"),
        S("RPUSH", a, "x", "y"), S("BRPOPLPUSH", a, b, "1"), S("BLMPOP", "0", "2", "bl:none", a, "LEFT", "COUNT", "5"),
        S("BLPOP", a, "-1"), S("BLPOP", a, "x"), S("BLPOP", a, "inf"), S("BLMOVE", a, b, "UP", "LEFT", "0"),
        S("BLMPOP", "0", "0", a, "LEFT"), S("BLMPOP", "x", "1", a, "LEFT"),
        S("SET", "bl:s", "v"), S("BLPOP", "bl:s", "0"), S("BLMOVE", b, "bl:s", "LEFT", "LEFT", "0"),
        S("MULTI"), S("BLPOP", "bl:none", "0"), S("BRPOP", "bl:none", "1"),
        S("BLMPOP", "0", "1", "bl:none", "LEFT"), S("EXEC"),
        S("BLPOP", "bl:none", "0.01"),
    ])
