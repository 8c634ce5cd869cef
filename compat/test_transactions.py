"""Transactions, differential (redis-server vs topicsrv on both --resp-io paths): MULTI/EXEC
replies, EXECABORT, DISCARD, WATCH conflicts, blocking reads inside MULTI, and redis-py's
default `pipeline()` and `watch()` optimistic-locking loop."""

from __future__ import annotations

from typing import Any

import pytest
import redis
from compat_harness import S, per_io_path  # type: ignore[import-not-found]

server, ours = per_io_path("topicsrv-tx-")  # this module runs once per RESP I/O path


@pytest.mark.parametrize("proto", [2, 3])
def test_multi_exec_replies(differ: Any, key: str, proto: int) -> None:
    k, other = f"{key}:{proto}", f"{key}:{proto}:other"
    differ.check([
        S("MULTI"),
        S("XADD", k, "*", "a", "1"),
        S("XADD", k, "*", "b", "2"),
        S("XLEN", k),
        S("XRANGE", k, "-", "+"),
        S("XREAD", "STREAMS", k, other, "0", "0"),
        S("EXEC"),
        S("MULTI"),
        S("EXEC"),
        S("XLEN", k),
    ], proto)


@pytest.mark.parametrize("proto", [2, 3])
def test_errors_outside_and_inside_multi(differ: Any, key: str, proto: int) -> None:
    k = f"{key}:{proto}"
    differ.check([
        S("EXEC"),
        S("DISCARD"),
        S("MULTI"),
        S("MULTI"),  # not nested, and the transaction goes on
        S("WATCH", k),  # not inside MULTI, and the transaction goes on
        S("PING"),
        S("EXEC"),
        S("WATCH"),
        S("UNWATCH", "x"),
        S("MULTI"),
        S("DISCARD"),
        S("EXEC"),
    ], proto)


@pytest.mark.parametrize("proto", [2, 3])
def test_queue_time_errors_abort(differ: Any, key: str, proto: int) -> None:
    k = f"{key}:{proto}"
    differ.check([
        S("MULTI"),
        S("XADD", k, "*", "a", "1"),
        S("NOSUCHCOMMAND", "x"),
        S("XADD", k, "*", "b", "2"),
        S("EXEC"),
        S("XLEN", k),  # nothing ran
        S("MULTI"),
        S("XADD", k),  # arity
        S("EXEC"),
        S("MULTI"),
        S("XINFO", "NOSUCH", k),  # unknown subcommand
        S("EXEC"),
        S("EXISTS", k),
    ], proto)


@pytest.mark.parametrize("proto", [2, 3])
def test_runtime_errors_are_per_command(differ: Any, key: str, proto: int) -> None:
    k = f"{key}:{proto}"
    differ.check([
        S("MULTI"),
        S("XADD", k, "*", "a", "1"),
        S("XADD", k, "BOGUS", "*", "f", "v"),  # syntax: at EXEC time, as Redis
        S("XRANGE", k, "-", "+", "COUNT"),
        S("XREADGROUP", "GROUP", "g", "c", "STREAMS", k, ">"),  # NOGROUP
        S("XLEN", k),
        S("EXEC"),
        S("XLEN", k),
    ], proto)


@pytest.mark.parametrize("proto", [2, 3])
def test_blocking_reads_do_not_block_in_multi(differ: Any, key: str, proto: int) -> None:
    k = f"{key}:{proto}"
    differ.check([
        S("MULTI"),
        S("XREAD", "BLOCK", "0", "STREAMS", k, "$"),
        S("XADD", k, "*", "a", "1"),
        S("XREAD", "BLOCK", "0", "STREAMS", k, "0"),
        S("XGROUP", "CREATE", k, "g", "$"),
        S("XREADGROUP", "GROUP", "g", "c", "BLOCK", "0", "STREAMS", k, ">"),
        S("EXEC"),
    ], proto)


