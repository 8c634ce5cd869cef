"""Real processes: a checkpoint of a big keyspace is written in parts while the server keeps
answering (storage/keyspacesave.py); BGSAVE, SAVE, LASTSAVE and INFO persistence tell about it
as Redis's do; kill -9 while it writes loses nothing acknowledged and leaves no temporary file
once the server is back."""

from __future__ import annotations

import time
from typing import Any

import pytest
import redis

KEYS = 200_000


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


def test_the_server_answers_while_the_keyspace_is_written(server_factory: Any, tmp_path: Any) -> None:
    srv = server_factory("--keyspace-durability", "fsync", data_dir=tmp_path / "data")
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


def test_kill9_while_the_keyspace_is_written(server_factory: Any, tmp_path: Any) -> None:
    srv = server_factory("--keyspace-durability", "fsync", data_dir=tmp_path / "data")
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
