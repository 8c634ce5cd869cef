"""Consumer groups, differential: XGROUP, XREADGROUP, XACK, XPENDING, XCLAIM, XAUTOCLAIM, XINFO
GROUPS|CONSUMERS, in RESP2 and RESP3, with the exact replies and error texts of Redis 7."""

from __future__ import annotations

from typing import Any

import pytest
from compat_harness import S  # type: ignore[import-not-found]

IDLE = ("*", "idle")  # XINFO CONSUMERS: the value after "idle" in every consumer
XP_IDLE = ("*", 2)  # XPENDING extended: the idle column


def adds(key: str, n: int) -> list[Any]:
    return [S("XADD", key, "*", "f", str(i)) for i in range(n)]


@pytest.mark.parametrize("proto", [2, 3])
def test_create_setid_destroy(differ: Any, key: str, proto: int) -> None:
    k = f"{key}:{proto}"
    differ.check([
        S("XGROUP", "CREATE", k, "g", "$"),  # no key, no MKSTREAM
        S("XGROUP", "CREATE", k, "g", "$", "MKSTREAM"),
        S("XGROUP", "CREATE", k, "g", "$"),  # BUSYGROUP
        S("XINFO", "GROUPS", k),
        *adds(k, 3),
        S("XGROUP", "CREATE", k, "g0", "0"),
        S("XGROUP", "CREATE", k, "g1", "0", "ENTRIESREAD", "1"),
        S("XGROUP", "CREATE", k, "g2", "$", "ENTRIESREAD", "-2"),
        S("XGROUP", "CREATE", k, "g3", "{ID 1}"),
        S("XGROUP", "CREATE", k, "g4", "0", "BOGUS"),
        S("XGROUP", "CREATE", k, "g5", "not-an-id"),
        S("XINFO", "GROUPS", k),
        S("XGROUP", "SETID", k, "g", "0"),
        S("XGROUP", "SETID", k, "g0", "$", "ENTRIESREAD", "3"),
        S("XGROUP", "SETID", k, "nope", "0"),
        S("XGROUP", "SETID", k, "g", "{ID 2}", "ENTRIESREAD", "x"),
        S("XINFO", "GROUPS", k),
        S("XGROUP", "DESTROY", k, "g3"),
        S("XGROUP", "DESTROY", k, "g3"),
        S("XGROUP", "DESTROY", "no:such:key", "g3"),
        S("XINFO", "GROUPS", k),
        S("XGROUP", "CREATECONSUMER", k, "g", "c1"),
        S("XGROUP", "CREATECONSUMER", k, "g", "c1"),
        S("XGROUP", "CREATECONSUMER", k, "nope", "c1"),
        S("XGROUP", "DELCONSUMER", k, "g", "c1"),
        S("XGROUP", "DELCONSUMER", k, "g", "c1"),
        S("XGROUP", "FROB", k),
        S("XGROUP", "CREATE", k),
        S("XGROUP", "HELP"),
    ], proto)


