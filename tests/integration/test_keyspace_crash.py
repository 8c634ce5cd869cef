"""Real processes: kill -9 under string writes, for each keyspace class. `fsync`: every
acknowledged write is back; `disk`/`memory`: what comes back is a prefix of the acknowledged
writes (memory: nothing). In every class a key whose absolute deadline passed before the
restart stays gone. MULTI/EXEC of a string and a stream write (WAL shard 0 and the stream's
shard) comes back whole or not at all (storage/txgroup.py)."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
import redis

from conftest import JsonClient, kill_under_load


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


CLIENTS = 4


def _tx_loop(port: int, c: int, stop: threading.Event, acked: list[int]) -> None:
    """MULTI {SET k:c:j j, XADD s<c> * j j} EXEC in a loop; `acked` gets each j EXEC answered."""
    r = redis.Redis(port=port, socket_timeout=10)
    j = 0
    try:
        while not stop.is_set():
            pipe = r.pipeline(transaction=True)
            pipe.set(f"k:{c}:{j}", j)
            pipe.xadd(f"s{c}", {"j": j})
            pipe.execute()
            acked.append(j)
            j += 1
    except (redis.ConnectionError, redis.TimeoutError):
        return


def test_kill9_under_multi_of_strings_and_streams(server_factory: Any, tmp_path: Any) -> None:
    """Every transaction comes back whole or not at all, and every acknowledged one comes
    back (fsync class for the keyspace and the streams, which live in other WAL shards)."""
    data = tmp_path / "data"
    srv = server_factory("--keyspace-durability", "fsync", data_dir=data)
    http = JsonClient(srv.http_port)
    for c in range(CLIENTS):
        http.ok("PUT", f"/v0/topics/s{c}", {"durability": "fsync"})
    acked = kill_under_load(srv, _tx_loop, CLIENTS, 200)  # SIGKILL inside every client's loop
    srv2 = server_factory("--keyspace-durability", "fsync", data_dir=data)
    r2 = redis.Redis(port=srv2.resp_port, socket_timeout=10)
    for c in range(CLIENTS):
        strings = {int(k.split(b":")[2]) for k in r2.scan_iter(match=f"k:{c}:*", count=1000)}
        streams = [int(fields[b"j"]) for _, fields in r2.xrange(f"s{c}")]
        assert streams == sorted(set(streams))  # each transaction's XADD once, in order
        assert strings == set(streams), f"client {c}: a transaction came back in part"
        assert set(acked[c]) <= strings, f"client {c}: an acknowledged transaction is missing"
        assert strings == set(range(len(strings)))  # a prefix of the client's transactions
