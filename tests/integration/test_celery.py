"""A real task queue end to end (issue 36): Celery, unchanged, with topicsrv as both its broker
and its result backend.

Celery's Redis transport (kombu) keeps each queue in a list (LPUSH to publish, BRPOP to
consume), the messages a worker holds unacknowledged in a hash (`unacked`) indexed by a
sorted set (`unacked_index`, read with `ZRANGE ... BYSCORE REV LIMIT` to restore lost ones),
its exchange bindings in sets (`_kombu.binding.*`) and their deadlines in a sorted set; the
fanout exchanges (worker events, the `pidbox` remote control, mingle and gossip at start) are
PUBLISH/PSUBSCRIBE. The result backend stores each result as a string (SETEX), and a caller
waiting in `.get()` subscribes to the result's channel; a chord counts its parts in a Lua
script (SISMEMBER/SADD, RPUSH, LLEN, EXPIRE, SET NX EX) and cleans up in another.

The worker runs in a subprocess with its default options (`--pool=solo`, one process); the
test sends a batch, a task that raises and a group and a chord, reads every result back once,
and checks from the server's side (each task RPUSHes its argument) that each task ran once.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import redis

celery = pytest.importorskip("celery",
                             reason="celery is not installed (pip install -e '.[dev]')")

N = 100

TASKS = textwrap.dedent("""
    import os

    import redis
    from celery import Celery

    PORT = int(os.environ["CELERY_TEST_PORT"])
    URL = f"redis://127.0.0.1:{PORT}/0"
    app = Celery("celerytasks", broker=URL, backend=URL)
    app.conf.broker_connection_retry_on_startup = True
    ran = redis.Redis(port=PORT)

    @app.task
    def add(x, y):
        ran.rpush("celery-test:ran", x)
        return x + y

    @app.task
    def fail(message):
        raise ValueError(message)

    @app.task
    def total(xs):
        return sum(xs)
""")


def _worker(tmp_path: Path, port: int) -> subprocess.Popen[bytes]:
    env = {**os.environ, "CELERY_TEST_PORT": str(port), "PYTHONPATH": str(tmp_path)}
    log = open(tmp_path / "worker.log", "ab")  # noqa: SIM115 - closed with the process
    return subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "celerytasks", "worker", "--pool=solo",
         "--concurrency=1", "-l", "warning"],
        cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT)


def _stop(worker: subprocess.Popen[bytes]) -> int | None:
    """SIGTERM (Celery's warm shutdown) by pid; kill only if it does not exit in time."""
    if worker.poll() is None:
        worker.send_signal(signal.SIGTERM)
    try:
        return worker.wait(20)
    except subprocess.TimeoutExpired:
        worker.kill()
        worker.wait()
        return None


def test_celery_worker_runs_a_batch_with_results_on_topicsrv(
        server_factory: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    srv = server_factory()
    r = redis.Redis(port=srv.resp_port, socket_timeout=10)
    (tmp_path / "celerytasks.py").write_text(TASKS)
    monkeypatch.setenv("CELERY_TEST_PORT", str(srv.resp_port))
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        import celerytasks  # type: ignore[import-not-found]

        results = [celerytasks.add.delay(i, i) for i in range(N)]  # before any worker
        assert r.llen("celery") == N and r.type("celery") == b"list"
        worker = _worker(tmp_path, srv.resp_port)
        try:
            got = [res.get(timeout=20) for res in results]
            bad = celerytasks.fail.delay("boom")
            with pytest.raises(ValueError, match="boom"):
                bad.get(timeout=20)
            grouped = celery.group(celerytasks.add.s(N + i, 1) for i in range(10))()
            got_group = grouped.get(timeout=20)
            chorded = celery.chord(celerytasks.add.s(N + 10 + i, 0) for i in range(10))(
                celerytasks.total.s())
            got_chord = chorded.get(timeout=20)
        finally:
            code = _stop(worker)
        celerytasks.app.close()
    finally:
        sys.modules.pop("celerytasks", None)
    log = (tmp_path / "worker.log").read_text(errors="replace")

    assert code == 0, log[-3000:]
    assert got == [2 * i for i in range(N)]
    assert bad.state == "FAILURE" and isinstance(bad.result, ValueError)
    assert got_group == [N + i + 1 for i in range(10)]
    assert got_chord == sum(range(N + 10, N + 20))
    ran = [int(x) for x in r.lrange("celery-test:ran", 0, -1)]
    assert sorted(ran) == list(range(N + 20))  # every add ran, none twice
    assert r.exists("celery") == 0  # the queue was drained and the emptied list is gone
    assert r.hlen("unacked") == 0 and r.zcard("unacked_index") == 0  # every message acked
    meta_key = f"celery-task-meta-{results[0].id}"
    meta = r.get(meta_key)
    assert meta is not None and b'"SUCCESS"' in meta
    assert 0 < r.ttl(meta_key) <= 86400  # SETEX with Celery's default result_expires, a day
    errors = [line for line in log.splitlines() if "ERROR/" in line or "CRITICAL/" in line]
    assert len(errors) == 1 and "celerytasks.fail" in errors[0], log[-3000:]
