"""Replication against redis-server (issue 37): a topicsrv primary with one topicsrv replica
beside a redis-server primary with one redis-server replica, all on loopback (neither can
follow the other: their sync payloads differ). Replies are compared byte for byte where
Redis's are deterministic (the harness's typed trees, RESP2 and RESP3), else by shape:
ROLE on both roles; INFO replication's field names and order (and the slaveN line's keys);
READONLY on a replica (plain writes, scripts with and without flags, functions, XREADGROUP,
inside MULTI); WAIT on a primary and on a replica; NOREPLICAS past min-replicas-to-write;
REPLICAOF/SLAVEOF replies and errors, and a replica promoted and sent back; CONFIG GET/SET of
the replication settings; CLIENT LIST/KILL and the replica's link. What differs on purpose:
docs/redis-compatibility.md, "Replication (issue 37)".

Rule 1: the four servers are shared by the module; a test leaves both pairs linked (the one
that breaks a link waits for `master_link_status:up` again) and min-replicas-to-write at 0.
Rule 2: no sleeps: waits poll INFO replication until the link is up.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from compat_harness import (  # type: ignore[import-not-found]
    REFERENCE_ONLY,
    Differ,
    RespConn,
    S,
    Target,
    show,
)

from conftest import ServerProcess, start_redis

READONLY = "-\"READONLY You can't write against a read only replica.\""
NOREPLICAS = "-'NOREPLICAS Not enough good replicas to write.'"
EXECABORT = "-'EXECABORT Transaction discarded because of previous errors.'"
WAIT_ON_REPLICA = ("-'ERR WAIT cannot be used with replica instances. Please also note that "
                   "since Redis 4.0 if a replica is configured to be writable (which is not the "
                   "default) writes to replicas are just local and are not propagated.'")
BAD_PORT = "-'ERR Invalid master port'"
SEED = "repl:seed"  # written before the replicas' first sync: every replica has it
LIB = ("#!lua name=repllib\n"
       "redis.register_function('rw', function(keys, args) return redis.call('set', keys[1], 'x') end)\n"
       "redis.register_function{function_name='rr', callback=function(keys, args) "
       "return redis.call('get', keys[1]) end, flags={'no-writes'}}")
SET_SCRIPT = "return redis.call('set', KEYS[1], 'x')"
SET_SHA = hashlib.sha1(SET_SCRIPT.encode()).hexdigest()  # an error inside it names it

PRIMARY_FIELDS = ["role", "connected_slaves", "slave0", "master_failover_state", "master_replid",
                  "master_replid2", "master_repl_offset", "second_repl_offset",
                  "repl_backlog_active", "repl_backlog_size", "repl_backlog_first_byte_offset",
                  "repl_backlog_histlen"]
REPLICA_FIELDS = ["role", "master_host", "master_port", "master_link_status",
                  "master_last_io_seconds_ago", "master_sync_in_progress",
                  "slave_read_repl_offset", "slave_repl_offset", "slave_priority",
                  "slave_read_only", "replica_announced", "connected_slaves",
                  "master_failover_state", "master_replid", "master_replid2",
                  "master_repl_offset", "second_repl_offset", "repl_backlog_active",
                  "repl_backlog_size", "repl_backlog_first_byte_offset", "repl_backlog_histlen"]
# values that depend on the run (offsets, ids, timings, ports): compared by form only
VARYING = {"slave0": r"ip=127\.0\.0\.1,port=\d+,state=online,offset=\d+,lag=\d+",
           "master_replid": r"[0-9a-f]{40}", "master_replid2": r"[0-9a-f]{40}",
           "master_repl_offset": r"\d+", "slave_read_repl_offset": r"\d+",
           "slave_repl_offset": r"\d+", "repl_backlog_histlen": r"\d+",
           "master_last_io_seconds_ago": r"\d+", "master_port": r"\d+"}
REPLICA_VARYING = {**VARYING, "repl_backlog_first_byte_offset": r"\d+"}


@dataclass
class Pair:
    name: str
    primary: int  # RESP ports
    replica: int

    def call(self, port: int, *args: str | int, protocol: int = 2) -> Any:
        conn = RespConn(port, protocol)
        try:
            return conn.call(*args)
        finally:
            conn.close()


def _seed(port: int) -> None:
    conn = RespConn(port)
    try:
        assert conn.call("SET", SEED, "v") == ("+", "OK")
        assert conn.call("FUNCTION", "LOAD", LIB) == ("$", b"repllib")
    finally:
        conn.close()


def _info(port: int, protocol: int = 2) -> tuple[str, list[tuple[str, str]]]:
    """INFO replication: its RESP type and its (field, value) lines in order."""
    conn = RespConn(port, protocol)
    try:
        kind, body = conn.call("INFO", "replication")
    finally:
        conn.close()
    text = body.decode()
    if kind == "=":
        assert text.startswith("txt:"), text
        text = text[4:]
    lines = [ln for ln in text.split("\r\n") if ln and not ln.startswith("#")]
    return kind, [(ln.partition(":")[0], ln.partition(":")[2]) for ln in lines]


def wait_link_up(pair: Pair, timeout: float = 60.0) -> None:
    """Poll INFO until the replica's link is up and the primary lists it online (Redis's
    primary lists it a moment after the replica says up); a topicsrv replica restarts in
    place after a full sync (repl/replica.py Rule 2), so a refused connection is retried."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = dict(_info(pair.replica)[1]), dict(_info(pair.primary)[1])
            if last[0].get("master_link_status") == "up" and \
                    "state=online" in last[1].get("slave0", ""):
                return
        except (OSError, ValueError):
            pass
        time.sleep(0.05)
    raise AssertionError(f"{pair.name}: the replica never linked up: {last}")