def test_watch_conflicts(targets: list[Any], key: str) -> None:
    """WATCH: EXEC returns nil once another client changed the key (XADD, DEL, XTRIM);
    untouched keys, UNWATCH and DISCARD leave it working; EXEC forgets the watches."""
    for target in targets:
        r = redis.Redis(port=target.port, socket_timeout=10)
        other = redis.Redis(port=target.port, socket_timeout=10)
        k = f"{key}:{target.name}"
        r.xadd(k, {"a": "1"})
        for change in (("XADD", k, "*", "x", "1"), ("XTRIM", k, "MAXLEN", "0"), ("DEL", k)):
            r.execute_command("WATCH", k)
            other.execute_command(*change)
            r.execute_command("MULTI")
            r.execute_command("XADD", k, "*", "b", "2")
            assert r.execute_command("EXEC") is None, target.name
            r.execute_command("MULTI")  # EXEC dropped the watch: this one runs
            r.execute_command("XLEN", k)
            assert len(r.execute_command("EXEC")) == 1, target.name
        r.execute_command("WATCH", k, f"{k}:untouched")
        other.xadd(f"{k}:elsewhere", {"x": "1"})
        r.execute_command("MULTI")
        r.execute_command("XLEN", k)
        assert r.execute_command("EXEC") is not None, target.name
        r.execute_command("WATCH", k)
        r.execute_command("UNWATCH")
        other.xadd(k, {"x": "1"})
        r.execute_command("MULTI")
        r.execute_command("XLEN", k)
        assert r.execute_command("EXEC") is not None, target.name
        r.execute_command("WATCH", k)
        r.execute_command("MULTI")
        r.execute_command("DISCARD")
        other.xadd(k, {"x": "1"})
        r.execute_command("MULTI")
        r.execute_command("XLEN", k)
        assert r.execute_command("EXEC") is not None, target.name
        r.close()
        other.close()


@pytest.mark.parametrize("protocol", [2, 3])
def test_redis_py_default_pipeline(targets: list[Any], key: str, protocol: int) -> None:
    """`r.pipeline()` is MULTI/EXEC by default: results, runtime errors, EXECABORT."""
    results = {}
    for target in targets:
        r = redis.Redis(port=target.port, protocol=protocol, socket_timeout=10,
                        decode_responses=True)
        k = f"{key}:{target.name}:{protocol}"
        with r.pipeline() as p:
            p.xadd(k, {"a": "1"}).xadd(k, {"b": "2"}).xlen(k).xrange(k, count=1)
            out = p.execute()
        assert len(out) == 4 and out[2] == 2 and out[3][0][1] == {"a": "1"}
        with r.pipeline() as p:
            p.xlen(k).execute_command("XADD", k, "BOGUS", "*", "f", "v").xlen(k)
            got = p.execute(raise_on_error=False)
        assert got[0] == 2 and isinstance(got[1], redis.ResponseError) and got[2] == 2
        with r.pipeline() as p:
            p.xadd(k, {"c": "3"}).execute_command("NOSUCHCOMMAND")
            with pytest.raises(redis.ResponseError) as e:
                p.execute()
            results[target.name] = str(e.value)
        assert r.xlen(k) == 2  # EXECABORT: nothing ran
        r.close()
    assert len(set(results.values())) == 1, results


def test_redis_py_watch_loop(targets: list[Any], key: str) -> None:
    """The optimistic-locking loop of redis-py's docs: WatchError on conflict, then a retry
    that succeeds."""
    for target in targets:
        r = redis.Redis(port=target.port, socket_timeout=10)
        other = redis.Redis(port=target.port, socket_timeout=10)
        k = f"{key}:{target.name}"
        r.xadd(k, {"n": "0"})
        attempts = 0
        with r.pipeline() as p:
            while True:
                try:
                    p.watch(k)
                    n = p.xlen(k)
                    attempts += 1
                    if attempts == 1:
                        other.xadd(k, {"n": "race"})
                    p.multi()
                    p.xadd(k, {"n": str(n)})
                    p.execute()
                    break
                except redis.WatchError:
                    continue
        assert attempts == 2, target.name
        assert r.xlen(k) == 3
        with pytest.raises(redis.WatchError):
            with r.pipeline() as p:
                p.watch(k)
                other.delete(k)
                p.multi()
                p.xadd(k, {"n": "x"})
                p.execute()
        assert r.exists(k) == 0
        r.close()
        other.close()


