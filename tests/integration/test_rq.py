"""A real task queue end to end (issue 36): RQ, unchanged, on a topicsrv process.

RQ keeps the names of its queues in a set (SADD/SMEMBERS `rq:queues`), its workers in sets
(`rq:workers`, `rq:workers:<queue>`), each queue in a list, each job in a hash, and its
registries (started, finished, failed, scheduled) in sorted sets. The test enqueues a batch
(among them a job that fails and a job that depends on another), runs a `SimpleWorker` in
burst mode on the test's own process, and reads back every result and every registry."""

from __future__ import annotations

import operator
from typing import Any

import pytest
import redis

rq = pytest.importorskip("rq", reason="rq is not installed (pip install -e '.[dev]')")

N = 60


def test_rq_simple_worker_burst_runs_a_batch(server_factory: Any) -> None:
    srv = server_factory()
    conn = redis.Redis(port=srv.resp_port, socket_timeout=10)
    q = rq.Queue("jobs", connection=conn)
    jobs = [q.enqueue(operator.mul, i, i) for i in range(N)]
    bad = q.enqueue(operator.truediv, 1, 0)
    after = q.enqueue(operator.add, 2, 3, depends_on=jobs[-1])
    assert conn.smembers("rq:queues") == {b"rq:queue:jobs"}
    assert q.count == N + 1  # the dependent job waits for its parent, outside the queue
    worker = rq.SimpleWorker([q], connection=conn)
    assert worker.work(burst=True)
    for i, job in enumerate(jobs):
        job.refresh()
        assert job.get_status() == "finished" and job.return_value() == i * i
    after.refresh()
    assert after.get_status() == "finished" and after.return_value() == 5
    bad.refresh()
    result = bad.latest_result()
    assert bad.get_status() == "failed" and result is not None
    assert "ZeroDivisionError" in (result.exc_string or "")
    assert q.count == 0
    assert set(q.finished_job_registry.get_job_ids()) == {j.id for j in [*jobs, after]}
    assert q.failed_job_registry.get_job_ids() == [bad.id]
    assert q.started_job_registry.get_job_ids() == []
    assert conn.scard("rq:workers") == 0  # the burst worker registered, then left
