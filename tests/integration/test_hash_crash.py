"""Real processes: hashes through kill -9 and restarts (issue 35). `fsync`: every acknowledged
hash write is back, HINCRBYFLOAT's value byte for byte and each hash in the encoding it had
(the journaled changes carry the listpack limits of their time, so replay converts at the same
change even after CONFIG SET); `disk`: a prefix of the acknowledged writes; `memory`:
nothing. A clean stop's checkpoint carries hashes whole, their TTLs and encodings too."""

from __future__ import annotations

import time
from typing import Any

import pytest
import redis


def _writes(r: redis.Redis) -> None:
    pipe = r.pipeline(transaction=False)
    for i in range(300):
        pipe.hset(f"user:{i}", mapping={"name": f"n{i}", "age": i})
        pipe.hincrby("counter", "n", 1)
    pipe.execute()
    r.hincrbyfloat("counter", "f", "0.1")
    r.hincrbyfloat("counter", "f", "1.5e3")
    r.hset("big", mapping={f"f{j}": f"v{j}" for j in range(600)})  # past 512: a hashtable
    r.hdel("big", *[f"f{j}" for j in range(0, 600, 2)])
    r.config_set("hash-max-listpack-entries", 3)
    r.hset("small", mapping={"a": 1, "b": 2, "c": 3})
    r.hset("small", "d", 4)  # 4 > 3 under the lowered limit: a hashtable from here
    r.hsetnx("small", "a", "no")
    r.hdel("user:7", "age")
    r.hdel("user:8", "name", "age")  # its last fields: the key goes


@pytest.mark.parametrize("cls", ["fsync", "disk", "memory"])
def test_kill9_under_hash_writes(server_factory: Any, tmp_path: Any, cls: str) -> None:
    data = tmp_path / "data"
    srv = server_factory("--keyspace-durability", cls, data_dir=data)
    r = redis.Redis(port=srv.resp_port, socket_timeout=10)
    _writes(r)
    srv.kill()
    srv2 = server_factory("--keyspace-durability", cls, data_dir=data)
    r2 = redis.Redis(port=srv2.resp_port, socket_timeout=10)
    counter = int(r2.hget("counter", "n") or 0)
    present = [i for i in range(300) if r2.exists(f"user:{i}")]
    if cls == "fsync":
        assert counter == 300 and r2.hget("counter", "f") == b"1500.09999999999999998"
        assert present == [i for i in range(300) if i != 8]
        assert r2.hgetall("user:7") == {b"name": b"n7"}
        assert r2.hgetall("user:9") == {b"name": b"n9", b"age": b"9"}
        assert r2.hgetall("big") == {f"f{j}".encode(): f"v{j}".encode() for j in range(1, 600, 2)}
        assert r2.hgetall("small") == {b"a": b"1", b"b": b"2", b"c": b"3", b"d": b"4"}
        assert r2.object("encoding", "big") == b"hashtable"
        assert r2.object("encoding", "small") == b"hashtable"
        assert r2.object("encoding", "user:9") == b"listpack" and r2.type("user:9") == b"hash"
    elif cls == "memory":
        assert counter == 0 and present == [] and r2.dbsize() == 0
    else:  # a prefix of the acknowledged writes, in order (user:8 aside: its HDEL is last)
        users = [i for i in present if i != 8]
        assert users == [i for i in range(300) if i != 8][:len(users)]
        assert len(users) - 1 <= counter <= len(users) + 1


def test_a_checkpoint_carries_hashes(server_factory: Any, tmp_path: Any) -> None:
    data = tmp_path / "data"
    srv = server_factory("--keyspace-durability", "fsync", data_dir=data)
    r = redis.Redis(port=srv.resp_port, socket_timeout=10)
    r.hset("big", mapping={f"f{j}": f"v{j}" * 5 for j in range(2000)})
    r.hdel("big", *[f"f{j}" for j in range(1, 2000)])  # one field left: still a hashtable
    r.hset("ttl", "f", "v")
    r.pexpireat("ttl", int(time.time() * 1000) + 3_600_000)
    r.hset("lp", mapping={"x": "1", "y": "2"})
    r.hincrbyfloat("lp", "y", "0.5")
    srv.stop()  # a clean stop takes the final checkpoint: the restart loads the hashes from it
    srv2 = server_factory("--keyspace-durability", "fsync", data_dir=data)
    r2 = redis.Redis(port=srv2.resp_port, socket_timeout=10)
    assert r2.hgetall("big") == {b"f0": b"v0" * 5} and r2.object("encoding", "big") == b"hashtable"
    assert r2.hgetall("ttl") == {b"f": b"v"} and r2.ttl("ttl") > 3000
    assert r2.hgetall("lp") == {b"x": b"1", b"y": b"2.5"} and r2.object("encoding", "lp") == b"listpack"
    assert r2.hkeys("lp") == [b"x", b"y"]  # insertion order kept


@pytest.mark.parametrize("how", ["kill", "stop"])
def test_field_ttls_through_restarts(server_factory: Any, tmp_path: Any, how: str) -> None:
    """Redis 7.4's field expiry: a field whose deadline passed while the server was down never
    comes back (nor a hash whose last field it was), an unexpired one keeps its deadline, in
    the journal (kill -9) and in the checkpoint (a clean stop), listpackex and hashtable."""
    data = tmp_path / "data"
    srv = server_factory("--keyspace-durability", "fsync", data_dir=data)
    r = redis.Redis(port=srv.resp_port, socket_timeout=10)
    soon = int(time.time() * 1000) + 300
    r.hset("h", mapping={"keep": "1", "short": "2", "long": "3"})
    r.hset("gone", "only", "1")
    r.hset("big", mapping={f"f{j}": "v" for j in range(600)})
    assert r.execute_command("HPEXPIREAT", "h", soon, "FIELDS", 1, "short") == [1]
    assert r.execute_command("HPEXPIREAT", "gone", soon, "FIELDS", 1, "only") == [1]
    assert r.execute_command("HPEXPIREAT", "big", soon, "FIELDS", 2, "f1", "f2") == [1, 1]
    assert r.execute_command("HEXPIRE", "h", 3600, "FIELDS", 1, "long") == [1]
    assert r.execute_command("HEXPIRE", "big", 3600, "FIELDS", 1, "f3") == [1]
    r.hset("h", "keep", "again")  # an HSET after the TTL was set
    if how == "kill":
        srv.kill()
    else:
        srv.stop()
    left = soon - int(time.time() * 1000)
    if left > 0:  # the restart must come after the short deadlines
        time.sleep(left / 1000 + 0.05)
    srv2 = server_factory("--keyspace-durability", "fsync", data_dir=data)
    r2 = redis.Redis(port=srv2.resp_port, socket_timeout=10)
    assert r2.exists("gone") == 0 and r2.dbsize() == 2
    assert r2.hgetall("h") == {b"keep": b"again", b"long": b"3"}
    assert r2.object("encoding", "h") == b"listpackex"
    ttl = r2.execute_command("HTTL", "h", "FIELDS", 3, "long", "keep", "short")
    assert 3590 <= ttl[0] <= 3600 and ttl[1:] == [-1, -2]
    assert r2.hlen("big") == 598 and r2.object("encoding", "big") == b"hashtable"
    assert r2.execute_command("HTTL", "big", "FIELDS", 2, "f3", "f1")[1] == -2
