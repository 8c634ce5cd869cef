"""Loss is never silent over RESP: a capacity trim (XADD MAXLEN, XTRIM) past a lagging reader's
cursor reaches redis-py as a tombstone entry first (documented difference `tombstone-entry`),
while XDEL gaps stay silent exactly as in Redis."""

from __future__ import annotations

from typing import Any

import pytest
import redis
from compat_harness import S  # type: ignore[import-not-found]


def test_xdel_gaps_are_silent_like_redis(differ: Any, key: str) -> None:
    differ.check([
        *[S("XADD", key, "*", "n", str(i)) for i in range(5)],
        S("XDEL", key, "{ID 2}", "{ID 3}"),
        S("XREAD", "STREAMS", key, "{ID 1}"),
        S("XGROUP", "CREATE", key, "g", "0"),
        S("XREADGROUP", "GROUP", "g", "c", "STREAMS", key, ">"),
    ])


def test_trim_past_cursor_is_a_documented_difference(differ: Any, key: str) -> None:
    differ.check([
        *[S("XADD", key, "*", "n", str(i)) for i in range(5)],
        S("XGROUP", "CREATE", key, "g", "{ID 1}"),
        S("XADD", key, "MAXLEN", "2", "*", "n", "5"),
        S("XREAD", "STREAMS", key, "{ID 1}", diff="tombstone-entry"),
        S("XREADGROUP", "GROUP", "g", "c", "STREAMS", key, ">", diff="tombstone-entry"),
        S("XPENDING", key, "g"),  # the tombstone never enters the PEL: same as Redis
    ])


def rows_of(reply: Any, k: str) -> list[Any]:
    """The entries of stream k in an XREAD reply as redis-py returns it (RESP2 list, RESP3 dict)."""
    if isinstance(reply, dict):
        return list(reply[k][0])
    return list(dict(reply)[k])


@pytest.mark.parametrize("protocol", [2, 3])
def test_tombstone_reaches_redis_py(ours: Any, key: str, protocol: int) -> None:
    if ours is None:
        pytest.skip("COMPAT_REFERENCE_ONLY=1: topicsrv is not under test")
    r = redis.Redis(port=ours.port, protocol=protocol, decode_responses=True)
    k = f"{key}:{protocol}"
    try:
        ids = [r.xadd(k, {"n": str(i)}) for i in range(5)]
        r.xgroup_create(k, "g", id=ids[0])
        r.xadd(k, {"n": "5"}, maxlen=2, approximate=False)  # evicts n=0..3: cursor ids[0] lags
        entries = rows_of(r.xread({k: ids[0]}), k)
        tomb_id, tomb = entries[0]
        seq = lambda ident: int(ident.split("-")[1])  # noqa: E731
        assert tomb["$type"] == "tombstone" and tomb["reason"] == "cap"
        assert int(tomb["gap_from"]) == seq(ids[1]) and int(tomb["gap_to"]) == seq(ids[3])
        assert int(tomb["missed_estimate"]) == 3
        assert seq(tomb_id) == int(tomb["gap_to"])
        assert [e[1] for e in entries[1:]] == [{"n": "4"}, {"n": "5"}]
        # resuming after the tombstone is exact: the surviving records, no second tombstone
        rows = rows_of(r.xread({k: tomb_id}), k)
        assert [e[1] for e in rows] == [{"n": "4"}, {"n": "5"}]
        # a consumer group behind the trim gets the same tombstone, never in its PEL
        rows = rows_of(r.xreadgroup("g", "c", {k: ">"}), k)
        assert rows[0][1]["$type"] == "tombstone"
        assert [e[1] for e in rows[1:]] == [{"n": "4"}, {"n": "5"}]
        assert r.xpending(k, "g")["pending"] == 2
        info = r.xinfo_groups(k)[0]
        assert info["lag"] == 0 and info["last-delivered-id"] == rows[-1][0]
        # XTRIM is a capacity trim too
        cur = rows[-1][0]
        r.xadd(k, {"n": "6"})
        r.xadd(k, {"n": "7"})
        r.xtrim(k, maxlen=1, approximate=False)
        rows = rows_of(r.xread({k: cur}), k)
        assert rows[0][1]["$type"] == "tombstone" and [e[1] for e in rows[1:]] == [{"n": "7"}]
    finally:
        r.delete(k)
        r.close()