@pytest.fixture(scope="module")
def pairs() -> Iterator[list[Pair]]:
    """Rule 1: a redis-server pair and (unless COMPAT_REFERENCE_ONLY) a topicsrv pair, the
    seed key and function library written before each replica's first sync."""
    stop: list[Callable[[], Any]] = []
    tmp = Path(tempfile.mkdtemp(prefix="topicsrv-repl-compat-"))

    def redis_server(*extra: str) -> int:
        ref = start_redis(*extra)

        def end() -> None:
            ref.proc.terminate()
            ref.proc.wait(10)
            shutil.rmtree(ref.workdir, ignore_errors=True)

        stop.append(end)
        return int(ref.port)

    try:
        rp = redis_server()
        _seed(rp)
        out = [Pair("redis", rp, redis_server("--replicaof", "127.0.0.1", str(rp)))]
        if not REFERENCE_ONLY:
            tp = ServerProcess(tmp / "primary").start()
            stop.append(tp.stop)
            _seed(tp.resp_port)
            tr = ServerProcess(tmp / "replica", "--replicaof", f"127.0.0.1:{tp.resp_port}").start()
            stop.append(tr.stop)
            out.append(Pair("topicsrv", tp.resp_port, tr.resp_port))
        for p in out:
            wait_link_up(p)
        yield out
    finally:
        for fn in reversed(stop):
            fn()
        shutil.rmtree(tmp, ignore_errors=True)


def _differ(pairs: list[Pair], role: str) -> Differ:
    targets = [Target(p.name, p.primary if role == "primary" else p.replica) for p in pairs]
    return Differ(targets[0], targets[1] if len(targets) > 1 else None)


@pytest.fixture(scope="module")
def on_primary(pairs: list[Pair]) -> Differ:
    return _differ(pairs, "primary")


@pytest.fixture(scope="module")
def on_replica(pairs: list[Pair]) -> Differ:
    return _differ(pairs, "replica")


def shape(tree: Any) -> Any:
    """A reply with its integers and digit strings replaced by their kind."""
    kind = tree[0]
    if kind == ":":
        return (":", "<int>")
    if kind == "$" and tree[1].isdigit():
        return ("$", "<digits>")
    if kind in "*~>":
        return (kind, [shape(t) for t in tree[1]])
    return tree


# ---- ROLE ----------------------------------------------------------------------------------


