"""Blocking list pops, differential against redis-server (issue 35): the immediate answers,
the errors, the pops inside MULTI (never blocking), and inside a script (BLPOP BRPOP BLMOVE
BRPOPLPUSH are `noscript` in redis-server 7.0; BLMPOP runs and never blocks)."""

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


def test_blocking_pops_inside_a_script(differ: Any) -> None:
    """Valkey's introspection-2 found the flags; these are the replies they govern."""
    k, d = "bl:sc", "bl:scd"
    call = "return redis.call('{}', {})"
    differ.check([
        S("DEL", k, d), S("RPUSH", k, "1", "2", "3"),
        S("EVAL", call.format("blpop", "KEYS[1], 0"), "1", k),
        S("EVAL", call.format("brpop", "KEYS[1], 0.5"), "1", k),
        S("EVAL", call.format("blmove", "KEYS[1], KEYS[2], 'LEFT', 'RIGHT', 0"), "2", k, d),
        S("EVAL", call.format("brpoplpush", "KEYS[1], KEYS[2], 0"), "2", k, d),
        S("EVAL", "return redis.pcall('blpop', KEYS[1], 0)", "1", k),
        S("EVAL", call.format("blmpop", "0, 1, KEYS[1], 'LEFT', 'COUNT', 2"), "1", k),
        S("EVAL", call.format("blmpop", "0, 1, KEYS[1], 'RIGHT'"), "1", k),
        S("EVAL", call.format("blmpop", "0, 1, KEYS[1], 'LEFT'"), "1", k),
        S("LRANGE", k, "0", "-1"), S("EXISTS", d),
    ])
