"""Server commands clients and test harnesses send, differential where Redis 7.0 has them: INFO
sections, CONFIG GET/SET of the stream tuning settings and `timeout` (idle clients closed), OBJECT, MEMORY, WAIT, FUNCTION, SELECT,
DEBUG, CLIENT switches, LATENCY; SHUTDOWN on a real process (data survives a restart); and
COMMAND DOCS argument types as redis-cli checks them."""

from __future__ import annotations

import re
import time
from typing import Any

import pytest
import redis
from compat_harness import S, Target, encode  # type: ignore[import-not-found]

HEADERS = re.compile(r"^# (\w+)\r?$", re.M)


def _info(target: Target, *sections: str) -> str:
    conn = target.conn()
    try:
        reply = conn.call("INFO", *sections)
    finally:
        conn.close()
    assert reply[0] == "$", reply
    return str(reply[1].decode())


@pytest.mark.parametrize("sections", [(), ("default",), ("all",), ("everything",),
                                      ("clients", "server"), ("cpu",), ("errorstats",),
                                      ("cluster", "replication", "keyspace"), ("nosuch",)])
def test_info_section_headers(targets: list[Target], sections: tuple[str, ...]) -> None:
    """Every target answers the same sections, in the same order, with Redis 7's headers."""
    ref, *rest = [HEADERS.findall(_info(t, *sections)) for t in targets]
    for got in rest:
        assert got == ref, sections


def test_info_fields_clients_probe(targets: list[Target]) -> None:
    for t in targets:
        r = redis.Redis(port=t.port)
        try:
            try:
                r.execute_command("NOSUCHCOMMAND")
            except redis.ResponseError:
                pass
            info = r.info("everything")
            assert info["cluster_enabled"] == 0, t.name
            assert info["role"] == "master", t.name
            assert info["arch_bits"] == 64 and "redis_version" in info, t.name
            assert info["errorstat_ERR"]["count"] >= 1, t.name
            assert "used_cpu_sys" in info and "connected_clients" in info, t.name
            assert r.info("clients", "server").keys() >= {"redis_version", "connected_clients"}
        finally:
            r.close()


def test_config_stream_settings(differ: Any) -> None:
    differ.check([
        S("CONFIG", "SET", "stream-node-max-entries", "10"),
        S("CONFIG", "GET", "stream-node-max-entries"),
        S("CONFIG", "SET", "stream-node-max-bytes", "8kb"),
        S("CONFIG", "GET", "stream-node-max-bytes"),
        S("CONFIG", "SET", "stream-node-max-entries", "abc"),
        S("CONFIG", "SET", "stream-node-max-entries", "-1"),
        S("CONFIG", "SET", "stream-node-max-bytes", "1x"),
        S("CONFIG", "SET", "stream-node-max-entries", "100", "stream-node-max-bytes", "4096"),
        S("CONFIG", "GET", "stream-node-max-entries"), S("CONFIG", "GET", "stream-node-max-bytes"),
    ])


def test_config_set_timeout(differ: Any) -> None:
    """redis-py's test_config_set / test_config_set_multi_params: `timeout` is settable."""
    differ.check([
        S("CONFIG", "GET", "timeout"),
        S("CONFIG", "SET", "timeout", "70"),
        S("CONFIG", "GET", "timeout"),
        S("CONFIG", "SET", "timeout", "-1"),
        S("CONFIG", "SET", "timeout", "abc"),
        S("CONFIG", "SET", "timeout", "2147483648"),
        S("CONFIG", "SET", "timeout", "0", "stream-node-max-entries", "50"),
        S("CONFIG", "GET", "timeout"),
        S("CONFIG", "SET", "timeout", "9", "stream-node-max-entries", "x"),  # all or nothing
        S("CONFIG", "GET", "timeout"),
        S("CONFIG", "SET", "stream-node-max-entries", "100"),
    ])


def test_idle_clients_are_closed_after_timeout(targets: list[Target]) -> None:
    """CONFIG SET timeout 1: an idle client is closed (within about two seconds, as Redis's
    once-a-second check), one blocked in XREAD is not; back to 0, nobody is."""
    for t in targets:
        idle, blocked = t.conn(), t.conn()
        try:
            assert idle.call("CONFIG", "SET", "timeout", "1") == ("+", "OK")
            blocked.send_raw(encode(["XREAD", "BLOCK", "2500", "STREAMS", "k:idle-timeout", "$"]))
            start = time.monotonic()
            idle.sock.settimeout(5)
            assert idle.sock.recv(100) == b"", t.name  # closed by the server
            assert 1 <= time.monotonic() - start < 4, t.name
            assert blocked.read() == ("nullarray",), t.name  # served to its own timeout
        finally:
            admin = t.conn()
            admin.call("CONFIG", "SET", "timeout", "0")
            for c in (admin, idle, blocked):
                c.close()