@pytest.mark.parametrize("protocol", [2, 3])
def test_role_on_both_roles(pairs: list[Pair], on_primary: Differ, protocol: int) -> None:
    """["master", offset, [[ip, port, offset]]] with the replica's listening port as a
    string; ["slave", host, port, "connected", offset] with the port an integer."""
    for p in pairs:
        got = p.call(p.primary, "ROLE", protocol=protocol)
        assert shape(got) == ("*", [("$", b"master"), (":", "<int>"), ("*", [
            ("*", [("$", b"127.0.0.1"), ("$", "<digits>"), ("$", "<digits>")])])]), \
            (p.name, show(got))
        assert got[1][2][1][0][1][1] == ("$", str(p.replica).encode()), p.name
        rep = p.call(p.replica, "ROLE", protocol=protocol)
        assert shape(rep) == ("*", [("$", b"slave"), ("$", b"127.0.0.1"), (":", "<int>"),
                                    ("$", b"connected"), (":", "<int>")]), (p.name, show(rep))
        assert rep[1][2] == (":", p.primary), p.name
    on_primary.check([S("ROLE", "x", expect="-\"ERR wrong number of arguments for 'role' command\"")],
                     protocol)


# ---- INFO replication --------------------------------------------------------------------------


def _check_info(pairs: list[Pair], port_of: Callable[[Pair], int], names: list[str],
                varying: dict[str, str], protocol: int) -> dict[str, list[tuple[str, str]]]:
    """Same RESP type and field names in the same order on both servers (and `names`); the
    values equal where they do not depend on the run, of the expected form where they do."""
    seen: dict[str, list[tuple[str, str]]] = {}
    kinds = set()
    for p in pairs:
        kind, fields = _info(port_of(p), protocol)
        kinds.add(kind)
        assert [f for f, _ in fields] == names, (p.name, fields)
        for f, v in fields:
            if f in varying:
                assert re.fullmatch(varying[f], v), (p.name, f, v)
        seen[p.name] = [(f, "<varies>" if f in varying else v) for f, v in fields]
    assert kinds == {"$" if protocol == 2 else "="}, kinds
    ref, *rest = seen.values()
    for got in rest:
        assert got == ref
    return seen


@pytest.mark.parametrize("protocol", [2, 3])
def test_info_replication_fields(pairs: list[Pair], protocol: int) -> None:
    _check_info(pairs, lambda p: p.primary, PRIMARY_FIELDS, VARYING, protocol)
    _check_info(pairs, lambda p: p.replica, REPLICA_FIELDS, REPLICA_VARYING, protocol)
    for p in pairs:
        primary, replica = dict(_info(p.primary)[1]), dict(_info(p.replica)[1])
        keys = [kv.partition("=")[0] for kv in primary["slave0"].split(",")]
        assert keys == ["ip", "port", "state", "offset", "lag"], (p.name, primary["slave0"])
        assert f"port={p.replica}," in primary["slave0"], p.name
        assert replica["master_host"] == "127.0.0.1" and replica["master_port"] == str(p.primary)
        assert replica["role"] == "slave" and replica["master_link_status"] == "up"


# ---- READONLY on a replica ---------------------------------------------------------------------


@pytest.mark.parametrize("protocol", [2, 3])
def test_replica_refuses_writes(on_replica: Differ, key: str, protocol: int) -> None:
    on_replica.check([
        S("SET", key, "v", expect=READONLY),
        S("XADD", key, "*", "f", "v", expect=READONLY),
        S("LPUSH", key, "x", expect=READONLY),
        S("HSET", key, "f", "v", expect=READONLY),
        S("INCR", key, expect=READONLY),
        S("DEL", SEED, expect=READONLY),
        S("XREADGROUP", "GROUP", "g", "c", "STREAMS", key, ">", expect=READONLY),
        # a script without flags runs, and its write is refused where it happens
        S("EVAL", SET_SCRIPT, "1", key,
          expect=f"-\"READONLY You can't write against a read only replica. script: {SET_SHA}, "
                 "on @user_script:1.\""),
        S("EVAL", "return redis.call('get', KEYS[1])", "1", SEED),
        # a script with flags that may write is a write command: refused before it runs
        S("EVAL", "#!lua\nreturn 1", "0", expect=READONLY),
        S("EVAL_RO", "#!lua\nreturn 1", "0", expect=READONLY),
        S("EVAL", "#!lua flags=no-writes\nreturn redis.call('get', KEYS[1])", "1", SEED),
        S("FCALL", "rw", "1", key, expect=READONLY),
        S("FCALL_RO", "rw", "1", key, expect=READONLY),
        S("FCALL", "rr", "1", SEED),
        S("FCALL_RO", "rr", "1", SEED),
        S("FUNCTION", "LOAD", LIB, expect=READONLY),
        S("FUNCTION", "FLUSH", expect=READONLY),
        # a refused write aborts the transaction as it is queued
        S("MULTI"), S("SET", key, "v", expect=READONLY), S("GET", SEED), S("EXEC", expect=EXECABORT),
        S("MULTI"), S("GET", SEED), S("EXEC"),
        # reads and pub/sub are served
        S("GET", SEED), S("EXISTS", key), S("PUBLISH", "repl:chan", "m"),
        S("WAIT", "1", "100", expect=WAIT_ON_REPLICA),
        S("WAIT", "0", "-1", expect=WAIT_ON_REPLICA),  # refused before its arguments are read
        S("WAIT", "x", "y", expect=WAIT_ON_REPLICA),
    ], protocol)


