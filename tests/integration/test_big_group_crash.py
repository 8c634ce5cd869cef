"""Real processes, issue 34 item 4: a Lua script or a MULTI/EXEC of more than 65,535 writes (the
16-bit frame count of the old T_GROUP frame) is answered normally and, after kill -9 right
after its reply, comes back whole; so does a script of 1,000,000 SETs (storage/txgroup.py
Rules 8-9: a group is limited by memory only). `--keyspace-durability fsync`, so every
answered write must be back; a write answered after the big one is back too."""

from __future__ import annotations

import time
from typing import Any

import pytest
import redis

from topicsrv.storage.state import shard_of

SHARDS = 4
STREAM = next(f"big{i}" for i in range(100) if shard_of(f"big{i}", SHARDS) != 0)  # not shard 0
ARGS = ("--keyspace-durability", "fsync", "--wal-shards", str(SHARDS))
SETS = """
for i = 1, tonumber(ARGV[1]) do redis.call('SET', 'k:' .. i, i) end
redis.call('XADD', KEYS[1], '*', 'n', ARGV[1])
return redis.call('DBSIZE')
"""


def _restart(server_factory: Any, srv: Any) -> redis.Redis:
    """kill -9, start again on the same data dir; a client of the new process."""
    srv.kill()
    again = server_factory(*ARGS, data_dir=srv.data_dir)
    return redis.Redis(port=again.resp_port, socket_timeout=300)


def _assert_back(r: redis.Redis, n: int) -> None:
    assert r.dbsize() == n + 2  # the n strings, the stream, "after"
    assert [r.get(f"k:{i}") for i in (1, n // 2, n)] == [b"1", str(n // 2).encode(), str(n).encode()]
    assert [f[b"n"] for _, f in r.xrange(STREAM)] == [str(n).encode()]
    assert r.get("after") == b"1"


def test_a_script_of_70000_writes_is_answered_and_survives_kill9(server_factory: Any) -> None:
    srv = server_factory(*ARGS)
    r = redis.Redis(port=srv.resp_port, socket_timeout=120)
    assert r.eval(SETS, 1, STREAM, 70_000) == 70_001  # on 27171bd: ERR internal error (logged)
    assert r.set("after", 1) is True
    _assert_back(_restart(server_factory, srv), 70_000)


def test_an_exec_of_70000_writes_is_answered_and_survives_kill9(server_factory: Any) -> None:
    srv = server_factory(*ARGS)
    r = redis.Redis(port=srv.resp_port, socket_timeout=120)
    pipe = r.pipeline(transaction=True)
    for i in range(1, 70_001):
        pipe.set(f"k:{i}", i)
    pipe.xadd(STREAM, {"n": 70_000})
    replies = pipe.execute()
    assert replies[:-1] == [True] * 70_000 and isinstance(replies[-1], bytes)
    assert r.set("after", 1) is True
    _assert_back(_restart(server_factory, srv), 70_000)


@pytest.mark.slow
def test_a_script_of_a_million_writes_survives_kill9(server_factory: Any) -> None:
    """One EVAL loop (it runs past busy-reply-threshold, so its group spans turns: Rule 7)."""
    srv = server_factory(*ARGS)
    r = redis.Redis(port=srv.resp_port, socket_timeout=300)
    t0 = time.monotonic()
    assert r.eval(SETS, 1, STREAM, 1_000_000) == 1_000_001
    assert r.set("after", 1) is True
    print(f"1,000,000 SETs in one EVAL: {time.monotonic() - t0:.1f} s")
    t0 = time.monotonic()
    r2 = _restart(server_factory, srv)
    print(f"kill -9 and restart (replay): {time.monotonic() - t0:.1f} s")
    _assert_back(r2, 1_000_000)
