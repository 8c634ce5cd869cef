"""Real processes: kill -9 under string writes, for each keyspace class. `fsync`: every
acknowledged write is back; `disk`/`memory`: what comes back is a prefix of the acknowledged
writes (memory: nothing). In every class a key whose absolute deadline passed before the
restart stays gone."""

from __future__ import annotations

import time
from typing import Any

import pytest
import redis


@pytest.mark.parametrize("cls", ["fsync", "disk", "memory"])
def test_kill9_under_string_writes(server_factory: Any, tmp_path: Any, cls: str) -> None:
    data = tmp_path / "data"
    srv = server_factory("--keyspace-durability", cls, data_dir=data)
    r = redis.Redis(port=srv.resp_port, socket_timeout=10)
    pipe = r.pipeline(transaction=False)
    for i in range(300):
        pipe.set(f"k{i}", f"v{i}")
        pipe.incr("counter")
    pipe.execute()
    deadline_ms = int(time.time() * 1000) + 50  # passes while the server restarts
    assert r.set("short", "x", pxat=deadline_ms) is True
    srv.kill()
    srv2 = server_factory("--keyspace-durability", cls, data_dir=data)
    r2 = redis.Redis(port=srv2.resp_port, socket_timeout=10)
    assert r2.get("short") is None and r2.exists("short") == 0
    counter = int(r2.get("counter") or 0)
    present = [i for i in range(300) if r2.get(f"k{i}") == f"v{i}".encode()]
    if cls == "fsync":
        assert counter == 300 and len(present) == 300
    elif cls == "memory":
        assert counter == 0 and present == []
    else:  # a prefix of what was acknowledged
        assert present == list(range(len(present))) and counter in (len(present), len(present) - 1)
