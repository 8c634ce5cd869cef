"""Real processes: kill -9 while clients run a Lua script that writes two strings (WAL shard
0) and XADDs to two topics in two other WAL shards (`--wal-shards 4`). After the restart each
script's writes are all back or all gone (one commit group: scripting/service.py Rule 3,
storage/txgroup.py), every script whose EVALSHA was answered is back (fsync classes: the reply
waits for the group on disk), and what came back is a prefix of each client's scripts."""

from __future__ import annotations

import threading
from typing import Any

import redis

from conftest import JsonClient, kill_under_load
from topicsrv.storage.state import shard_of

CLIENTS = 3
SHARDS = 4
SCRIPT = """
redis.call('set', KEYS[1], ARGV[1])
redis.call('xadd', KEYS[3], '*', 'j', ARGV[1])
redis.call('set', KEYS[2], ARGV[1])
redis.call('xadd', KEYS[4], '*', 'j', ARGV[1])
return 1
"""


def _topics(c: int) -> tuple[str, str]:
    """Two topic names of client c in two different WAL shards, neither shard 0 (strings)."""
    names: dict[int, str] = {}
    i = 0
    while len(names) < 2:
        name = f"log{c}x{i}"
        s = shard_of(name, SHARDS)
        if s != 0 and s not in names:
            names[s] = name
        i += 1
    first, second = names.values()
    return first, second


def _script_loop(port: int, c: int, stop: threading.Event, acked: list[int]) -> None:
    r = redis.Redis(port=port, socket_timeout=10)
    run = r.register_script(SCRIPT)
    x, y = _topics(c)
    j = 0
    try:
        while not stop.is_set():
            run(keys=[f"a:{c}:{j}", f"b:{c}:{j}", x, y], args=[j])
            acked.append(j)
            j += 1
    except (redis.ConnectionError, redis.TimeoutError):
        return


def test_kill9_while_scripts_write_strings_and_topics_in_several_shards(
        server_factory: Any, tmp_path: Any) -> None:
    data = tmp_path / "data"
    args = ("--keyspace-durability", "fsync", "--wal-shards", str(SHARDS))
    srv = server_factory(*args, data_dir=data)
    http = JsonClient(srv.http_port)
    for c in range(CLIENTS):
        for name in _topics(c):
            http.ok("PUT", f"/v0/topics/{name}", {"durability": "fsync"})
    acked = kill_under_load(srv, _script_loop, CLIENTS, 150)
    srv2 = server_factory(*args, data_dir=data)
    r2 = redis.Redis(port=srv2.resp_port, socket_timeout=10)
    for c in range(CLIENTS):
        x, y = _topics(c)
        a = {int(k.split(b":")[2]) for k in r2.scan_iter(match=f"a:{c}:*", count=1000)}
        b = {int(k.split(b":")[2]) for k in r2.scan_iter(match=f"b:{c}:*", count=1000)}
        xs = [int(f[b"j"]) for _, f in r2.xrange(x)]
        ys = [int(f[b"j"]) for _, f in r2.xrange(y)]
        assert xs == sorted(set(xs)) and ys == sorted(set(ys))  # each script's XADD once
        assert a == b == set(xs) == set(ys), f"client {c}: a script came back in part"
        assert set(acked[c]) <= a, f"client {c}: an answered script is missing"
        assert a == set(range(len(a)))  # a prefix of the client's scripts
        assert len(a) >= 150
