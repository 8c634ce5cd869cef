"""Client-chosen stream IDs, differential and byte-exact (issue 15; engine/log/xids.py): XADD
`<ms>-<n>`, `<ms>`, `<ms>-*`, its errors, XSETID, `*` after explicit IDs, and every ID
position over such a stream. Explicit IDs are deterministic, so these scripts compare the
raw replies (no ID placeholders): topicsrv must answer exactly what redis-server answers."""

from __future__ import annotations

from typing import Any

import pytest
from compat_harness import RespConn, S, drop_redis8, show  # type: ignore[import-not-found]

FUTURE = "99999999999990"  # far above any clock: `*` after it is deterministic (last ms, seq+1)


def _masked(step: tuple[str, ...], tree: Any) -> Any:
    """What is not behaviour, as the harness masks it: idle times, radix-tree counts."""
    if step[0] == "XPENDING" and len(step) > 3 and tree[0] == "*":
        return ("*", [("*", [r[1][0], r[1][1], (":", 0), r[1][3]]) for r in tree[1]])
    if step[:2] == ("XINFO", "STREAM") and tree[0] in "*%":
        tree = drop_redis8(tree)  # Redis 8.6's idmp fields (compat/test_idmp.py)
        items = tree[1] if tree[0] == "%" else list(zip(tree[1][0::2], tree[1][1::2], strict=True))
        return [(k, (":", 0) if k[1] in (b"radix-tree-keys", b"radix-tree-nodes") else v) for k, v in items]
    return tree


def raw_check(targets: list[Any], steps: list[tuple[str, ...]], proto: int = 2) -> None:
    """Run `steps` on every target; the raw replies must be identical. A step starting with
    "~" runs unchecked (a server-assigned ID before the stream took an explicit one)."""
    runs = []
    for t in targets:
        conn = RespConn(t.port, proto)
        try:
            runs.append([_masked(s, conn.call(*s[s[0] == "~":])) for s in steps])
        finally:
            conn.close()
    if len(runs) < 2:
        return
    problems = [
        f"{' '.join(s)}\n    redis:    {show(w)}\n    topicsrv: {show(g)}"
        for s, w, g in zip(steps, runs[0], runs[1], strict=True) if w != g and s[0] != "~"
    ]
    assert not problems, f"RESP{proto} replies differ:\n" + "\n".join(problems)


@pytest.mark.parametrize("proto", [2, 3])
def test_explicit_ids_and_errors(targets: list[Any], key: str, proto: int) -> None:
    k = f"{key}:{proto}"
    raw_check(targets, [
        ("XADD", k, "0-0", "f", "v"),  # refused before the key is created
        ("EXISTS", k),
        ("XADD", k, "NOMKSTREAM", "0-0", "f", "v"),
        ("XADD", k, "0", "f", "v"),
        ("XADD", k, "-", "f", "v"),
        ("XADD", k, "+", "f", "v"),
        ("XADD", k, "1-x", "f", "v"),
        ("XADD", k, "18446744073709551616-0", "f", "v"),
        ("XADD", k, "1-18446744073709551616", "f", "v"),
        ("XADD", k, "0-1", "a", "1"),
        ("XADD", k, "0-1", "a", "2"),  # equal
        ("XADD", k, "5", "a", "3"),  # `ms` is `ms-0`
        ("XADD", k, "5-0", "a", "4"),
        ("XADD", k, "5-*", "a", "5"),  # same ms: seq + 1
        ("XADD", k, "5-*", "a", "6"),
        ("XADD", k, "4-*", "a", "7"),  # an older ms
        ("XADD", k, "7-*", "a", "8"),  # a newer ms: seq 0
        ("XADD", k, "7-18446744073709551615", "a", "9"),
        ("XADD", k, "7-*", "a", "10"),  # the seq would overflow
        ("XADD", k, "8-*", "a", "11"),
        ("XADD", k, "MAXLEN", "100", "9-3", "a", "12"),
        ("XADD", k, "*", "a"),
        ("XLEN", k),
        ("XRANGE", k, "-", "+"),
        ("XREVRANGE", k, "+", "-", "COUNT", "3"),
    ], proto)


