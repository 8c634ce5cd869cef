"""Idempotent XADD (Redis 8.6): `XADD ... IDMP pid iid | IDMPAUTO pid`, XCFGSET, the XINFO
STREAM idmp fields, and the idempotency table across a restart of a real server process.

Debian's redis-server 7.0 has none of this, so topicsrv's replies are checked against what the
Redis 8.6 docs and Redis's own test suite (tests/unit/type/stream.tcl) document; the restart
tests (kill -9 and clean stop) are topicsrv's guarantee: a retried XADD IDMP, or a retried HTTP
write with the same `idempotency_key`, returns the original ID and appends nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import redis
from compat_harness import RespConn  # type: ignore[import-not-found]

from conftest import JsonClient


@pytest.fixture
def r(server: Any) -> Iterator[RespConn]:
    conn = RespConn(server.resp_port)
    try:
        yield conn
    finally:
        conn.close()


def ok(conn: RespConn, *args: str | bytes) -> Any:
    tree = conn.call(*args)
    assert tree[0] != "-", f"{args}: {tree}"
    return tree[1] if len(tree) > 1 else None


def err(conn: RespConn, *args: str | bytes) -> str:
    tree = conn.call(*args)
    assert tree[0] == "-", f"{args}: expected an error, got {tree}"
    return str(tree[1])


def info(conn: RespConn, key: str) -> dict[bytes, Any]:
    items = ok(conn, "XINFO", "STREAM", key)
    return {k[1]: v[1] if len(v) > 1 else None for k, v in zip(items[0::2], items[1::2], strict=True)}


def test_invalid_syntax_has_redis_texts(r: RespConn, key: str) -> None:
    cases = [
        (("IDMP", "p1", "*", "f", "v"), "ERR Invalid stream ID specified as stream command argument"),
        (("IDMP", "p1", "iid1", "1-1", "f", "v"), "ERR IDMP/IDMPAUTO can be used only with auto-generated IDs"),
        (("IDMPAUTO", "p1", "1-1", "f", "v"), "ERR IDMP/IDMPAUTO can be used only with auto-generated IDs"),
        (("IDMP", "p1", "iid1", "IDMP", "p2", "iid2", "*", "f", "v"), "ERR IDMP/IDMPAUTO specified multiple times"),
        (("IDMPAUTO", "p1", "IDMP", "p2", "iid2", "*", "f", "v"), "ERR IDMP/IDMPAUTO specified multiple times"),
        (("IDMP", "p1", "iid1", "IDMPAUTO", "p2", "*", "f", "v"), "ERR IDMP/IDMPAUTO specified multiple times"),
        (("IDMP", "", "iid1", "*", "f", "v"), "ERR IDMP requires a non-empty producer ID"),
        (("IDMP", "p1", "", "*", "f", "v"), "ERR IDMP requires a non-empty idempotent ID"),
        (("IDMPAUTO", "", "*", "f", "v"), "ERR IDMPAUTO requires a non-empty producer ID"),
        (("IDMP", "p1", "iid1", "*", "f"), "ERR wrong number of arguments for 'xadd' command"),
    ]
    for args, text in cases:
        assert err(r, "XADD", key, *args) == text, args
    assert ok(r, "EXISTS", key) == 0  # nothing was created


def test_duplicate_returns_the_original_id_and_appends_nothing(r: RespConn, key: str) -> None:
    first = ok(r, "XADD", key, "IDMP", "p1", "payment-abc", "*", "amount", "100", "currency", "USD")
    again = ok(r, "XADD", key, "IDMP", "p1", "payment-abc", "MAXLEN", "0", "*", "amount", "200")
    assert again == first
    assert ok(r, "XLEN", key) == 1  # the duplicate neither appended nor trimmed
    entries = ok(r, "XRANGE", key, "-", "+")
    assert [v[1] for v in entries[0][1][1][1]] == [b"amount", b"100", b"currency", b"USD"]
    # another iid of the same producer, and the same iid of another producer, are new entries
    other = ok(r, "XADD", key, "IDMP", "p1", "payment-def", "*", "amount", "100")
    p2 = ok(r, "XADD", key, "IDMP", "p2", "payment-abc", "*", "amount", "100")
    assert len({first, other, p2}) == 3
    assert ok(r, "XADD", key, "IDMP", "p2", "payment-abc", "*", "x", "y") == p2
    # binary-safe ids; NOMKSTREAM on a missing key is nil, as without IDMP
    assert ok(r, "XADD", key, "IDMP", b"\x00\xff", b"\x01", "*", "f", "v") == \
        ok(r, "XADD", key, "IDMP", b"\x00\xff", b"\x01", "*", "f", "w")
    assert r.call("XADD", key + ":none", "NOMKSTREAM", "IDMP", "p", "i", "*", "f", "v") == ("nullbulk",)
    assert ok(r, "XLEN", key) == 4


def test_idmpauto_derives_the_id_from_the_pairs_in_any_order(r: RespConn, key: str) -> None:
    a = ok(r, "XADD", key, "IDMPAUTO", "p1", "*", "f1", "a", "f2", "b", "f3", "c")
    assert ok(r, "XADD", key, "IDMPAUTO", "p1", "*", "f2", "b", "f3", "c", "f1", "a") == a
    assert ok(r, "XADD", key, "IDMPAUTO", "p1", "*", "f3", "c", "f1", "x", "f2", "b") != a
    assert ok(r, "XADD", key, "IDMPAUTO", "p1", "*", "field1", "value") != \
        ok(r, "XADD", key, "IDMPAUTO", "p1", "*", "field2", "value")  # field names matter
    assert ok(r, "XADD", key, "IDMPAUTO", "p2", "*", "f1", "a", "f2", "b", "f3", "c") != a
    assert ok(r, "XLEN", key) == 5


def test_transaction_deduplicates_inside_exec(r: RespConn, key: str) -> None:
    ok(r, "MULTI")
    for iid in ("req-1", "req-2", "req-1", "req-3"):
        assert r.call("XADD", key, "IDMP", "p1", iid, "*", "f", "v") == ("+", "QUEUED")
    got = [t[1] for t in ok(r, "EXEC")]
    assert got[0] == got[2] and len(set(got)) == 3
    assert ok(r, "XLEN", key) == 3


PLAIN_FIELDS = [b"length", b"radix-tree-keys", b"radix-tree-nodes", b"last-generated-id",
                b"max-deleted-entry-id", b"entries-added", b"recorded-first-entry-id"]
IDMP_FIELDS = [b"idmp-duration", b"idmp-maxsize", b"pids-tracked", b"iids-tracked", b"iids-added",
               b"iids-duplicates"]
TAIL_FIELDS = [b"groups", b"first-entry", b"last-entry"]


def _names(r: RespConn, key: str, *full: str) -> list[bytes]:
    return [k[1] for k in ok(r, "XINFO", "STREAM", key, *full)[0::2]]


def test_xinfo_stream_reports_the_idmp_fields_in_redis_order(r: RespConn, key: str) -> None:
    ok(r, "XADD", key, "*", "f", "v")
    # a stream that never used IDMP answers as the Redis 7.0 we report (Valkey counts them)
    assert _names(r, key) == PLAIN_FIELDS + TAIL_FIELDS
    assert len(_names(r, key, "FULL")) == 9
    ok(r, "XADD", key, "IDMP", "p0", "first", "*", "f", "v")
    assert _names(r, key) == PLAIN_FIELDS + IDMP_FIELDS + TAIL_FIELDS
    got = info(r, key)
    assert [got[k] for k in IDMP_FIELDS] == [100, 100, 1, 1, 1, 0]
    for pid, iid in [("p1", "req-1"), ("p1", "req-2"), ("p2", "req-1"), ("p1", "req-1"), ("p2", "req-1")]:
        ok(r, "XADD", key, "IDMP", pid, iid, "*", "f", "v")
    got = info(r, key)
    assert (got[b"pids-tracked"], got[b"iids-tracked"], got[b"iids-added"], got[b"iids-duplicates"]) == (3, 4, 4, 2)
    assert b"iids-duplicates" in _names(r, key, "FULL")
    other = key + "-cfg"  # XCFGSET away from the defaults shows them too
    ok(r, "XADD", other, "*", "f", "v")
    assert r.call("XCFGSET", other, "IDMP-DURATION", "60") == ("+", "OK")
    assert _names(r, other) == PLAIN_FIELDS + IDMP_FIELDS + TAIL_FIELDS


def test_maxsize_evicts_a_producers_oldest_and_counters_are_lifetime(r: RespConn, key: str) -> None:
    ok(r, "XADD", key, "IDMP", "p1", "init", "*", "f", "init")
    assert r.call("XCFGSET", key, "IDMP-MAXSIZE", "3", "IDMP-DURATION", "60") == ("+", "OK")
    ids = [ok(r, "XADD", key, "IDMP", "p1", f"req-{i}", "*", "f", str(i)) for i in range(1, 5)]
    assert ok(r, "XADD", key, "IDMP", "p1", "req-1", "*", "f", "new") != ids[0]  # evicted
    assert ok(r, "XADD", key, "IDMP", "p1", "req-4", "*", "f", "dup") == ids[3]
    got = info(r, key)
    assert (got[b"idmp-duration"], got[b"idmp-maxsize"]) == (60, 3)
    assert (got[b"iids-tracked"], got[b"iids-added"], got[b"iids-duplicates"]) == (3, 6, 1)


def test_xcfgset_errors_defaults_and_history(r: RespConn, key: str) -> None:
    assert err(r, "XCFGSET", key, "IDMP-DURATION", "5") == "ERR no such key"
    first = ok(r, "XADD", key, "IDMP", "p1", "req-1", "*", "f", "v")
    cases = [
        ((), "ERR At least one parameter (IDMP-DURATION or IDMP-MAXSIZE) is required"),
        (("IDMP-DURATION",), "ERR syntax error"),
        (("IDMP-MAXSIZE",), "ERR syntax error"),
        (("INVALID",), "ERR syntax error"),
        (("IDMP-DURATION", "A"), "ERR value is not an integer or out of range"),
        (("IDMP-DURATION", "000000000"), "ERR value is not an integer or out of range"),
        (("IDMP-MAXSIZE", "3.14"), "ERR value is not an integer or out of range"),
        (("IDMP-DURATION", "INVALID", "IDMP-MAXSIZE"), "ERR value is not an integer or out of range"),
        (("IDMP-DURATION", "0"), "ERR IDMP-DURATION must be between 1 and 86400 seconds"),
        (("IDMP-DURATION", "86401"), "ERR IDMP-DURATION must be between 1 and 86400 seconds"),
        (("IDMP-MAXSIZE", "-50"), "ERR IDMP-MAXSIZE must be between 1 and 10000 entries"),
        (("IDMP-MAXSIZE", "10001"), "ERR IDMP-MAXSIZE must be between 1 and 10000 entries"),
    ]
    for args, text in cases:
        assert err(r, "XCFGSET", key, *args) == text, args
    # the same values keep the history; a changed one clears every producer's map
    assert r.call("XCFGSET", key, "IDMP-DURATION", "100", "IDMP-MAXSIZE", "100") == ("+", "OK")
    assert ok(r, "XADD", key, "IDMP", "p1", "req-1", "*", "f", "dup") == first
    assert r.call("XCFGSET", key, "IDMP-DURATION", "86400") == ("+", "OK")
    got = info(r, key)
    assert (got[b"idmp-duration"], got[b"pids-tracked"], got[b"iids-tracked"], got[b"iids-added"]) == \
        (86400, 0, 0, 1)
    assert ok(r, "XADD", key, "IDMP", "p1", "req-1", "*", "f", "new") != first
    assert ok(r, "XLEN", key) == 2


def _command_docs(conn: RespConn, name: str) -> dict[bytes, Any]:
    raw = ok(conn, "COMMAND", "DOCS", name)
    doc = raw[1][1]
    return {k[1]: v for k, v in zip(doc[0::2], doc[1::2], strict=True)}


def _arg_names(args: Any) -> list[bytes]:
    out = []
    for a in args[1]:
        d = {k[1]: v for k, v in zip(a[1][0::2], a[1][1::2], strict=True)}
        out.append(d.get(b"token", d[b"name"])[1])
        if b"arguments" in d:
            out += _arg_names(d[b"arguments"])
    return out


def test_command_docs_and_info_describe_xcfgset_and_idmp(r: RespConn) -> None:
    xcfgset = _command_docs(r, "xcfgset")
    assert xcfgset[b"since"][1] == b"8.6.0"
    assert _arg_names(xcfgset[b"arguments"]) == [b"key", b"IDMP-DURATION", b"IDMP-MAXSIZE"]
    assert {b"IDMP", b"IDMPAUTO"} <= set(_arg_names(_command_docs(r, "xadd")[b"arguments"]))
    spec = ok(r, "COMMAND", "INFO", "xcfgset")[0][1]
    assert spec[0][1] == b"xcfgset" and spec[1][1] == -2 and spec[3:6] == [(":", 1), (":", 1), (":", 1)]


# ---- across restarts (a real server process) -------------------------------------------------


def test_idmp_and_http_keys_survive_kill_and_clean_restart(server_factory: Any, tmp_path: Any) -> None:
    """The idempotency table is in the WAL (kill -9) and in the checkpoint (clean stop, and the
    checkpoint a restart writes): a retried write returns the original ID / seqs, appends nothing."""
    data = tmp_path / "d"
    srv = server_factory(data_dir=data)
    http = JsonClient(srv.http_port)
    http.ok("PUT", "/v0/topics/orders", {"durable": True})
    http.ok("PUT", "/v0/topics/jobs", {"durable": True, "idempotency_window_ms": 3_600_000})
    r = redis.Redis(port=srv.resp_port)
    r.xadd("orders", {"warm": "up"})
    first = r.execute_command("XADD", "orders", "IDMP", "svc-a", "order-1", "*", "amount", "100")
    auto = r.execute_command("XADD", "orders", "IDMPAUTO", "svc-b", "*", "k", "v", "n", "1")
    assert r.execute_command("XCFGSET", "orders", "IDMP-DURATION", "3600", "IDMP-MAXSIZE", "50") == b"OK"
    again = r.execute_command("XADD", "orders", "IDMP", "svc-a", "order-2", "*", "amount", "7")
    written = http.ok("POST", "/v0/topics/jobs", {"records": [{"data": 1}, {"data": 2}], "idempotency_key": "batch-1"})
    r.close()

    def check(srv: Any, dups: int) -> None:
        r = redis.Redis(port=srv.resp_port)
        try:
            assert r.execute_command("XADD", "orders", "IDMP", "svc-a", "order-2", "*", "amount", "8") == again
            # XCFGSET (a changed value) cleared the maps after order-1 and the IDMPAUTO entry
            assert r.execute_command("XADD", "orders", "IDMP", "svc-a", "order-1", "*", "a", "1") != first
            assert r.execute_command("XADD", "orders", "IDMPAUTO", "svc-b", "*", "n", "1", "k", "v") != auto
            got = r.xinfo_stream("orders")
            assert (got["idmp-duration"], got["idmp-maxsize"], got["iids-duplicates"]) == (3600, 50, dups)
            replay = JsonClient(srv.http_port).ok(
                "POST", "/v0/topics/jobs", {"records": [{"data": 9}], "idempotency_key": "batch-1"})
            assert replay["duplicate"] is True and replay["seqs"] == written["seqs"]
            assert JsonClient(srv.http_port).ok("GET", "/v0/topics/jobs")["count"] == 2
        finally:
            r.close()

    srv.kill()  # kill -9: the WAL alone
    srv = server_factory(data_dir=data)
    check(srv, 1)
    n = redis.Redis(port=srv.resp_port).xlen("orders")
    srv.stop()  # a clean stop: the checkpoint
    srv = server_factory(data_dir=data)
    assert redis.Redis(port=srv.resp_port).xlen("orders") == n
    r = redis.Redis(port=srv.resp_port)
    assert r.execute_command("XADD", "orders", "IDMP", "svc-a", "order-2", "*", "amount", "9") == again
    latest = r.execute_command("XADD", "orders", "IDMP", "svc-c", "x", "*", "f", "v")
    r.close()
    srv.kill()  # the restart's checkpoint plus a WAL tail
    srv = server_factory(data_dir=data)
    r = redis.Redis(port=srv.resp_port)
    try:
        assert r.execute_command("XADD", "orders", "IDMP", "svc-c", "x", "*", "f", "w") == latest
        assert r.xlen("orders") == n + 1
    finally:
        r.close()