# ---- WAIT on a primary ---------------------------------------------------------------------


def test_wait_on_primary(pairs: list[Pair], on_primary: Differ, key: str) -> None:
    for p in pairs:
        conn = RespConn(p.primary)
        try:
            assert conn.call("SET", key, "v") == ("+", "OK")
            assert conn.call("WAIT", "1", "5000") == (":", 1), p.name
            t0 = time.monotonic()
            assert conn.call("WAIT", "2", "100") == (":", 1), p.name  # its timeout's count
            assert time.monotonic() - t0 >= 0.1, p.name
            # inside a transaction WAIT answers the count it has at once (a blocking WAIT
            # would outlast the connection's 10 s timeout); how many acked yet is timing
            assert conn.call("MULTI") == ("+", "OK")
            assert conn.call("WAIT", "2", "60000") == ("+", "QUEUED")
            got = conn.call("EXEC")
            assert shape(got) == ("*", [(":", "<int>")]) and got[1][0][1] in (0, 1), p.name
        finally:
            conn.close()
    on_primary.check([
        S("WAIT", "1", "-1", expect="-'ERR timeout is negative'"),
        S("WAIT", "x", "1", expect="-'ERR value is not an integer or out of range'"),
        S("WAIT", "1", "x", expect="-'ERR timeout is not an integer or out of range'"),
        S("WAIT", "1", "99999999999999999999"),
        S("WAIT", "1", expect="-\"ERR wrong number of arguments for 'wait' command\""),
        S("WAIT", "1", "2", "3"),
    ])


# ---- NOREPLICAS --------------------------------------------------------------------------------


def _min_replicas(pairs: list[Pair], n: int) -> None:
    for p in pairs:
        assert p.call(p.primary, "CONFIG", "SET", "min-replicas-to-write", n) == ("+", "OK")


@pytest.mark.parametrize("protocol", [2, 3])
def test_noreplicas(pairs: list[Pair], on_primary: Differ, key: str, protocol: int) -> None:
    """min-replicas-to-write 2 with one replica: writes refused, reads served; 1 and 0 write."""
    try:
        on_primary.check([
            S("CONFIG", "SET", "min-replicas-to-write", "2", expect="+'OK'"),
            S("CONFIG", "GET", "min-replicas-to-write"),
            S("CONFIG", "GET", "min-slaves-to-write"),
            S("SET", key, "v", expect=NOREPLICAS),
            S("XADD", key, "*", "f", "v", expect=NOREPLICAS),
            S("LPUSH", key, "x", expect=NOREPLICAS),
            S("EVAL", SET_SCRIPT, "1", key,
              expect=f"-'NOREPLICAS Not enough good replicas to write. script: {SET_SHA}, on "
                     "@user_script:1.'"),
            S("EVAL", "#!lua\nreturn 1", "0", expect=NOREPLICAS),
            S("EVAL", "#!lua flags=no-writes\nreturn 1", "0", expect=":1"),
            S("FCALL", "rw", "1", key, expect=NOREPLICAS),
            S("FCALL_RO", "rr", "1", SEED, expect="$b'v'"),
            S("GET", SEED, expect="$b'v'"),
            S("MULTI"), S("SET", key, "v", expect=NOREPLICAS), S("EXEC", expect=EXECABORT),
            S("MULTI"), S("GET", SEED), S("EXEC"),
            S("CONFIG", "SET", "min-replicas-to-write", "1"),
            S("SET", key, "v1", expect="+'OK'"),
            S("CONFIG", "SET", "min-replicas-to-write", "0"),
            S("SET", key, "v2", expect="+'OK'"),
            S("CONFIG", "GET", "min-replicas-to-write"),
            S("CONFIG", "SET", "min-replicas-to-write", "-1"),
            S("CONFIG", "SET", "min-replicas-to-write", "x"),
            S("CONFIG", "SET", "min-replicas-to-write", "2147483648"),
        ], protocol)
    finally:
        _min_replicas(pairs, 0)