def test_exhausted_and_star_after_explicit(targets: list[Any], key: str) -> None:
    raw_check(targets, [
        ("XADD", key, f"{FUTURE}-5", "a", "1"),
        ("XADD", key, "*", "a", "2"),  # max(now, last ms) = last ms: seq + 1
        ("XADD", key, "*", "a", "3"),
        ("XADD", key, f"{FUTURE}-*", "a", "4"),
        ("XADD", key, "18446744073709551615-18446744073709551614", "a", "5"),
        ("XADD", key, "*", "a", "6"),  # the last possible ID
        ("XADD", key, "*", "a", "7"),  # exhausted
        ("XADD", key, "18446744073709551615-*", "a", "8"),
        ("XRANGE", key, "-", "+"),
        ("XINFO", "STREAM", key),
    ])


@pytest.mark.parametrize("proto", [2, 3])
def test_positions_over_explicit_ids(targets: list[Any], key: str, proto: int) -> None:
    k = f"{key}:{proto}"
    adds = [("XADD", k, i, "n", i) for i in ("1-1", "1-2", "3-0", "3-7", "10-0", "10-1", "12-5")]
    raw_check(targets, [
        *adds,
        ("XRANGE", k, "1", "3"),  # `ms` = ms-0 as a start, ms-max as an end
        ("XRANGE", k, "1-2", "10"),
        ("XRANGE", k, "(1-2", "(10-1"),
        ("XRANGE", k, "2", "9"),
        ("XRANGE", k, "11", "+"),
        ("XRANGE", k, "13", "+"),
        ("XREVRANGE", k, "10", "(1-1"),
        ("XREVRANGE", k, "+", "3-5", "COUNT", "2"),
        ("XREAD", "STREAMS", k, "3-0"),
        ("XREAD", "COUNT", "2", "STREAMS", k, "2"),
        ("XREAD", "STREAMS", k, "12-5"),
        ("XREAD", "STREAMS", k, "0-0"),
        ("XDEL", k, "3-7", "3-6", "10-0"),
        ("XRANGE", k, "-", "+"),
        ("XREAD", "STREAMS", k, "3-0"),
        ("XADD", k, "12-5", "x", "1"),  # the top's ID is still taken
        ("XDEL", k, "12-5"),
        ("XADD", k, "12-5", "x", "2"),  # after XDEL of the top: still equal to last_id
        ("XADD", k, "12-6", "x", "3"),
        ("XTRIM", k, "MINID", "3-1"),
        ("XRANGE", k, "-", "+"),
        ("XTRIM", k, "MINID", "10-1"),
        ("XRANGE", k, "-", "+"),
        ("XLEN", k),
    ], proto)


def test_xsetid(targets: list[Any], key: str) -> None:
    k2 = key + ":b"
    raw_check(targets, [
        ("XSETID", key, "5-5"),  # no such key
        ("XADD", key, "3-3", "a", "1"),
        ("XSETID", key, "2-0"),  # below the top item
        ("XSETID", key, "bad"),
        ("XSETID", key, "10-0", "ENTRIESADDED", "-1"),
        ("XSETID", key, "10-0", "ENTRIESADDED", "0"),  # below the length
        ("XSETID", key, "10-0", "MAXDELETEDID", "11-0"),
        ("XSETID", key, "10-0", "BOGUS"),
        ("XSETID", key, "10-0", "ENTRIESADDED"),
        ("XSETID", key, "10-0"),
        ("XADD", key, "10-0", "a", "2"),  # equal to the new last ID
        ("XADD", key, "10-*", "a", "3"),
        ("XSETID", key, "10"),  # back to the top item itself
        ("XSETID", key, "3-3"),  # below the top item 10-1
        ("XADD", key, "4-0", "a", "4"),
        ("XDEL", key, "10-1"),
        ("XSETID", key, "3-3"),  # the top is now 3-3 after the XDEL: allowed, as Redis
        ("XADD", key, "3-4", "a", "5"),
        ("XRANGE", key, "-", "+"),
        ("XREVRANGE", key, "+", "-"),
        ("~", "XADD", k2, "*", "a", "1"),
        ("XSETID", k2, f"{FUTURE}-0"),  # a server-assigned stream takes one too
        ("XADD", k2, "*", "a", "2"),
        ("XRANGE", k2, f"{FUTURE}", "+"),
    ])


