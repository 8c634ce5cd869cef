"""Real processes: sorted sets through kill -9 and restarts (issue 36). `fsync`: every
acknowledged write is back, scores bit for bit (ZINCRBY journals the result) and each set in
the encoding it had (the changes carry the listpack limits of their time); `disk`: a prefix of
the acknowledged writes; `memory`: nothing. A clean stop's checkpoint carries sorted sets whole,
their TTLs and encodings too."""

from __future__ import annotations

import time
from typing import Any

import pytest
import redis


def _writes(r: redis.Redis) -> None:
    pipe = r.pipeline(transaction=False)
    for i in range(300):
        pipe.zadd("board", {f"p{i}": i % 17})
        pipe.zincrby("counter", 0.1, "n")
    pipe.execute()
    r.zadd("big", {f"m{j}": j / 3 for j in range(600)})  # past 128: a skiplist
    r.zremrangebyrank("big", 0, 99)
    r.zpopmax("big", 50)
    r.config_set("zset-max-listpack-entries", 3)
    r.zadd("small", {"a": 1, "b": 2, "c": 3})
    r.zadd("small", {"d": 4})  # 4 > 3 under the lowered limit: a skiplist from here
    r.zunionstore("union", ["small", "board"], aggregate="MAX")
    r.zadd("gone", {"x": 1})
    r.zpopmin("gone")  # its last member: the key goes


def _counter_after(n: int) -> float:
    total = 0.0
    for _ in range(n):
        total += 0.1
    return total


@pytest.mark.parametrize("cls", ["fsync", "disk", "memory"])
def test_kill9_under_zset_writes(server_factory: Any, tmp_path: Any, cls: str) -> None:
    data = tmp_path / "data"
    srv = server_factory("--keyspace-durability", cls, data_dir=data)
    r = redis.Redis(port=srv.resp_port, socket_timeout=10)
    _writes(r)
    srv.kill()
    srv2 = server_factory("--keyspace-durability", cls, data_dir=data)
    r2 = redis.Redis(port=srv2.resp_port, socket_timeout=10)
    board = r2.zrange("board", 0, -1, withscores=True)
    if cls == "fsync":
        assert len(board) == 300 and r2.zscore("counter", "n") == _counter_after(300)
        assert board == sorted(((f"p{i}".encode(), float(i % 17)) for i in range(300)),
                               key=lambda p: (p[1], p[0]))
        assert r2.zcard("big") == 450 and r2.zrange("big", 0, 0) == [b"m100"]
        assert r2.zrange("big", -1, -1, withscores=True) == [(b"m549", 549 / 3)]
        assert r2.object("encoding", "big") == b"skiplist"
        assert r2.object("encoding", "small") == b"skiplist"
        assert r2.object("encoding", "board") == b"skiplist" and r2.type("board") == b"zset"
        assert r2.zcard("union") == 304 and r2.exists("gone") == 0
    elif cls == "memory":
        assert board == [] and r2.dbsize() == 0
    else:  # a prefix of the acknowledged writes, in order
        players = sorted(int(m[1:]) for m, _ in board)
        assert players == list(range(len(players)))
        counted = round((r2.zscore("counter", "n") or 0) * 10)
        assert len(players) - 1 <= counted <= len(players) + 1


def test_a_checkpoint_carries_sorted_sets(server_factory: Any, tmp_path: Any) -> None:
    data = tmp_path / "data"
    srv = server_factory("--keyspace-durability", "fsync", data_dir=data)
    r = redis.Redis(port=srv.resp_port, socket_timeout=10)
    r.zadd("big", {f"m{j}": j for j in range(3000)})
    r.zremrangebyscore("big", 1, "+inf")  # one member left: still a skiplist
    r.zadd("ttl", {"a": 1.5})
    r.pexpireat("ttl", int(time.time() * 1000) + 3_600_000)
    r.zadd("lp", {"x": -0.0, "y": float("inf"), "z": 1e-300})
    r.zincrby("lp", 0.5, "x")
    srv.stop()  # a clean stop takes the final checkpoint: the restart loads the sets from it
    srv2 = server_factory("--keyspace-durability", "fsync", data_dir=data)
    r2 = redis.Redis(port=srv2.resp_port, socket_timeout=10)
    assert r2.zrange("big", 0, -1, withscores=True) == [(b"m0", 0.0)]
    assert r2.object("encoding", "big") == b"skiplist"
    assert r2.zscore("ttl", "a") == 1.5 and r2.ttl("ttl") > 3000
    assert r2.zrange("lp", 0, -1, withscores=True) == [(b"z", 1e-300), (b"x", 0.5),
                                                        (b"y", float("inf"))]
    assert r2.object("encoding", "lp") == b"listpack"
