"""The WAL shard's I/O thread (topicsrv/storage/iothread.py) and its use by the WAL."""

from __future__ import annotations

import errno
import threading
import time
from pathlib import Path

import pytest
import trio
import trio.testing

from topicsrv.storage.fsops import OsOps
from topicsrv.storage.iothread import IoThread

from .harness import running, write


def _ended(io: IoThread, timeout: float = 5.0) -> bool:
    t = io.thread
    assert t is not None
    t.join(timeout)
    return not t.is_alive() and not io.alive


async def test_calls_run_on_the_thread_in_order_one_at_a_time() -> None:
    io = IoThread("test-io-order")
    seen: list[tuple[int, str]] = []
    busy = 0
    overlap = False

    def job(i: int) -> int:
        nonlocal busy, overlap
        busy += 1
        overlap = overlap or busy > 1
        time.sleep(0.001)
        seen.append((i, threading.current_thread().name))
        busy -= 1
        return i * 10

    results: dict[int, int] = {}
    calls: list[int] = []

    async def caller(i: int) -> None:
        calls.append(i)  # no checkpoint between this and the call's hand-off
        results[i] = await io.call(job, i)

    async with trio.open_nursery() as nursery:
        for i in range(8):
            nursery.start_soon(caller, i)
    io.stop()
    assert results == {i: i * 10 for i in range(8)}
    assert [i for i, _ in seen] == calls
    assert {name for _, name in seen} == {"test-io-order"}
    assert not overlap
    assert _ended(io)


async def test_an_error_in_the_call_is_raised_in_the_caller() -> None:
    io = IoThread("test-io-error")

    def fail() -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(OSError) as info:
        await io.call(fail)
    assert info.value.errno == errno.ENOSPC
    assert await io.call(lambda: "still serving") == "still serving"
    io.stop()
    assert _ended(io)


async def test_a_cancelled_caller_still_sees_its_call_complete() -> None:
    io = IoThread("test-io-cancel")
    release = threading.Event()
    done: list[str] = []

    def slow() -> str:
        release.wait(5)
        return "written"

    async def caller() -> None:
        done.append(await io.call(slow))

    with trio.CancelScope() as scope:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(caller)
            await trio.testing.wait_all_tasks_blocked()
            scope.cancel()
            release.set()
    assert done == ["written"]  # not abandoned: the outcome of the I/O is always seen
    io.stop()
    assert _ended(io)


async def test_the_thread_ends_when_idle_and_the_next_call_starts_it_again() -> None:
    io = IoThread("test-io-idle", idle_s=0.02)
    assert await io.call(lambda: 1) == 1
    first = io.thread
    assert _ended(io)  # idle: no stop() needed
    assert await io.call(lambda: 2) == 2
    assert io.thread is not first  # a new thread
    io.stop()
    assert _ended(io)


class SyncThreads(OsOps):
    def __init__(self) -> None:
        self.sync_threads: set[threading.Thread] = set()

    def fdatasync(self, fd: int) -> None:
        self.sync_threads.add(threading.current_thread())
        super().fdatasync(fd)


async def test_the_wal_syncs_on_its_shards_io_threads(tmp_path: Path) -> None:
    ops = SyncThreads()
    async with running(tmp_path, shards=2, ops=ops) as (e, st):
        for name in ("a", "b", "c", "d"):  # both shards get some
            e.put_topic(name, {"durable": True})
            await write(e, name, [1])
        ios = [sh.io for sh in st.shards]
        assert all(io is not None and io.thread in ops.sync_threads for io in ios)
    assert all(io is not None and _ended(io) for io in ios)  # close() stopped them


async def test_to_thread_io_path_is_still_selectable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOPICS_WAL_IO", "to_thread")
    ops = SyncThreads()
    async with running(tmp_path, shards=1, ops=ops) as (e, st):
        e.put_topic("a", {"durable": True})
        await write(e, "a", [1])
        assert st.shards[0].io is None
    assert ops.sync_threads and not any(t.name.startswith("wal-io-") for t in ops.sync_threads)