def _client_fields(target: Any, client_id: int) -> dict[str, str]:
    """The CLIENT LIST fields of one client, asked from another connection."""
    c = target.conn()
    try:
        lines = c.call("CLIENT", "LIST", "ID", str(client_id))[1].decode().split("\n")
    finally:
        c.close()
    return dict(part.split("=", 1) for part in lines[0].split())


def test_client_list_shows_multi_and_dirty_watch(targets: list[Any], key: str) -> None:
    """CLIENT LIST flags `x` (in MULTI) with `multi=<queued>`, `d` (a watched key changed),
    back to `N` / `multi=-1` after DISCARD."""
    for t in targets:
        k = f"{key}:{t.name}"
        a, other = t.conn(), t.conn()
        client_id = a.call("CLIENT", "ID")[1]
        assert _client_fields(t, client_id)["flags"] == "N", t.name
        a.call("WATCH", k)
        a.call("MULTI")
        a.call("XADD", k, "*", "a", "1")
        a.call("XLEN", k)
        fields = _client_fields(t, client_id)
        assert (fields["flags"], fields["multi"]) == ("x", "2"), (t.name, fields)
        other.call("XADD", k, "*", "b", "2")
        fields = _client_fields(t, client_id)
        assert (fields["flags"], fields["multi"]) == ("xd", "2"), (t.name, fields)
        assert a.call("DISCARD") == ("+", "OK")
        fields = _client_fields(t, client_id)
        assert (fields["flags"], fields["multi"]) == ("N", "-1"), (t.name, fields)
        a.close()
        other.close()


@pytest.mark.parametrize("proto", [2, 3])
def test_no_multi_commands_abort(differ: Any, key: str, proto: int) -> None:
    """SHUTDOWN is flagged `no-multi`: refused at queue time, the transaction aborts (and the
    server stays up)."""
    k = f"{key}:{proto}"
    differ.check([S("MULTI"), S("SET", k, "v"), S("SHUTDOWN"), S("EXEC"), S("GET", k)], proto)


def _raw(s: Any, line: bytes) -> bytes:
    s.sendall(line + b"\r\n")
    return bytes(s.recv(4096))


def test_exec_over_maxmemory_aborts(targets: list[Any], key: str) -> None:
    """Over `maxmemory` at EXEC time, a transaction queueing a `denyoom` command is discarded
    with EXECABORT and the OOM text (redis-server's processCommand); reads alone still run."""
    import socket

    replies = {}
    for target in targets:
        admin = redis.Redis(port=target.port, socket_timeout=10)
        s = socket.create_connection(("127.0.0.1", target.port), timeout=10)
        k = f"{key}:{target.name}".encode()
        got = [_raw(s, b"MULTI"), _raw(s, b"SET " + k + b" 1"), _raw(s, b"GET " + k)]
        limit = admin.config_get("maxmemory")["maxmemory"]
        admin.config_set("maxmemory", 1)
        try:
            got.append(_raw(s, b"EXEC"))
            got += [_raw(s, b"MULTI"), _raw(s, b"GET " + k), _raw(s, b"EXEC")]
        finally:
            admin.config_set("maxmemory", limit)
        got.append(_raw(s, b"EXISTS " + k))
        replies[target.name] = got
        s.close()
        admin.close()
    first, *rest = replies.values()
    assert first[3].startswith(b"-EXECABORT Transaction discarded because of: OOM "), first
    assert rest == [first] * len(rest)


@pytest.mark.parametrize("proto", [2, 3])
def test_a_refused_exec_aborts_the_transaction(differ: Any, key: str, proto: int) -> None:
    """EXEC refused before it runs (here its arity) answers EXECABORT with the refusal and
    leaves MULTI (redis-server's execCommandAbort; the BUSY case is Valkey's multi unit)."""
    differ.check([S("MULTI"), S("SET", key, "1"), S("EXEC", "extra"), S("GET", key),
                  S("PING", "after")], proto)
