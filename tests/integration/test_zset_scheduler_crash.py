"""The scheduler pattern of issue 36 through kill -9 rounds: a producer ZADDs jobs with due
times into a sorted set, a worker moves the due ones into a list with a Lua script
(ZRANGEBYSCORE ... LIMIT, then ZREM + RPUSH of each: one script, one journaled operation), and
the server is killed -9 under both, four times, on an `fsync` keyspace. Afterwards every
acknowledged job is in exactly one place (still scheduled, or once in the ready list), never
lost and never twice; a job whose ZADD was in flight at a kill is in at most one place."""

from __future__ import annotations

import threading
import time
from typing import Any

import redis

MOVE = """
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, ARGV[2])
for _, job in ipairs(due) do
    redis.call('ZREM', KEYS[1], job)
    redis.call('RPUSH', KEYS[2], job)
end
return #due
"""
ROUNDS = 4


def _round(port: int, first: int, acked: list[int], maybe: list[int], stop: threading.Event,
           moved: list[int]) -> list[threading.Thread]:
    def produce() -> None:
        r = redis.Redis(port=port, socket_timeout=5)
        i = first
        while not stop.is_set():
            due = int(time.time() * 1000) + (i * 7) % 150
            maybe.append(i)
            try:
                r.zadd("schedule", {f"job:{i}": due})
            except redis.RedisError:
                return
            maybe.pop()
            acked.append(i)
            i += 1

    def move() -> None:
        r = redis.Redis(port=port, socket_timeout=5)
        script = r.register_script(MOVE)
        while not stop.is_set():
            try:
                moved[0] += script(keys=["schedule", "ready"], args=[int(time.time() * 1000), 50])
            except redis.RedisError:
                return
            time.sleep(0.002)

    threads = [threading.Thread(target=produce, daemon=True),
               threading.Thread(target=move, daemon=True)]
    for t in threads:
        t.start()
    return threads


def test_scheduled_jobs_move_exactly_once_through_kill9(server_factory: Any, tmp_path: Any) -> None:
    data = tmp_path / "data"
    acked: list[int] = []
    maybe: list[int] = []
    moved = [0]
    next_id = 0
    for _ in range(ROUNDS):
        srv = server_factory("--keyspace-durability", "fsync", data_dir=data)
        stop = threading.Event()
        threads = _round(srv.resp_port, next_id, acked, maybe, stop, moved)
        deadline = time.monotonic() + 10
        while len(acked) < next_id + 200 and time.monotonic() < deadline:
            time.sleep(0.01)
        srv.kill()  # under the producer and the mover
        stop.set()
        for t in threads:
            t.join(10)
        next_id = max(acked + maybe) + 1
    srv = server_factory("--keyspace-durability", "fsync", data_dir=data)
    r = redis.Redis(port=srv.resp_port, socket_timeout=10)
    script = r.register_script(MOVE)
    time.sleep(0.2)  # every due time has passed
    while script(keys=["schedule", "ready"], args=[int(time.time() * 1000), 1000]):
        pass
    ready = [int(x.split(b":")[1]) for x in r.lrange("ready", 0, -1)]
    scheduled = [int(m.split(b":")[1]) for m in r.zrange("schedule", 0, -1)]
    assert scheduled == []  # all due: the final moves emptied the schedule
    assert len(ready) == len(set(ready)), "a job moved twice"
    assert set(acked) <= set(ready), f"lost: {sorted(set(acked) - set(ready))[:10]}"
    assert set(ready) <= set(acked) | set(maybe)
    assert len(acked) >= ROUNDS * 200 and moved[0] > 0
