"""Real processes: a checkpoint of a big keyspace is written by a forked child
(storage/forksave.py) or, with `--checkpoint-fork no`, in parts (storage/keyspacesave.py) while
the server keeps answering; BGSAVE, SAVE, LASTSAVE and INFO persistence tell about it as
Redis's do; kill -9 while it writes, or after it, loses nothing acknowledged and duplicates
nothing, and leaves no temporary file once the server is back."""

from __future__ import annotations

import time
from typing import Any

import pytest
import redis

KEYS = 200_000
FORK = pytest.mark.parametrize("fork", ["yes", "no"], ids=["fork", "sliced"])


def _fill(r: redis.Redis, n: int = KEYS) -> None:
    pipe = r.pipeline(transaction=False)
    for i in range(0, n, 1000):
        pipe.mset({f"key:{j}": b"v" * 100 for j in range(i, i + 1000)})
    pipe.rpush("list", *range(50_000))
    pipe.hset("hash", mapping={f"f{j}": j for j in range(20_000)})
    pipe.execute()


def _saving(r: redis.Redis) -> bool:
    return bool(r.info("persistence")["rdb_bgsave_in_progress"])


def _start(r: redis.Redis) -> None:
    """BGSAVE, then wait until the checkpoint it asked for is writing the keyspace."""
    saves = r.info("persistence")["rdb_saves"]
    assert r.bgsave() is True  # redis-py's reading of "Background saving started"
    deadline = time.monotonic() + 60
    while not _saving(r):
        assert r.info("persistence")["rdb_saves"] == saves, "the save ended before it was seen"
        assert time.monotonic() < deadline
        time.sleep(0.001)


@FORK
def test_the_server_answers_while_the_keyspace_is_written(server_factory: Any, tmp_path: Any,
                                                          fork: str) -> None:
    srv = server_factory("--keyspace-durability", "fsync", "--checkpoint-fork", fork,
                         data_dir=tmp_path / "data")
    r = redis.Redis(port=srv.resp_port, socket_timeout=30)
    _fill(r)
    before = r.lastsave()
    saves = r.info("persistence")["rdb_saves"]
    _start(r)
    answered_during = written = 0
    while _saving(r):  # writes and reads are served meanwhile, the big keys changed too
        r.set(f"during:{written}", written)
        r.lpush("list", f"new{written}")
        r.hset("hash", "f1", f"changed{written}")
        assert r.get(f"during:{written}") == str(written).encode()
        written += 1
        if _saving(r):
            answered_during += 1
    assert answered_during >= 1
    p = r.info("persistence")
    assert p["rdb_last_bgsave_status"] == "ok" and p["rdb_saves"] == saves + 1
    assert r.lastsave() >= before
    with pytest.raises(redis.ResponseError, match="syntax"):
        r.execute_command("BGSAVE", "NOW")
    assert r.save() is True and r.info("persistence")["rdb_saves"] == saves + 2
    assert r.bgsave(schedule=True) is True
    srv.stop()
    srv2 = server_factory("--keyspace-durability", "fsync", data_dir=tmp_path / "data")
    r2 = redis.Redis(port=srv2.resp_port, socket_timeout=30)
    assert r2.dbsize() == KEYS + 2 + written
    assert r2.get("key:123") == b"v" * 100 and r2.llen("list") == 50_000 + written
    assert r2.hget("hash", "f1") == f"changed{written - 1}".encode()
    assert r2.lindex("list", 0) == f"new{written - 1}".encode()


@FORK
def test_kill9_while_the_keyspace_is_written(server_factory: Any, tmp_path: Any, fork: str) -> None:
    srv = server_factory("--keyspace-durability", "fsync", "--checkpoint-fork", fork,
                         data_dir=tmp_path / "data")
    r = redis.Redis(port=srv.resp_port, socket_timeout=30)
    _fill(r)
    _start(r)
    r.set("after-the-cut", "1")
    r.delete("key:7")
    r.rpush("list", "last")
    tmp_seen = bool(list((tmp_path / "data").glob("keyspace-*.bin.tmp")))
    srv.kill()
    srv2 = server_factory("--keyspace-durability", "fsync", data_dir=tmp_path / "data")
    r2 = redis.Redis(port=srv2.resp_port, socket_timeout=30)
    assert r2.dbsize() == KEYS + 2 and r2.get("after-the-cut") == b"1" and r2.get("key:7") is None
    assert r2.get(f"key:{KEYS - 1}") == b"v" * 100 and r2.rpop("list") == b"last"
    r2.save()  # a checkpoint removes what the killed one left
    assert not list((tmp_path / "data").glob("*.tmp")), tmp_seen


def _dump(r: redis.Redis, names: list[str]) -> dict[str, Any]:
    pipe = r.pipeline(transaction=False)
    for name in names:
        pipe.type(name)
    kinds = pipe.execute()
    read = {b"string": pipe.get, b"list": lambda n: pipe.lrange(n, 0, -1), b"hash": pipe.hgetall}
    for name, kind in zip(names, kinds, strict=True):
        read[kind](name)
    return dict(zip(names, pipe.execute(), strict=True))


def test_kill9_after_a_forked_checkpoint_loses_and_duplicates_nothing(
        server_factory: Any, tmp_path: Any) -> None:
    """The writes during the child's save and after it come back from the WAL after the cut,
    once each (a list push replayed twice would show)."""
    srv = server_factory("--keyspace-durability", "fsync", data_dir=tmp_path / "data")
    r = redis.Redis(port=srv.resp_port, socket_timeout=30)
    _fill(r, 50_000)
    model = {"list": [str(i).encode() for i in range(50_000)],
             "hash": {f"f{j}".encode(): str(j).encode() for j in range(20_000)}}
    model.update({f"key:{j}": b"v" * 100 for j in range(50_000)})
    forks = r.info("stats")["total_forks"]
    _start(r)
    i = 0
    while _saving(r) or i < 3:
        r.set(f"during:{i}", i)
        r.rpush("list", f"d{i}")
        r.hset("hash", "f1", f"d{i}")
        r.delete(f"key:{i}")
        model[f"during:{i}"] = str(i).encode()
        model["list"].append(f"d{i}".encode())
        model["hash"][b"f1"] = f"d{i}".encode()
        model.pop(f"key:{i}")
        i += 1
    stats, p = r.info("stats"), r.info("persistence")
    assert stats["total_forks"] == forks + 1 and stats["latest_fork_usec"] > 0
    assert p["rdb_last_bgsave_status"] == "ok" and p["rdb_last_cow_size"] >= 0
    r.lpush("list", "after")
    r.set("after", "1")
    model["list"].insert(0, b"after")
    model["after"] = b"1"
    srv.kill()
    srv2 = server_factory("--keyspace-durability", "fsync", data_dir=tmp_path / "data")
    r2 = redis.Redis(port=srv2.resp_port, socket_timeout=30)
    assert r2.dbsize() == len(model)
    assert _dump(r2, sorted(model)) == model