@pytest.mark.parametrize("proto", [2, 3])
def test_readgroup_ack_pending(differ: Any, key: str, proto: int) -> None:
    k = f"{key}:{proto}"
    differ.check([
        *adds(k, 5),
        S("XGROUP", "CREATE", k, "g", "0"),
        S("XREADGROUP", "GROUP", "g", "c1", "COUNT", "2", "STREAMS", k, ">"),
        S("XREADGROUP", "GROUP", "g", "c2", "COUNT", "1", "STREAMS", k, ">"),
        S("XREADGROUP", "GROUP", "g", "c1", "STREAMS", k, "0"),
        S("XREADGROUP", "GROUP", "g", "c1", "STREAMS", k, "{ID 1}"),
        S("XREADGROUP", "GROUP", "g", "c1", "COUNT", "1", "STREAMS", k, "0-0"),
        S("XREADGROUP", "GROUP", "g", "c2", "STREAMS", k, "0"),
        S("XINFO", "GROUPS", k),
        S("XINFO", "CONSUMERS", k, "g", mask=[IDLE]),
        S("XPENDING", k, "g"),
        S("XPENDING", k, "g", "-", "+", "10", mask=[XP_IDLE]),
        S("XPENDING", k, "g", "-", "+", "10", "c1", mask=[XP_IDLE]),
        S("XPENDING", k, "g", "IDLE", "100000", "-", "+", "10"),
        S("XPENDING", k, "g", "IDLE", "0", "-", "+", "2", mask=[XP_IDLE]),
        S("XPENDING", k, "g", "{ID 2}", "{ID 3}", "10", "nobody"),
        S("XPENDING", k, "g", "(" + "{ID 1}", "+", "10", mask=[XP_IDLE]),
        S("XPENDING", k, "g", "-", "+", "0"),
        S("XPENDING", k, "g", "-", "+", "-1"),
        S("XPENDING", k, "g", "-", "+"),
        S("XPENDING", k, "g", "-", "+", "x"),
        S("XPENDING", k, "g", "IDLE", "x", "-", "+", "10"),
        S("XPENDING", k, "nope"),
        S("XPENDING", "no:such:key", "g"),
        S("XACK", k, "g", "{ID 1}", "{ID 1}", "{ID 3}"),
        S("XACK", k, "g", "{ID 1}"),
        S("XACK", k, "g", "bad-id"),
        S("XACK", k, "nope", "{ID 2}"),
        S("XACK", "no:such:key", "g", "{ID 2}"),
        S("XPENDING", k, "g"),
        S("XREADGROUP", "GROUP", "g", "c1", "NOACK", "STREAMS", k, ">"),
        S("XPENDING", k, "g"),
        S("XREADGROUP", "GROUP", "g", "c1", "STREAMS", k, ">"),
        S("XINFO", "GROUPS", k),
        S("XREADGROUP", "GROUP", "nope", "c1", "STREAMS", k, ">"),
        S("XREADGROUP", "GROUP", "g", "c1", "STREAMS", "no:such:key", ">"),
        S("XREADGROUP", "GROUP", "g", "c1", "STREAMS", k),
        S("XREADGROUP", "GROUP", "g", "STREAMS", k, ">"),
        S("XREADGROUP", "GROUP", "g", "c1", "COUNT", "x", "STREAMS", k, ">"),
        S("XREADGROUP", "GROUP", "g", "c1", "BLOCK", "-1", "STREAMS", k, ">"),
        S("XREADGROUP", "GROUP", "g", "c1", "STREAMS", k, "$"),
        S("XREADGROUP", "GROUP", "g", "c1", "FOO", "STREAMS", k, ">"),
        S("XREADGROUP", "STREAMS", k, ">"),
        S("XREADGROUP", "GROUP", "g", "c1", "BLOCK", "10", "STREAMS", k, ">"),
    ], proto)


@pytest.mark.parametrize("proto", [2, 3])
def test_deleted_pending_entries(differ: Any, key: str, proto: int) -> None:
    k = f"{key}:{proto}"
    differ.check([
        *adds(k, 4),
        S("XGROUP", "CREATE", k, "g", "0"),
        S("XREADGROUP", "GROUP", "g", "c1", "COUNT", "2", "STREAMS", k, ">"),
        S("XDEL", k, "{ID 2}"),
        S("XREADGROUP", "GROUP", "g", "c1", "STREAMS", k, "0"),
        S("XINFO", "GROUPS", k),
        S("XREADGROUP", "GROUP", "g", "c1", "STREAMS", k, ">"),
        S("XINFO", "GROUPS", k),
        S("XDEL", k, "{ID 4}"),
        S("XINFO", "GROUPS", k),
        S("XAUTOCLAIM", k, "g", "c2", "0", "0-0", "COUNT", "10"),
        S("XPENDING", k, "g"),
        S("XCLAIM", k, "g", "c3", "0", "{ID 1}", "{ID 3}", "JUSTID"),
        S("XINFO", "CONSUMERS", k, "g", mask=[IDLE]),
    ], proto)