def test_introspection_commands(differ: Any, key: str) -> None:
    differ.check([
        S("XADD", key, "*", "f", "v"),
        S("OBJECT", "ENCODING", key), S("OBJECT", "ENCODING", f"{key}:none"),
        S("OBJECT", "REFCOUNT", key), S("OBJECT", "FREQ", key), S("OBJECT", "FREQ", f"{key}:none"),
        S("OBJECT", "IDLETIME", f"{key}:none"), S("MEMORY", "USAGE", f"{key}:none"),
        S("OBJECT", "NOSUCH", key),
        S("WAIT", "0", "0"), S("WAIT", "x", "0"),
        S("FUNCTION", "FLUSH"), S("FUNCTION", "FLUSH", "SYNC"), S("FUNCTION", "LIST"),
        S("FUNCTION", "LIST", "WITHCODE"), S("FUNCTION", "DELETE", "lib"),
        S("SELECT", "0"),
        S("DEBUG", "SET-ACTIVE-EXPIRE", "1"), S("DEBUG", "RELOAD"),
        S("CLIENT", "NO-EVICT", "on"), S("CLIENT", "NO-EVICT", "maybe"),
        S("CLIENT", "TRACKING", "off"), S("CLIENT", "REPLY", "ON"), S("CLIENT", "TRACKINGINFO"),
        S("CLIENT", "UNPAUSE"), S("CLIENT", "PAUSE", "-1"),
        S("LATENCY", "LATEST"), S("LATENCY", "HISTORY", "command"), S("LATENCY", "RESET"),
        S("PING"),
    ])


def test_ours_memory_usage_and_refusals(ours: Target | None, key: str) -> None:
    if ours is None:
        pytest.skip("COMPAT_REFERENCE_ONLY")
    r = redis.Redis(port=ours.port)
    try:
        r.xadd(key, {"f": "v" * 100})
        assert r.memory_usage(key) > 100
        assert r.slowlog_len() == 0 and r.slowlog_get() == []
        assert r.execute_command("WAITAOF", 1, 0, 0) == [1, 0]
        assert r.object("idletime", key) >= 0
        for cmd in (("DUMP", key), ("RESTORE", key, "0", "x"), ("CLIENT", "TRACKING", "on"),
                    ("CLIENT", "PAUSE", "100")):
            with pytest.raises(redis.ResponseError, match="not supported"):
                r.execute_command(*cmd)
        # what redis-server answers when started with `databases 1` (one db, like topicsrv)
        with pytest.raises(redis.ResponseError, match="^DB index is out of range$"):
            r.execute_command("SELECT", "9")
        assert r.ping()
    finally:
        r.close()


def _plain(tree: Any) -> Any:
    """A typed RESP2 tree as plain values (bytes, int, lists)."""
    kind = tree[0]
    if kind in "*~":
        return [_plain(t) for t in tree[1]]
    if kind == "+":
        return tree[1].encode()
    return tree[1] if len(tree) > 1 else None


_ARG_TYPES = {"key", "string", "integer", "double", "pattern", "unix-time", "pure-token",
              "oneof", "block"}


def _walk(args: list[Any], where: str) -> list[str]:
    bad = []
    for a in args:
        a = dict(zip(a[::2], a[1::2], strict=True))
        if a[b"type"].decode() not in _ARG_TYPES:
            bad.append(f"{where}: {a[b'name'].decode()!r} has type {a[b'type'].decode()!r}")
        bad += _walk(a.get(b"arguments", []), where)
    return bad


def _docs_problems(docs: dict[bytes, Any], where: str = "") -> list[str]:
    bad = []
    for name, doc in docs.items():
        doc = dict(zip(doc[::2], doc[1::2], strict=True))
        bad += _walk(doc.get(b"arguments", []), where + name.decode())
        subs = doc.get(b"subcommands")
        if subs:
            bad += _docs_problems(dict(zip(subs[::2], subs[1::2], strict=True)))
    return bad


def test_command_docs_argument_types(ours: Target | None) -> None:
    """redis-cli prints `Unknown type '' set for argument 'MATCH'` for a bad type."""
    if ours is None:
        pytest.skip("COMPAT_REFERENCE_ONLY")
    conn = ours.conn()
    try:
        raw = _plain(conn.call("COMMAND", "DOCS"))
    finally:
        conn.close()
    docs = dict(zip(raw[::2], raw[1::2], strict=True))
    assert b"topic.delete" in docs
    assert _docs_problems(docs) == []


def test_shutdown_keeps_data(server_factory: Any, tmp_path: Any) -> None:
    """SHUTDOWN [NOSAVE] stops the process cleanly (exit 0); every acknowledged write is there
    after a restart on the same data directory."""
    for i, flags in enumerate([(), ("NOSAVE", "NOW", "FORCE")]):
        data = tmp_path / f"d{i}"
        srv = server_factory(data_dir=data)
        r = redis.Redis(port=srv.resp_port)
        ids = [r.xadd("orders", {"n": str(n)}) for n in range(50)]
        r.xgroup_create("orders", "g", "0")
        with pytest.raises(redis.ResponseError, match="syntax error"):
            r.execute_command("SHUTDOWN", "SAVE", "NOSAVE")
        with pytest.raises(redis.ResponseError, match="No shutdown in progress"):
            r.execute_command("SHUTDOWN", "ABORT")
        try:
            r.execute_command("SHUTDOWN", *flags)
        except redis.ConnectionError:
            pass
        r.close()
        assert srv.proc is not None
        assert srv.proc.wait(30) == 0
        srv.stop()
        again = server_factory(data_dir=data)
        r = redis.Redis(port=again.resp_port)
        try:
            got = r.xrange("orders")
            assert [e[0] for e in got] == ids
            assert r.xinfo_groups("orders")[0]["name"] == b"g"
        finally:
            r.close()
        again.stop()
