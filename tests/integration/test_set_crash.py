"""Real processes: sets through kill -9 and restarts (issue 36). `fsync`: every acknowledged
set write is back, SPOP's pops and SMOVE's moves exactly once, each set in the encoding it had
(the journaled changes carry the encoding limits of their time, so replay converts at the same
change even after CONFIG SET); `disk`: a prefix of the acknowledged writes; `memory`: nothing.
A clean stop's checkpoint carries sets whole, their TTLs and encodings too."""

from __future__ import annotations

import time
from typing import Any

import pytest
import redis


def _writes(r: redis.Redis) -> set[bytes]:
    pipe = r.pipeline(transaction=False)
    for i in range(300):
        pipe.sadd(f"tags:{i}", "a", f"t{i}", str(i))
        pipe.sadd("seen", str(i))
    pipe.execute()
    r.sadd("pool", *[f"job{j}" for j in range(200)])
    popped = set(r.spop("pool", 50))  # type: ignore[arg-type]
    for j in range(20):
        r.smove("pool", "taken", f"job{j}")  # some were popped already: 0
    r.sinterstore("both", ["pool", "taken"])
    r.sunionstore("union", ["tags:1", "tags:2"])
    r.config_set("set-max-intset-entries", 3)
    r.sadd("ints", 1, 2, 3)
    r.sadd("ints", 4)  # 4 > 3 under the lowered limit: a hashtable from here
    r.srem("tags:7", "a")
    r.srem("tags:8", "a", "t8", "8")  # its last members: the key goes
    return popped


@pytest.mark.parametrize("cls", ["fsync", "disk", "memory"])
def test_kill9_under_set_writes(server_factory: Any, tmp_path: Any, cls: str) -> None:
    data = tmp_path / "data"
    srv = server_factory("--keyspace-durability", cls, data_dir=data)
    r = redis.Redis(port=srv.resp_port, socket_timeout=10)
    popped = _writes(r)
    taken = r.smembers("taken")
    srv.kill()
    srv2 = server_factory("--keyspace-durability", cls, data_dir=data)
    r2 = redis.Redis(port=srv2.resp_port, socket_timeout=10)
    present = [i for i in range(300) if r2.exists(f"tags:{i}")]
    if cls == "fsync":
        assert r2.scard("seen") == 300 and r2.object("encoding", "seen") == b"intset"
        assert present == [i for i in range(300) if i != 8]
        assert r2.smembers("tags:7") == {b"t7", b"7"}
        pool = r2.smembers("pool")
        jobs = {f"job{j}".encode() for j in range(200)}
        assert r2.smembers("taken") == taken and not pool & taken and not pool & popped
        assert pool | taken | popped == jobs  # each job in exactly one place
        assert r2.smembers("both") == set() and r2.exists("both") == 0
        assert r2.smembers("union") == {b"a", b"t1", b"1", b"t2", b"2"}
        assert r2.smembers("ints") == {b"1", b"2", b"3", b"4"}
        assert r2.object("encoding", "ints") == b"hashtable"
        assert r2.type("tags:9") == b"set"
    elif cls == "memory":
        assert present == [] and r2.dbsize() == 0
    else:  # a prefix of the acknowledged writes, in order (tags:8 aside: its SREM is last)
        tags = [i for i in present if i != 8]
        assert tags == [i for i in range(300) if i != 8][:len(tags)]
        assert len(tags) - 1 <= r2.scard("seen") <= len(tags) + 1


def test_a_checkpoint_carries_sets(server_factory: Any, tmp_path: Any) -> None:
    data = tmp_path / "data"
    srv = server_factory("--keyspace-durability", "fsync", data_dir=data)
    r = redis.Redis(port=srv.resp_port, socket_timeout=10)
    r.sadd("big", *[f"m{j}" for j in range(3000)])
    r.srem("big", *[f"m{j}" for j in range(1, 3000)])  # one member left: still a hashtable
    r.sadd("ttl", "x")
    r.pexpireat("ttl", int(time.time() * 1000) + 3_600_000)
    r.sadd("ints", 5, -1, 3)
    r.sadd("mixed", 1, 2)
    r.sadd("mixed", "x")
    r.srem("mixed", "x")  # all integers again, yet no intset any more (as Redis)
    srv.stop()  # a clean stop takes the final checkpoint: the restart loads the sets from it
    srv2 = server_factory("--keyspace-durability", "fsync", data_dir=data)
    r2 = redis.Redis(port=srv2.resp_port, socket_timeout=10)
    assert r2.smembers("big") == {b"m0"} and r2.object("encoding", "big") == b"hashtable"
    assert r2.smembers("ttl") == {b"x"} and r2.ttl("ttl") > 3000
    assert r2.sscan("ints") == (0, [b"-1", b"3", b"5"])  # an intset: sorted
    assert r2.object("encoding", "ints") == b"intset"
    assert r2.object("encoding", "mixed") == b"hashtable" and r2.smembers("mixed") == {b"1", b"2"}