@pytest.mark.parametrize("proto", [2, 3])
def test_claim_and_autoclaim(differ: Any, key: str, proto: int) -> None:
    k = f"{key}:{proto}"
    differ.check([
        *adds(k, 6),
        S("XGROUP", "CREATE", k, "g", "0"),
        S("XREADGROUP", "GROUP", "g", "c1", "STREAMS", k, ">"),
        S("XCLAIM", k, "g", "c2", "100000", "{ID 1}"),  # not idle long enough
        S("XINFO", "CONSUMERS", k, "g", mask=[IDLE]),  # ... and c2 was not created
        S("XCLAIM", k, "g", "c2", "0", "{ID 1}", "{ID 2}"),
        S("XCLAIM", k, "g", "c2", "0", "{ID 3}", "JUSTID"),
        S("XCLAIM", k, "g", "c2", "0", "{ID 3}", "RETRYCOUNT", "7", "IDLE", "500"),
        S("XPENDING", k, "g", "-", "+", "10", mask=[XP_IDLE]),
        S("XPENDING", k, "g", "IDLE", "400", "-", "+", "10", mask=[XP_IDLE]),
        S("XCLAIM", k, "g", "c2", "0", "{ID 4}", "TIME", "1", "JUSTID"),
        S("XPENDING", k, "g", "IDLE", "100000", "-", "+", "10", mask=[XP_IDLE]),
        S("XCLAIM", k, "g", "c2", "-5", "{ID 4}", "JUSTID"),
        S("XCLAIM", k, "g", "c2", "0", "{ID 4}", "FOO"),
        S("XCLAIM", k, "g", "c2", "0", "{ID 4}", "IDLE", "x"),
        S("XCLAIM", k, "g", "c2", "0", "{ID 4}", "TIME", "x"),
        S("XCLAIM", k, "g", "c2", "0", "{ID 4}", "RETRYCOUNT", "x"),
        S("XCLAIM", k, "g", "c2", "0", "{ID 4}", "LASTID", "x"),
        S("XCLAIM", k, "g", "c2", "x", "{ID 4}"),
        S("XCLAIM", k, "g", "c2", "0", "{ID 4}", "IDLE"),
        S("XCLAIM", k, "g", "c2", "0", "bad"),
        S("XCLAIM", k, "g", "c2", "0"),
        S("XCLAIM", k, "nope", "c2", "0", "{ID 4}"),
        S("XCLAIM", "no:such:key", "g", "c2", "0", "{ID 4}"),
        S("XACK", k, "g", "{ID 5}", "{ID 6}"),
        S("XCLAIM", k, "g", "c9", "0", "{ID 5}", "JUSTID"),  # acked: not pending any more
        S("XCLAIM", k, "g", "c9", "0", "{ID 5}", "FORCE", "JUSTID"),
        S("XGROUP", "SETID", k, "g", "0"),
        S("XCLAIM", k, "g", "c9", "0", "{ID 6}", "FORCE", "LASTID", "{ID 3}", "JUSTID"),
        S("XINFO", "GROUPS", k),
        S("XAUTOCLAIM", k, "g", "c3", "0", "0-0", "COUNT", "2"),
        S("XAUTOCLAIM", k, "g", "c3", "0", "{ID 3}", "COUNT", "2", "JUSTID"),
        S("XAUTOCLAIM", k, "g", "c3", "100000", "-", "COUNT", "1"),
        S("XAUTOCLAIM", k, "g", "c3", "0", "-"),
        S("XAUTOCLAIM", k, "g", "c3", "0", "0", "COUNT", "0"),
        S("XAUTOCLAIM", k, "g", "c3", "0", "0", "COUNT", "x"),
        S("XAUTOCLAIM", k, "g", "c3", "x", "0"),
        S("XAUTOCLAIM", k, "g", "c3", "0", "bad"),
        S("XAUTOCLAIM", k, "g", "c3", "0", "0", "BOGUS"),
        S("XAUTOCLAIM", k, "nope", "c3", "0", "0"),
        S("XAUTOCLAIM", k, "g", "c3", "0"),
        S("XPENDING", k, "g"),
        S("XINFO", "CONSUMERS", k, "g", mask=[IDLE]),
        S("XINFO", "CONSUMERS", k, "nope"),
        S("XINFO", "GROUPS", "no:such:key"),
        S("XGROUP", "DELCONSUMER", k, "g", "c3"),
        S("XPENDING", k, "g"),
    ], proto)


def test_pipelined_group_commands(targets: list[Any], key: str) -> None:
    """A whole consumer loop in one pipeline write gives the same replies as Redis."""
    from compat_harness import Ids, encode, show  # type: ignore[import-not-found]

    results = []
    for t in targets:
        conn = t.conn(2)
        ids = Ids()
        cmds = [("XGROUP", "CREATE", key, "g", "$", "MKSTREAM"),
                ("XADD", key, "*", "a", "1"), ("XADD", key, "*", "a", "2"),
                ("XREADGROUP", "GROUP", "g", "c", "COUNT", "10", "STREAMS", key, ">"),
                ("XPENDING", key, "g"), ("XINFO", "GROUPS", key)]
        conn.send_raw(b"".join(encode(c) for c in cmds))
        replies = [show(ids.norm(conn.read())) for _ in cmds]
        ack = conn.call("XACK", key, "g", ids.from_ph["<ID 1>"], ids.from_ph["<ID 2>"])
        replies.append(show(ack))
        results.append(replies)
        conn.close()
    assert all(r == results[0] for r in results), results
    assert results[0][-1] == ":2"