def test_info_min_slaves_good_slaves(pairs: list[Pair]) -> None:
    """With min-replicas-to-write set, `min_slaves_good_slaves` follows connected_slaves."""
    names = PRIMARY_FIELDS[:2] + ["min_slaves_good_slaves"] + PRIMARY_FIELDS[2:]
    try:
        _min_replicas(pairs, 2)
        seen = _check_info(pairs, lambda p: p.primary, names, VARYING, 2)
        assert ("min_slaves_good_slaves", "1") in next(iter(seen.values()))
    finally:
        _min_replicas(pairs, 0)
    _check_info(pairs, lambda p: p.primary, PRIMARY_FIELDS, VARYING, 2)


# ---- REPLICAOF / SLAVEOF -------------------------------------------------------------------


def test_replicaof_replies_on_primary(pairs: list[Pair], on_primary: Differ) -> None:
    on_primary.check([
        S("REPLICAOF", "NO", "ONE", expect="+'OK'"),
        S("SLAVEOF", "no", "one", expect="+'OK'"),
        S("REPLICAOF", "x", expect="-\"ERR wrong number of arguments for 'replicaof' command\""),
        S("REPLICAOF", "a", "b", "c"),
        S("SLAVEOF", "x", expect="-\"ERR wrong number of arguments for 'slaveof' command\""),
        S("REPLICAOF", "127.0.0.1", "-1", expect=BAD_PORT),
        S("REPLICAOF", "127.0.0.1", "65536", expect=BAD_PORT),
        S("REPLICAOF", "127.0.0.1", "99999999999999999999", expect=BAD_PORT),
        S("REPLICAOF", "127.0.0.1", "x", expect=BAD_PORT),
        S("SLAVEOF", "127.0.0.1", "", expect=BAD_PORT),
        S("REPLICAOF", "NO", "TWO", expect=BAD_PORT),
    ])
    test_role_on_both_roles(pairs, on_primary, 2)  # nothing above changed a role


def test_replicaof_replies_on_replica(pairs: list[Pair], on_replica: Differ) -> None:
    for p in pairs:
        for cmd in ("REPLICAOF", "SLAVEOF"):
            assert p.call(p.replica, cmd, "127.0.0.1", p.primary) == \
                ("+", "OK Already connected to specified master"), p.name
    on_replica.check([S("REPLICAOF", "127.0.0.1", "0x1", expect=BAD_PORT)])


# ---- CONFIG --------------------------------------------------------------------------------

SETTINGS = ("replica-priority", "slave-priority", "min-replicas-to-write", "min-slaves-to-write",
            "min-replicas-max-lag", "min-slaves-max-lag", "replica-read-only", "slave-read-only",
            "replica-announced", "slave-announced", "repl-backlog-size")


@pytest.mark.parametrize("protocol", [2, 3])
def test_config_get(pairs: list[Pair], on_primary: Differ, on_replica: Differ,
                    protocol: int) -> None:
    steps = [S("CONFIG", "GET", name) for name in SETTINGS]
    on_primary.check(steps, protocol)
    on_replica.check(steps, protocol)
    kind = "*" if protocol == 2 else "%"
    for p in pairs:
        for name in ("replicaof", "slaveof"):
            for port, value in ((p.primary, b""), (p.replica, b"127.0.0.1 %d" % p.primary)):
                got = p.call(port, "CONFIG", "GET", name, protocol=protocol)
                want = [("$", name.encode()), ("$", value)]
                assert got == (kind, want if protocol == 2 else [tuple(want)]), (p.name, got)


