"""A real task queue end to end (issue 35): Huey's `RedisHuey`, unchanged, on a topicsrv process.

Huey keeps its queue in a list (LPUSH to enqueue, BRPOP to dequeue), its results in a hash
(HSET by the worker; HGET + HDEL in a MULTI pipeline when the caller reads a result) and its
counters in a hash (HINCRBY). The consumer runs in a subprocess (`huey_consumer`, four thread
workers); the test enqueues a batch, stops the consumer mid-batch with SIGINT (Huey's graceful
stop: a worker finishes the task it popped, the rest stay queued), starts a new consumer, and
reads every result back. Each task also RPUSHes its number to a list, so "ran exactly once" is
checked from the server's side, not from the results alone.

Why SIGINT and not kill -9: Huey's Redis storage pops a task with BRPOP and never acknowledges
it, so a task popped by a worker killed -9 is lost on redis-server too (at most once, by Huey's
design); the server's own crash behaviour for lists is in test_list_crash.py.

Scheduled and periodic tasks live in a sorted set (issue 36): the consumer's scheduler runs a
Lua script with ZRANGEBYSCORE every second; the second test schedules tasks a second ahead and
checks that they run and that the consumer never logs "Error reading schedule".
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
import redis

huey = pytest.importorskip("huey", reason="huey is not installed (pip install -e '.[dev]')")

N = 200
QUEUE = "huey.redis.jobs"
RESULTS = "huey.results.jobs"

TASKS = textwrap.dedent("""
    import os
    import time

    from huey import RedisHuey

    huey = RedisHuey("jobs", host="127.0.0.1", port=int(os.environ["HUEY_TEST_PORT"]),
                     read_timeout=0.2)

    @huey.task()
    def square(i):
        time.sleep(0.02)  # long enough for the consumer to be stopped mid-batch
        huey.storage.conn.rpush("huey-test:ran", i)
        return i * i
""")


def _consumer(tmp_path: Path, port: int) -> subprocess.Popen[bytes]:
    env = {**os.environ, "HUEY_TEST_PORT": str(port), "PYTHONPATH": str(tmp_path)}
    log = open(tmp_path / "consumer.log", "ab")  # noqa: SIM115 - closed with the process
    return subprocess.Popen(
        [sys.executable, "-m", "huey.bin.huey_consumer", "hueytasks.huey", "-w", "4", "-k",
         "thread", "-n"],
        cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT)


def _wait(cond: Any, timeout: float, what: str, tmp_path: Path) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            log = (tmp_path / "consumer.log").read_text(errors="replace")[-3000:]
            raise AssertionError(f"timed out waiting for {what}; consumer log:\n{log}")
        time.sleep(0.02)


def test_huey_batch_runs_every_job_once_across_a_consumer_restart(
        server_factory: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    srv = server_factory()
    r = redis.Redis(port=srv.resp_port, socket_timeout=10)
    (tmp_path / "hueytasks.py").write_text(TASKS)
    monkeypatch.setenv("HUEY_TEST_PORT", str(srv.resp_port))
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        import hueytasks  # type: ignore[import-not-found]

        results = [hueytasks.square(i) for i in range(N)]  # enqueued before any consumer
        assert r.llen(QUEUE) == N and r.type(QUEUE) == b"list"

        first = _consumer(tmp_path, srv.resp_port)
        try:
            _wait(lambda: r.llen("huey-test:ran") >= N // 4, 15, "a quarter of the batch",
                  tmp_path)
            first.send_signal(signal.SIGINT)  # graceful: running tasks finish, no new pops
            assert first.wait(15) == 0
        finally:
            if first.poll() is None:
                first.kill()
                first.wait()
        done_by_first = r.llen("huey-test:ran")
        assert N // 4 <= done_by_first < N, "the stop must land mid-batch"
        assert r.llen(QUEUE) == N - done_by_first  # nothing popped and dropped

        second = _consumer(tmp_path, srv.resp_port)
        try:
            got = [res.get(blocking=True, timeout=15) for res in results]
        finally:
            second.send_signal(signal.SIGINT)
            try:
                second.wait(15)
            except subprocess.TimeoutExpired:
                second.kill()
                second.wait()
    finally:
        sys.modules.pop("hueytasks", None)

    assert got == [i * i for i in range(N)]
    ran = [int(x) for x in r.lrange("huey-test:ran", 0, -1)]
    assert sorted(ran) == list(range(N))  # every job ran, none twice
    assert r.llen(QUEUE) == 0 and r.exists(QUEUE) == 0  # the emptied list is gone
    assert r.hlen(RESULTS) == 0  # each result read once (HGET + HDEL) and removed


def test_huey_scheduled_tasks_run_from_the_sorted_set(
        server_factory: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 36: Huey's consumer keeps a task that is not due yet in a sorted set (ZADD with
    the due time) and its scheduler moves the due ones with a Lua script (ZRANGEBYSCORE + ZREM): a task
    scheduled a second ahead runs, and the consumer never logs "Error reading schedule"."""
    srv = server_factory()
    r = redis.Redis(port=srv.resp_port, socket_timeout=10)
    (tmp_path / "hueytasks.py").write_text(TASKS)
    monkeypatch.setenv("HUEY_TEST_PORT", str(srv.resp_port))
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        import hueytasks  # type: ignore[import-not-found]

        results = [hueytasks.square.schedule(args=(i,), delay=1) for i in range(5)]
        consumer = _consumer(tmp_path, srv.resp_port)
        try:
            got = [res.get(blocking=True, timeout=20) for res in results]
        finally:
            consumer.send_signal(signal.SIGINT)
            try:
                consumer.wait(15)
            except subprocess.TimeoutExpired:
                consumer.kill()
                consumer.wait()
    finally:
        sys.modules.pop("hueytasks", None)
    assert got == [i * i for i in range(5)]
    assert r.zcard("huey.schedule.jobs") == 0
    log = (tmp_path / "consumer.log").read_text(errors="replace")
    assert "Error reading schedule" not in log, log[-2000:]
