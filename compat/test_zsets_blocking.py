"""Blocking sorted-set pops, differential against redis-server (issue 36): the immediate
answers, the errors, the pops inside MULTI (never blocking) and inside a script (BZPOPMIN
BZPOPMAX are `noscript` in redis-server 7.0; BZMPOP runs and never blocks)."""

from __future__ import annotations

from typing import Any

import pytest
from compat_harness import S  # type: ignore[import-not-found]


@pytest.mark.parametrize("proto", [2, 3])
def test_blocking_pops_that_need_not_wait(differ: Any, proto: int) -> None:
    a, b = "bz:a", "bz:b"
    differ.check([
        S("DEL", a, b, "bz:s"), S("ZADD", a, "1", "x", "2.5", "y", "3", "z"), S("BZPOPMIN", b, a, "0"),
        S("BZPOPMAX", a, "0.01"), S("BZMPOP", "0", "2", "bz:none", a, "MIN", "COUNT", "5"),
        S("ZADD", a, "1", "x", "2", "y"), S("BZMPOP", "1", "1", a, "MAX"), S("BZPOPMIN", a, "-1"),
        S("BZPOPMIN", a, "x"), S("BZPOPMIN", a, "inf"), S("BZMPOP", "0", "0", a, "MIN"),
        S("BZMPOP", "x", "1", a, "MIN"), S("BZMPOP", "0", "1", a, "LEFT"), S("BZMPOP", "0", "1", a, "MIN", "COUNT", "0"),
        S("SET", "bz:s", "v"), S("BZPOPMIN", "bz:s", "0"), S("BZMPOP", "0", "1", "bz:s", "MAX"),
        S("MULTI"), S("BZPOPMIN", "bz:none", "0"), S("BZPOPMAX", "bz:none", "1"),
        S("BZMPOP", "0", "1", "bz:none", "MIN"), S("EXEC"), S("BZPOPMIN", "bz:none", "0.01"),
        S("BZMPOP", "0.01", "1", "bz:none", "MIN"),
    ], proto)


def test_blocking_pops_inside_a_script(differ: Any) -> None:
    k = "bz:sc"
    call = "return redis.call('{}', {})"
    differ.check([
        S("DEL", k), S("ZADD", k, "1", "a", "2", "b", "3", "c"),
        S("EVAL", call.format("bzpopmin", "KEYS[1], 0"), "1", k),
        S("EVAL", call.format("bzpopmax", "KEYS[1], 0.5"), "1", k),
        S("EVAL", "return redis.pcall('bzpopmin', KEYS[1], 0)", "1", k),
        S("EVAL", call.format("bzmpop", "0, 1, KEYS[1], 'MIN', 'COUNT', 2"), "1", k),
        S("EVAL", call.format("bzmpop", "0, 1, KEYS[1], 'MAX'"), "1", k),
        S("ZRANGE", k, "0", "-1"),
    ])