def test_config_set(pairs: list[Pair], on_primary: Differ) -> None:
    def bad(name: str, why: str) -> str:
        return f"-\"ERR CONFIG SET failed (possibly related to argument '{name}') - {why}\""

    on_primary.check([
        S("CONFIG", "SET", "replica-priority", "50"),
        S("CONFIG", "GET", "slave-priority", expect="[$b'slave-priority', $b'50']"),
        S("CONFIG", "SET", "slave-priority", "100"),
        S("CONFIG", "GET", "replica-priority", expect="[$b'replica-priority', $b'100']"),
        S("CONFIG", "SET", "replica-priority", "-1",
          expect=bad("replica-priority", "argument must be between 0 and 2147483647 inclusive")),
        S("CONFIG", "SET", "replica-priority", "x",
          expect=bad("replica-priority", "argument couldn't be parsed into an integer")),
        S("CONFIG", "SET", "min-replicas-max-lag", "20"),
        S("CONFIG", "GET", "min-replicas-max-lag"),
        S("CONFIG", "SET", "min-slaves-max-lag", "10"),
        S("CONFIG", "GET", "min-replicas-max-lag"),
        S("CONFIG", "SET", "min-replicas-max-lag", "1.5"),
        S("CONFIG", "SET", "repl-backlog-size", "2mb"),
        S("CONFIG", "GET", "repl-backlog-size", expect="[$b'repl-backlog-size', $b'2097152']"),
        S("CONFIG", "SET", "repl-backlog-size", "0",
          expect=bad("repl-backlog-size", "argument must be between 1 and 9223372036854775807 "
                                          "inclusive")),
        S("CONFIG", "SET", "repl-backlog-size", "-1",
          expect=bad("repl-backlog-size", "argument must be a memory value")),
        S("CONFIG", "SET", "repl-backlog-size", "1x"),
        S("CONFIG", "SET", "repl-backlog-size", "1048576"),
        S("CONFIG", "GET", "repl-backlog-size", expect="[$b'repl-backlog-size', $b'1048576']"),
        S("CONFIG", "SET", "replica-announced", "maybe",
          expect=bad("replica-announced", "argument must be 'yes' or 'no'")),
    ])
    # replica-read-only: a topicsrv replica is always read-only (docs/redis-compatibility.md)
    for p in pairs:
        got = p.call(p.primary, "CONFIG", "SET", "replica-read-only", "no")
        if p.name == "redis":
            assert got == ("+", "OK")
            assert p.call(p.primary, "CONFIG", "SET", "replica-read-only", "yes") == ("+", "OK")
        else:
            assert show(got) == bad("replica-read-only", "can't set immutable config")
        assert p.call(p.primary, "CONFIG", "GET", "replica-read-only") == \
            ("*", [("$", b"replica-read-only"), ("$", b"yes")])


# ---- CLIENT LIST / KILL and the link ---------------------------------------------------------


def _replica_clients(p: Pair, kind: str = "replica") -> list[dict[str, str]]:
    kind_, body = p.call(p.primary, "CLIENT", "LIST", "TYPE", kind)
    assert kind_ == "$", (p.name, kind_)
    return [dict(f.partition("=")[::2] for f in ln.split(" ")) for ln in body.decode().splitlines()]


