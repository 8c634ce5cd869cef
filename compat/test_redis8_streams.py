"""Redis 8.2's XDELEX / XACKDEL and `KEEPREF | DELREF | ACKED` on XADD/XTRIM, and Redis 8.4's
`XREADGROUP ... CLAIM min-idle-time`, on both RESP I/O paths.

Debian's redis-server 7.0 has none of these: each test runs against topicsrv and asserts the
replies Redis documents (redis.io command pages and redis's own stream-cgroups tests); against a
reference server that has the command (Redis >= 8.2 / 8.4) it runs there too. The one designed
difference (an ACKED trim stops at the first entry still referenced: `acked-trim-prefix` in
docs/redis-compatibility.md) is tested on topicsrv only.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from compat_harness import Target, encode, per_io_path  # type: ignore[import-not-found]

server, ours = per_io_path("topicsrv-r8-")  # this module runs once per RESP I/O path


def _version(t: Target) -> tuple[int, ...]:
    c = t.conn()
    try:
        info = c.call("INFO", "server")[1].decode()
    finally:
        c.close()
    for line in info.splitlines():
        if line.startswith("redis_version:"):
            return tuple(int(x) for x in line.split(":")[1].split(".")[:2])
    return (0,)


def _with(targets: list[Target], since: tuple[int, int]) -> list[Target]:
    """topicsrv, plus the reference server when it is Redis >= `since`."""
    out = [t for t in targets if t.name != "redis" or _version(t) >= since]
    if not out:
        pytest.skip(f"the reference server predates Redis {since}")
    return out


@pytest.fixture(scope="module")
def r82(targets: list[Target]) -> list[Target]:
    return _with(targets, (8, 2))


@pytest.fixture(scope="module")
def r84(targets: list[Target]) -> list[Target]:
    return _with(targets, (8, 4))


def plain(tree: Any) -> Any:
    """A RESP tree as plain values: bytes, int, None, lists; an error as ("ERR", text)."""
    kind = tree[0]
    if kind in "*~>":
        return [plain(t) for t in tree[1]]
    if kind == "%":
        return {plain(k): plain(v) for k, v in tree[1]}
    if kind == "-":
        return ("ERR", tree[1])
    if kind == "+":
        return tree[1].encode()
    return tree[1] if len(tree) > 1 else None


class Conn:
    def __init__(self, t: Target, protocol: int = 2) -> None:
        self.raw = t.conn(protocol)
        self.name = t.name

    def __call__(self, *args: Any) -> Any:
        return plain(self.raw.call(*args))


def conns(targets: list[Target], key: str) -> Iterator[tuple[Conn, str]]:
    for t in targets:
        c = Conn(t)
        c("DEL", key)
        yield c, key
        c.raw.close()


def ids(c: Conn, key: str) -> list[bytes]:
    return [e[0] for e in c("XRANGE", key, "-", "+")]


def pending(c: Conn, key: str, group: str) -> list[bytes]:
    return [p[0] for p in c("XPENDING", key, group, "-", "+", "100")]


def two_groups_read_both(c: Conn, k: str) -> None:
    c("XADD", k, "1-0", "f", "v")
    c("XADD", k, "2-0", "f", "v")
    c("XGROUP", "CREATE", k, "group1", "0")
    c("XGROUP", "CREATE", k, "group2", "0")
    c("XREADGROUP", "GROUP", "group1", "consumer1", "STREAMS", k, ">")
    c("XREADGROUP", "GROUP", "group2", "consumer2", "STREAMS", k, ">")


# ---- XACKDEL ---------------------------------------------------------------------------------


def test_xackdel_docs_example(r82: list[Target], key: str) -> None:
    for c, k in conns(r82, key):
        c("XADD", k, "1-0", "field1", "value1")
        c("XADD", k, "2-0", "field2", "value2")
        c("XGROUP", "CREATE", k, "mygroup", "0")
        c("XREADGROUP", "GROUP", "mygroup", "consumer1", "COUNT", "2", "STREAMS", k, ">")
        assert c("XPENDING", k, "mygroup") == [2, b"1-0", b"2-0", [[b"consumer1", b"2"]]], c.name
        assert c("XACKDEL", k, "mygroup", "KEEPREF", "IDS", "2", "1-0", "2-0") == [1, 1], c.name
        assert c("XPENDING", k, "mygroup") == [0, None, None, None], c.name
        assert c("XRANGE", k, "-", "+") == [], c.name


def test_xackdel_policies(r82: list[Target], key: str) -> None:
    empty = [0, None, None, None]
    for c, k in conns(r82, key):  # DELREF: the entries leave every group's PEL
        two_groups_read_both(c, k)
        assert c("XACKDEL", k, "group1", "DELREF", "IDS", "2", "1-0", "2-0") == [1, 1], c.name
        assert c("XLEN", k) == 0
        assert c("XPENDING", k, "group1") == c("XPENDING", k, "group2") == empty, c.name
        assert c("XACKDEL", k, "group2", "DELREF", "IDS", "2", "1-0", "2-0") == [-1, -1], c.name
    for c, k in conns(r82, key):  # ACKED: deleted once every group has acknowledged them
        two_groups_read_both(c, k)
        assert c("XACKDEL", k, "group1", "ACKED", "IDS", "2", "1-0", "2-0") == [2, 2], c.name
        assert c("XLEN", k) == 2
        assert c("XPENDING", k, "group1") == empty
        assert c("XPENDING", k, "group2") == [2, b"1-0", b"2-0", [[b"consumer2", b"2"]]], c.name
        assert c("XACKDEL", k, "group2", "ACKED", "IDS", "2", "1-0", "2-0") == [1, 1], c.name
        assert c("XLEN", k) == 0
    for c, k in conns(r82, key):  # KEEPREF (the default): other groups keep their references
        two_groups_read_both(c, k)
        assert c("XACKDEL", k, "group1", "KEEPREF", "IDS", "2", "1-0", "2-0") == [1, 1], c.name
        assert c("XLEN", k) == 0
        assert c("XPENDING", k, "group2") == [2, b"1-0", b"2-0", [[b"consumer2", b"2"]]], c.name
        assert c("XACKDEL", k, "group2", "IDS", "2", "1-0", "2-0") == [1, 1], c.name
        assert c("XPENDING", k, "group2") == empty, c.name


def test_xackdel_acked_keeps_what_another_group_has_not_read(r82: list[Target], key: str) -> None:
    for c, k in conns(r82, key):
        c("XADD", k, "1-0", "f", "1")
        c("XGROUP", "CREATE", k, "g", "0")
        c("XGROUP", "CREATE", k, "later", "0")
        c("XREADGROUP", "GROUP", "g", "c", "STREAMS", k, ">")
        assert c("XACKDEL", k, "g", "ACKED", "IDS", "1", "1-0") == [2], c.name
        assert ids(c, k) == [b"1-0"] and pending(c, k, "g") == [], c.name


def test_xackdel_arguments(r82: list[Target], key: str) -> None:
    numids = ("ERR", "ERR Number of IDs must be a positive integer")
    for c, k in conns(r82, key):
        for args in ([], [k], [k, "g"]):
            assert c("XACKDEL", *args) == ("ERR", "ERR wrong number of arguments for 'xackdel' command")
        assert c("XACKDEL", k, "g", "IDS", "2", "1-1", "2-2") == [-1, -1], c.name  # no key
        c("XADD", k, "1-0", "f", "v")
        assert c("XACKDEL", k, "g", "IDS", "2", "1-1", "2-2") == [-1, -1], c.name  # no group
        c("XGROUP", "CREATE", k, "g", "0")
        for n in ("abc", "0", "-5"):
            assert c("XACKDEL", k, "g", "IDS", n, "1-1") == numids, c.name
        assert c("XACKDEL", k, "g", "IDS", "3", "1-1", "2-2") == (
            "ERR", "ERR The `numids` parameter must match the number of arguments"), c.name
        assert c("XACKDEL", k, "g", "IDS", "1", "1-1", "2-2") == ("ERR", "ERR syntax error")
        for a, b in (("KEEPREF", "DELREF"), ("KEEPREF", "ACKED"), ("DELREF", "ACKED")):
            assert c("XACKDEL", k, "g", a, b, "IDS", "1", "1-1") == ("ERR", "ERR syntax error")
        assert c("XACKDEL", k, "g", "IDS", "1", "nope") == (
            "ERR", "ERR Invalid stream ID specified as stream command argument"), c.name
        ids50 = [f"{i}-1" for i in range(50)]
        assert c("XACKDEL", k, "g", "IDS", "50", *ids50) == [-1] * 50
        assert c("XLEN", k) == 1, c.name  # no failed form deleted anything


# ---- XDELEX ----------------------------------------------------------------------------------


def test_xdelex(r82: list[Target], key: str) -> None:
    for c, k in conns(r82, key):
        assert c("XDELEX", k, "IDS", "1", "1-0") == [-1], c.name  # no key
        for i in range(5):
            c("XADD", k, f"{i}-1", "item", str(i))
        # the docs' example: IDs that are not there
        assert c("XDELEX", k, "KEEPREF", "IDS", "2", "1526919030474-55", "1526919030474-56") == [-1, -1]
        c("XGROUP", "CREATE", k, "mygroup", "0")
        c("XREADGROUP", "GROUP", "mygroup", "consumer1", "STREAMS", k, ">")
        ids5 = ["0-1", "1-1", "2-1", "3-1", "4-1"]
        assert c("XDELEX", k, "ACKED", "IDS", "5", *ids5) == [2] * 5, c.name
        c("XGROUP", "DESTROY", k, "mygroup")  # no groups: nothing is referenced
        assert c("XDELEX", k, "ACKED", "IDS", "5", *ids5) == [1] * 5, c.name
        assert c("XLEN", k) == 0


def test_xdelex_acked_follows_the_slowest_group(r82: list[Target], key: str) -> None:
    for c, k in conns(r82, key):
        for i in range(1, 6):
            c("XADD", k, f"{i}-0", f"f{i}", f"v{i}")
        c("XGROUP", "CREATE", k, "group1", "1-0")
        c("XGROUP", "CREATE", k, "group2", "3-0")
        assert c("XDELEX", k, "ACKED", "IDS", "1", "1-0") == [1], c.name
        assert c("XDELEX", k, "ACKED", "IDS", "1", "2-0") == [2], c.name
        c("XGROUP", "DESTROY", k, "group1")
        assert c("XDELEX", k, "ACKED", "IDS", "1", "2-0") == [1], c.name
        # the IDS block may come first; DELREF drops the references of an ID already gone
        c("XREADGROUP", "GROUP", "group2", "a", "STREAMS", k, ">")
        c("XDEL", k, "4-0")
        assert c("XDELEX", k, "IDS", "2", "4-0", "5-0", "DELREF") == [-1, 1], c.name
        assert pending(c, k, "group2") == [], c.name
        assert c("XDELEX", k, "IDS", "1", "3-0", "BOGUS") == ("ERR", "ERR syntax error")
        assert c("XDELEX", k, "IDS") == ("ERR", "ERR wrong number of arguments for 'xdelex' command")


# ---- KEEPREF | DELREF | ACKED on XTRIM / XADD -------------------------------------------------


def _ten_with_pending(c: Conn, k: str) -> None:
    """1-0..10-0; group g delivered 1-0..6-0 to c, which acked 1-0 and 3-0."""
    for i in range(1, 11):
        c("XADD", k, f"{i}-0", "f", str(i))
    c("XGROUP", "CREATE", k, "g", "0")
    c("XREADGROUP", "GROUP", "g", "c", "COUNT", "6", "STREAMS", k, ">")
    c("XACK", k, "g", "1-0", "3-0")


def test_xtrim_ref_policies(r82: list[Target], key: str) -> None:
    keep = [b"2-0", b"4-0", b"5-0", b"6-0"]
    for policy, left in (("KEEPREF", keep), ("DELREF", [])):
        for c, k in conns(r82, key):
            _ten_with_pending(c, k)
            assert c("XTRIM", k, "MAXLEN", "=", "3", policy) == 7, c.name
            assert ids(c, k) == [b"8-0", b"9-0", b"10-0"]
            assert pending(c, k, "g") == left, (c.name, policy)
            c("DEL", k)
            _ten_with_pending(c, k)
            assert c("XTRIM", k, "MINID", "=", "9-0", policy) == 8, c.name
            assert pending(c, k, "g") == left, (c.name, policy)


def test_trim_acked_stops_where_a_group_has_not_read(r82: list[Target], key: str) -> None:
    for c, k in conns(r82, key):
        for i in range(1, 11):
            c("XADD", k, f"{i}-0", "f", str(i))
        assert c("XTRIM", k, "MAXLEN", "=", "9", "ACKED") == 1  # no groups: a plain trim
        c("XGROUP", "CREATE", k, "at-end", "$")
        c("XGROUP", "CREATE", k, "behind", "4-0")
        assert c("XTRIM", k, "MAXLEN", "=", "3", "ACKED") == 3, c.name
        assert ids(c, k) == [f"{i}-0".encode() for i in range(5, 11)], c.name
    for c, k in conns(r82, key):
        for i in range(1, 6):
            c("XADD", k, f"{i}-0", "f", str(i))
        c("XGROUP", "CREATE", k, "g", "0")
        c("XREADGROUP", "GROUP", "g", "c", "COUNT", "3", "STREAMS", k, ">")
        c("XACK", k, "g", "1-0", "2-0")
        assert c("XADD", k, "MAXLEN", "=", "2", "ACKED", "6-0", "f", "6") == b"6-0"
        assert ids(c, k) == [b"3-0", b"4-0", b"5-0", b"6-0"], c.name  # 3 pending, 4 unread
        assert c("XADD", k, "DELREF", "MAXLEN", "=", "2", "7-0", "f", "7") == b"7-0"
        assert pending(c, k, "g") == [], c.name


def test_ref_policy_position_case_and_errors(r82: list[Target], key: str) -> None:
    for c, k in conns(r82, key):
        for i in range(1, 6):
            c("XADD", k, f"{i}-0", "f", str(i))
        assert c("XADD", k, "keepref", "NOMKSTREAM", "MAXLEN", "5", "6-0", "f", "6") == b"6-0"
        assert c("XADD", k, "MAXLEN", "5", "Acked", "7-0", "f", "7") == b"7-0"
        assert c("XTRIM", k, "delref", "MAXLEN", "4") == 1
        assert c("XTRIM", k, "MINID", "5-0", "ACKED") == 1
        assert c("XADD", k, "DELREF", "8-0", "f", "8") == b"8-0"  # no trim: nothing to act on
        assert c("XADD", k, "9-0", "ACKED", "v") == b"9-0"  # after the ID: a field
        assert ids(c, k) == [b"5-0", b"6-0", b"7-0", b"8-0", b"9-0"], c.name
        assert c("XADD", k, "KEEPREF", "DELREF", "*", "f", "v") == (
            "ERR", "ERR Invalid stream ID specified as stream command argument"), c.name
        assert c("XTRIM", k, "MAXLEN", "1", "ACKED", "DELREF") == ("ERR", "ERR syntax error")
        assert c("XADD", k, "KEEPREF", "*")[0] == "ERR"
        assert c("XLEN", k) == 5


def test_acked_trim_is_an_eviction_from_the_front(ours: Target | None, key: str) -> None:
    """acked-trim-prefix: Redis also drops 1-0 and 3-0 here (acked, behind pending 2-0);
    topicsrv evicts only the acked run at the front, so no reader crosses a silent hole."""
    if ours is None:
        pytest.skip("COMPAT_REFERENCE_ONLY")
    for c, k in conns([ours], key):
        _ten_with_pending(c, k)
        assert c("XTRIM", k, "MAXLEN", "=", "3", "ACKED") == 1
        assert ids(c, k)[0] == b"2-0"
        c("XACK", k, "g", "2-0", "4-0", "5-0", "6-0")
        assert c("XTRIM", k, "MAXLEN", "=", "3", "ACKED") == 5  # up to 7-0, still unread
        assert ids(c, k) == [b"7-0", b"8-0", b"9-0", b"10-0"]


# ---- XREADGROUP ... CLAIM --------------------------------------------------------------------


def _claimable(c: Conn, k: str, n: int = 2, read: int = 1, wait: float = 0.06) -> None:
    for i in range(1, n + 1):
        c("XADD", k, f"{i}-0", "f", f"v{i}")
    c("XGROUP", "CREATE", k, "group1", "0")
    c("XREADGROUP", "GROUP", "group1", "consumer1", "COUNT", str(read), "STREAMS", k, ">")
    time.sleep(wait)


def test_claim_reply_shape_and_ownership(r84: list[Target], key: str) -> None:
    for c, k in conns(r84, key):
        _claimable(c, k)
        got = c("XREADGROUP", "GROUP", "group1", "consumer2", "CLAIM", "50", "STREAMS", k, ">")
        [[name, entries]] = got
        assert name == k.encode()
        (cid, cfields, idle, count), new = entries
        assert (cid, cfields, count) == (b"1-0", [b"f", b"v1"], 1) and idle >= 50, (c.name, got)
        assert new == [b"2-0", [b"f", b"v2"], 0, 0], c.name
        rows = c("XPENDING", k, "group1", "-", "+", "10")
        assert [(r[0], r[1], r[3]) for r in rows] == [(b"1-0", b"consumer2", 2),
                                                     (b"2-0", b"consumer2", 1)], c.name
        raw = c.raw
        raw.send_raw(encode(["XREADGROUP", "GROUP", "group1", "c3", "CLAIM", "0", "STREAMS", k, ">"]))
        time.sleep(0.05)
        buf = raw.sock.recv(65536)  # idle and count are integers (Redis 8.4.2)
        assert b"*4\r\n$3\r\n1-0\r\n*2\r\n$1\r\nf\r\n$2\r\nv1\r\n:" in buf, (c.name, buf)
        assert b"\r\n:2\r\n" in buf, (c.name, buf)


def test_claim_count_order_and_noack(r84: list[Target], key: str) -> None:
    for c, k in conns(r84, key):
        _claimable(c, k, n=3, read=3)
        now_ms = int(c("TIME")[0]) * 1000
        for i, back in ((1, 20000), (2, 50000), (3, 30000)):  # 2-0 is the idlest
            c("XCLAIM", k, "group1", "consumer1", "0", f"{i}-0", "TIME", str(now_ms - back), "JUSTID")
        got = c("XREADGROUP", "GROUP", "group1", "c2", "COUNT", "2", "CLAIM", "10000", "STREAMS", k, ">")
        assert [e[0] for e in got[0][1]] == [b"2-0", b"3-0"], c.name
        c("XADD", k, "4-0", "f", "v4")
        got = c("XREADGROUP", "GROUP", "group1", "c2", "NOACK", "CLAIM", "10000", "STREAMS", k, ">")
        assert [(e[0], e[3]) for e in got[0][1]] == [(b"1-0", 1), (b"4-0", 0)], c.name
        assert pending(c, k, "group1") == [b"1-0", b"2-0", b"3-0"], c.name  # NOACK: new only
        got = c("XREADGROUP", "GROUP", "group1", "c2", "CLAIM", "1000000", "STREAMS", k, ">")
        assert got is None, c.name  # nothing idle enough, nothing new
        got = c("XREADGROUP", "GROUP", "group1", "c2", "CLAIM", "0", "STREAMS", k, "0")
        assert [len(e) for e in got[0][1]] == [2, 2, 2], c.name  # history: CLAIM ignored


def test_claim_arguments(r84: list[Target], key: str) -> None:
    not_int = ("ERR", "ERR min-idle-time is not an integer")
    for c, k in conns(r84, key):
        _claimable(c, k, wait=0)
        for v in ("test", "5.5", "+10", "-0", "10e"):
            assert c("XREADGROUP", "GROUP", "group1", "c", "CLAIM", v, "STREAMS", k, ">") == not_int
        assert c("XREADGROUP", "GROUP", "group1", "c", "CLAIM", "-10", "STREAMS", k, ">") == (
            "ERR", "ERR min-idle-time must be a positive integer")
        assert c("XREADGROUP", "GROUP", "group1", "c", "CLAIM", "STREAMS", k, ">") == not_int
        assert c("XREADGROUP", "GROUP", "group1", "c", "CLAIM", "10", "CLAIM", "COUNT", "1",
                 "STREAMS", k, ">") == not_int
        assert c("XREADGROUP", "GROUP", "group1", "CLAIM", "50", "c", "STREAMS", k, ">") == (
            "ERR", "ERR syntax error")
        got = c("XREAD", "COUNT", "2", "CLAIM", "10", "STREAMS", k, "0-0")
        assert got[0] == "ERR" and got[1].startswith("ERR The CLAIM option is only supported"), c.name


def test_claim_block_wakes_when_an_entry_becomes_claimable(r84: list[Target], key: str) -> None:
    for c, k in conns(r84, key):
        _claimable(c, k, n=1, wait=0)
        start = time.monotonic()
        got = c("XREADGROUP", "GROUP", "group1", "c2", "BLOCK", "3000", "CLAIM", "150", "STREAMS", k, ">")
        took = time.monotonic() - start
        assert [e[0] for e in got[0][1]] == [b"1-0"], c.name
        assert 0.1 <= took < 2.0, (c.name, took)
        start = time.monotonic()
        got = c("XREADGROUP", "GROUP", "group1", "c2", "BLOCK", "100", "CLAIM", "500", "STREAMS", k, ">")
        assert got is None and time.monotonic() - start >= 0.09, c.name


def test_claim_resp3(r84: list[Target], key: str) -> None:
    for t in r84:
        c = Conn(t, protocol=3)
        c("DEL", key)
        _claimable(c, key, n=2, read=1, wait=0)
        got = c("XREADGROUP", "GROUP", "group1", "c2", "CLAIM", "0", "STREAMS", key, ">")
        entries = got[key.encode()]
        assert [(e[0], e[3]) for e in entries] == [(b"1-0", 1), (b"2-0", 0)], t.name
        assert all(isinstance(e[2], int) for e in entries)
        c.raw.close()


# ---- COMMAND INFO / DOCS ---------------------------------------------------------------------


def test_command_info_and_docs(r82: list[Target]) -> None:
    for t in r82:
        c = Conn(t)
        info = c("COMMAND", "INFO", "xdelex", "xackdel")
        assert [(i[0], i[1]) for i in info] == [(b"xdelex", -5), (b"xackdel", -6)], t.name
        docs = c("COMMAND", "DOCS", "xackdel")
        doc = dict(zip(docs[1][::2], docs[1][1::2], strict=True))
        names = [dict(zip(a[::2], a[1::2], strict=True))[b"name"] for a in doc[b"arguments"]]
        assert names[:2] == [b"key", b"group"], (t.name, names)
        assert doc[b"since"] == b"8.2.0"
        if t.name == "topicsrv" or _version(t) >= (8, 4):
            docs = c("COMMAND", "DOCS", "xreadgroup")
            doc = dict(zip(docs[1][::2], docs[1][1::2], strict=True))
            tokens = [dict(zip(a[::2], a[1::2], strict=True)).get(b"token") for a in doc[b"arguments"]]
            assert b"CLAIM" in tokens, t.name
        c.raw.close()