def test_groups_over_explicit_ids(targets: list[Any], key: str) -> None:
    raw_check(targets, [
        *[("XADD", key, i, "n", i) for i in ("1-1", "2-0", "2-5", "9-9")],
        ("XGROUP", "CREATE", key, "g", "1-1"),
        ("XREADGROUP", "GROUP", "g", "c", "COUNT", "2", "STREAMS", key, ">"),
        ("XPENDING", key, "g"),
        ("XPENDING", key, "g", "-", "+", "10"),
        ("XPENDING", key, "g", "2-1", "+", "10"),
        ("XREADGROUP", "GROUP", "g", "c", "STREAMS", key, "0"),
        ("XREADGROUP", "GROUP", "g", "c", "STREAMS", key, "2-0"),
        ("XACK", key, "g", "2-0", "2-4"),
        ("XCLAIM", key, "g", "d", "0", "2-5", "JUSTID"),
        ("XAUTOCLAIM", key, "g", "e", "0", "0", "JUSTID"),
        ("XREADGROUP", "GROUP", "g", "c", "STREAMS", key, ">"),
        ("XINFO", "GROUPS", key),
        ("XGROUP", "SETID", key, "g", "2-0"),
        ("XREADGROUP", "GROUP", "g", "c", "STREAMS", key, ">"),
    ])


def test_xsetid_counters_are_validated_not_stored(differ: Any, key: str) -> None:
    differ.check([
        S("XADD", key, "1-1", "a", "1"),
        S("XSETID", key, "5-0", "ENTRIESADDED", "100", "MAXDELETEDID", "2-0"),
        S("XINFO", "STREAM", key, mask=[("radix-tree-keys",), ("radix-tree-nodes",)],
          diff="xsetid-counters"),
    ])


def test_mixed_star_and_explicit_ids(differ: Any, key: str) -> None:
    """`*` after a small explicit ID takes the clock (`<now>-0`); an explicit ID below it
    then fails; placeholders compare the order of the IDs."""
    differ.check([
        S("XADD", key, "1-1", "a", "1"),
        S("XADD", key, "*", "a", "2"),
        S("XADD", key, "2-0", "a", "3"),
        S("XADD", key, "*", "a", "4"),
        S("XRANGE", key, "-", "+"),
        S("XRANGE", key, "2", "+"),
        S("XREAD", "STREAMS", key, "1-1"),
        S("XREVRANGE", key, "+", "-", "COUNT", "1"),
    ])


def test_pipelined_star_after_explicit_ids(targets: list[Any], key: str) -> None:
    """A pipeline of plain `XADD k * ...` (coalesced into one engine write) on a stream that
    took an explicit ID answers Redis's next IDs, one by one."""
    replies = []
    for t in targets:
        conn = RespConn(t.port, 2)
        try:
            conn.call("XADD", key, f"{FUTURE}-5", "a", "0")
            replies.append(conn.pipeline([("XADD", key, "*", "a", str(i)) for i in range(5)]))
        finally:
            conn.close()
    want = [("$", f"{FUTURE}-{6 + i}".encode()) for i in range(5)]
    assert all(r == want for r in replies), replies


def test_xsetid_on_a_stream_emptied_by_maxlen_0(targets: list[Any], key: str) -> None:
    """Valkey's "XSETID can set a specific ID": `XADD k MAXLEN 0 * a b` leaves an empty stream
    whose last ID is the trimmed entry's; XSETID may set it lower (nothing live above it).
    topicsrv answered an internal error here (its implicit IDs were not materialised)."""
    raw_check(targets, [("~", "XADD", key, "MAXLEN", "0", "*", "a", "b"), ("~", "XINFO", "STREAM", key),
                        ("XSETID", key, "200-0"),
                        ("XLEN", key), ("XADD", key, "300-1", "c", "d"),
                        ("XADD", key, "100-0", "e", "f")])