def _wait_normal_clients(conn: RespConn, n: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        lines = conn.call("CLIENT", "LIST", "TYPE", "normal")[1].decode().splitlines()
        if len(lines) == n or time.monotonic() > deadline:
            assert len(lines) == n, lines
            return
        time.sleep(0.02)


def test_client_list_and_kill_spare_the_link(pairs: list[Pair], on_primary: Differ,
                                             key: str) -> None:
    for p in pairs:
        for kind in ("replica", "slave"):
            links = _replica_clients(p, kind)
            assert len(links) == 1 and links[0]["flags"] == "S", (p.name, links)
            assert links[0]["cmd"] in ("replconf", "psync"), (p.name, links)
        link_id = _replica_clients(p)[0]["id"]
        bystander = RespConn(p.primary)
        conn = RespConn(p.primary)
        try:
            assert bystander.call("PING") == ("+", "PONG")
            _wait_normal_clients(conn, 2)  # the two above (closed ones may linger a moment)
            # Sentinel's failover sends these: normal clients go, the caller and the link stay
            assert conn.call("CLIENT", "KILL", "TYPE", "normal") == (":", 1), p.name
            assert conn.call("CLIENT", "KILL", "TYPE", "pubsub") == (":", 0), p.name
            with pytest.raises(OSError):
                bystander.call("PING")
            assert [c["id"] for c in _replica_clients(p)] == [link_id], p.name
            assert conn.call("SET", key, "v") == ("+", "OK")
            assert conn.call("WAIT", "1", "5000") == (":", 1), p.name
        finally:
            bystander.close()
            conn.close()
    on_primary.check([S("CLIENT", "LIST", "TYPE", "master", expect="$b''")])
    # the link is a replica client: TYPE replica kills it, and the replica links up again
    for p in pairs:
        assert p.call(p.primary, "CLIENT", "KILL", "TYPE", "replica") == (":", 1), p.name
    for p in pairs:
        wait_link_up(p)


def test_documented_differences_on_replica(pairs: list[Pair]) -> None:
    """docs/redis-compatibility.md, "Replication": the link is no client of the replica, and a
    flagged script in MULTI is refused when EXEC runs it rather than while queued."""
    for p in pairs:
        kind, body = p.call(p.replica, "CLIENT", "LIST", "TYPE", "master")
        lines = body.decode().splitlines()
        if p.name == "redis":
            assert len(lines) == 1 and " flags=M " in lines[0], lines
        else:
            assert (kind, lines) == ("$", []), (kind, lines)
        conn = RespConn(p.replica)
        try:
            assert conn.call("MULTI") == ("+", "OK")
            queued = conn.call("EVAL", "#!lua\nreturn 1", "0")
            got = conn.call("EXEC")
        finally:
            conn.close()
        if p.name == "redis":
            assert (show(queued), show(got)) == (READONLY, EXECABORT)
        else:
            assert (show(queued), show(got)) == ("+'QUEUED'", f"[{READONLY}]")


# ---- a replica promoted and sent back --------------------------------------------------------


def test_replica_promoted_and_sent_back(pairs: list[Pair], key: str) -> None:
    """REPLICAOF NO ONE makes the replica a writable primary without replicas; REPLICAOF
    host port makes it follow again, dropping what it wrote meanwhile (the primary's data)."""
    for p in pairs:
        assert p.call(p.replica, "REPLICAOF", "NO", "ONE") == ("+", "OK"), p.name
        role = p.call(p.replica, "ROLE")
        assert shape(role) == ("*", [("$", b"master"), (":", "<int>"), ("*", [])]), show(role)
        assert p.call(p.replica, "REPLICAOF", "NO", "ONE") == ("+", "OK"), p.name
        # the old replid stays valid up to the promotion's offset (PSYNC2); Redis shows the
        # first offset past it
        info = dict(_info(p.replica)[1])
        assert int(info["second_repl_offset"]) == int(info["master_repl_offset"]) + 1, \
            (p.name, info)
        assert p.call(p.replica, "SET", key, "local") == ("+", "OK"), p.name
    _check_info(pairs, lambda p: p.replica, [f for f in PRIMARY_FIELDS if f != "slave0"],
                {**REPLICA_VARYING, "second_repl_offset": r"\d+"}, 2)
    for p in pairs:
        assert p.call(p.replica, "REPLICAOF", "127.0.0.1", p.primary) == ("+", "OK"), p.name
    for p in pairs:
        wait_link_up(p)
        assert p.call(p.replica, "GET", key) == ("nullbulk",), p.name
        assert p.call(p.replica, "GET", SEED) == ("$", b"v"), p.name
        assert show(p.call(p.replica, "SET", key, "v")) == READONLY, p.name
    test_role_on_both_roles(pairs, _differ(pairs, "primary"), 2)
