"""Scripts as clients use them: redis-py's `Lock` (its acquire/extend/reacquire/release are
Lua scripts) under contention from several processes, and a multi-step "move a job" script
over a lease queue, strings and a log topic."""

from __future__ import annotations

import multiprocessing
import threading
from collections.abc import Iterator

import pytest
import redis
from redis.exceptions import LockNotOwnedError

from tests.resp.conftest import InProc, start_inproc

PROCS, ROUNDS = 4, 40


@pytest.fixture(scope="module")
def srv() -> Iterator[InProc]:
    s, stop = start_inproc()
    yield s
    stop()


def _contend(port: int, rounds: int) -> None:
    """Each round: take the lock, read the counter, write it + 1 (not atomic on its own),
    release. Only mutual exclusion makes the final counter exact."""
    r = redis.Redis(port=port, socket_timeout=30)
    lock = r.lock("lock:counter", timeout=30, blocking_timeout=60, sleep=0.001)
    for _ in range(rounds):
        assert lock.acquire()
        try:
            n = int(r.get("counter") or 0)
            r.set("counter", n + 1)
        finally:
            lock.release()


def test_lock_excludes_across_processes(srv: InProc) -> None:
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_contend, args=(srv.port, ROUNDS)) for _ in range(PROCS)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0] * PROCS
    r = redis.Redis(port=srv.port)
    assert int(r.get("counter") or 0) == PROCS * ROUNDS
    assert r.exists("lock:counter") == 0


def test_lock_extend_reacquire_release_and_token_mismatch(srv: InProc) -> None:
    r = redis.Redis(port=srv.port)
    lock = r.lock("lock:x", timeout=10)
    assert lock.acquire(blocking=False)
    assert not r.lock("lock:x", timeout=10).acquire(blocking=False)
    assert lock.extend(20) and 20_000 < r.pttl("lock:x") <= 30_000
    assert lock.extend(5, replace_ttl=True) and r.pttl("lock:x") <= 5_000
    assert lock.reacquire() and 5_000 < r.pttl("lock:x") <= 10_000
    r.set("lock:x", "someone-else")  # the lock was lost and taken by another owner
    with pytest.raises(LockNotOwnedError):
        lock.extend(5)
    with pytest.raises(LockNotOwnedError):
        lock.reacquire()
    with pytest.raises(LockNotOwnedError):
        lock.release()
    assert r.get("lock:x") == b"someone-else"  # a failed release deletes nothing


MOVE = """
local jobs = redis.call('topic.claim', KEYS[1], ARGV[1], 'MAX', 1)
if #jobs == 0 then return false end
local job = jobs[1]
local id, fields, seq, lease = job[1], job[2], job[3], job[4]
redis.call('set', KEYS[2] .. seq, fields[2])
redis.call('xadd', KEYS[3], '*', 'seq', seq, 'task', fields[2])
local ack = redis.call('topic.ack', KEYS[1], ARGV[1], seq, 'LEASEIDS', lease)
return {seq, ack[4][1]}
"""


def test_a_script_moves_jobs_and_nobody_sees_a_half_move(srv: InProc) -> None:
    r = redis.Redis(port=srv.port, socket_timeout=10)
    r.execute_command("TOPIC.CREATE", "jobs", "TYPE", "queue", "LEASE_MS", "30000")
    for i in range(50):
        r.xadd("jobs", {"task": f"t{i}"})
    move = r.register_script(MOVE)
    stop = threading.Event()
    seen: list[tuple[int, int, int]] = []

    def watch() -> None:  # another client: done markers and log entries always agree
        w = redis.Redis(port=srv.port, socket_timeout=10)
        while not stop.is_set():
            pipe = w.pipeline(transaction=True)
            pipe.keys("done:*")
            pipe.xlen("moved")
            pipe.xlen("jobs")
            markers, logged, left = pipe.execute()
            seen.append((len(markers), logged, left))

    t = threading.Thread(target=watch)
    t.start()
    moved = []
    while (out := move(keys=["jobs", "done:", "moved"], args=["w1"])) is not None:
        moved.append(out)
    stop.set()
    t.join(10)
    assert [seq for seq, _ in moved] == list(range(1, 51))
    assert all(acked == seq for seq, acked in moved)
    assert r.xlen("jobs") == 0 and r.xlen("moved") == 50
    assert [f[b"task"] for _, f in r.xrange("moved")] == [f"t{i}".encode() for i in range(50)]
    assert r.get("done:50") == b"t49"
    assert seen and all(m == lg == 50 - left for m, lg, left in seen), "a partial move was seen"
