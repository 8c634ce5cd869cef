"""The checkpoint's keyspace written by a forked child (storage/forksave.py), in-process with
real forks: the file is exactly the keyspace of the cut (byte for byte what the sliced path
writes) while the parent goes on changing it; the changes after the cut come back from the
WAL after a crash, once; a child that fails or is killed changes nothing and is reported; a
stop while a child runs kills and reaps it; a refused fork falls back to the sliced path."""

from __future__ import annotations

import errno
import gc
import logging
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio

from topicsrv.engine import Engine
from topicsrv.engine.keyspace import hashes, lists, ops
from topicsrv.engine.keyspace import strings as kstrings
from topicsrv.engine.keyspace.snapshot import Snapshot
from topicsrv.storage import forksave, frames, keyspacelog, thp
from topicsrv.storage.fsck import check
from topicsrv.storage.images import CHECKPOINT
from topicsrv.storage.store import Storage

from .harness import running

FUTURE = 4_102_444_800_000

pytestmark = pytest.mark.skipif(not forksave.available(), reason="needs os.fork")


async def _wait(token: Any) -> None:
    if token is not None:
        await token.wait()


async def _fill(e: Engine) -> None:
    ks = e.keyspace
    await _wait(kstrings.put(ks, [(f"s{i}", b"v%d" % i) for i in range(3000)]))
    await _wait(kstrings.put(ks, [("ttl", b"t")], deadline=FUTURE))
    await _wait(lists.push(ks, "big", [b"e%d" % i for i in range(2000)], left=False,
                           only_existing=False)[1])
    await _wait(hashes.hset(ks, "hash", [(b"f%d" % i, b"x%d" % i) for i in range(700)])[1])


async def _change(e: Engine, round_: int) -> None:
    ks = e.keyspace
    await _wait(kstrings.put(ks, [(f"new{round_}", b"n"), ("s5", b"changed%d" % round_)]))
    await _wait(kstrings.delete(ks, [f"s{10 + round_}"])[1])
    await _wait(lists.push(ks, "big", [b"head%d" % round_], left=True, only_existing=False)[1])
    await _wait(hashes.hset(ks, "hash", [(b"f1", b"y%d" % round_)])[1])


def _bodies(ks: Any) -> list[bytes]:
    """The keyspace as the parts of a snapshot taken now, encoded as the file holds them."""
    snap = Snapshot(ks)
    out = []
    while (part := snap.next_part()) is not None:
        out.append(ops.encode(part))
    return out


def _file_bodies(path: Path) -> list[bytes]:
    buf = memoryview(path.read_bytes())
    assert frames.parse_file_header(buf, frames.WAL_MAGIC) is not None
    return [bytes(f.body) for f in frames.scan(buf, frames.FILE_HEADER_SIZE)
            if not isinstance(f, frames.Damage)]


def _saved(d: Path) -> dict[str, bytes]:
    """checkpoint.json and the keyspace files, byte for byte; any temporary file too."""
    return {p.name: p.read_bytes() for p in d.iterdir()
            if p.name == CHECKPOINT or p.name.startswith("keyspace-")}


def _only(d: Path, pattern: str) -> Path:
    [path] = d.glob(pattern)
    return path


def _state(ks: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, entry in ks.strings.items():
        out[name] = (entry.value, ks.expiry.deadlines.get(name, 0))
    for name, value in ks.colls.items():
        out[name] = (list(value) if value.KIND == "list" else dict(value.items()),
                     ks.expiry.deadlines.get(name, 0))
    return out


def _hold_child(flag: Path, pid_file: Path) -> Callable[[], None]:
    """A child hook: note the child's pid, then wait until the test lets it write."""
    def hook() -> None:
        tmp = pid_file.with_suffix(".part")  # renamed: the test never reads a file half written
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.write(fd, f"{os.getpid()} {os.nice(0)}".encode())
        os.close(fd)
        os.rename(tmp, pid_file)
        deadline = time.monotonic() + 60
        while not flag.exists() and time.monotonic() < deadline:
            time.sleep(0.001)
    return hook


async def _until(cond: Callable[[], bool]) -> None:
    for _ in range(20_000):
        if cond():
            return
        await trio.sleep(0.001)
    raise AssertionError("never happened")


def _reaped(pid: int) -> bool:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True
    return False


async def test_the_file_is_the_cut_while_the_parent_writes_and_a_crash_loses_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data, flag, pid_file = tmp_path / "data", tmp_path / "go", tmp_path / "pid"
    async with running(data, crash=True, shards=2, keyspace_class="fsync") as (e, st):
        monkeypatch.setattr(forksave, "CHILD_HOOK", _hold_child(flag, pid_file))
        await _fill(e)
        at_cut = _bodies(e.keyspace)
        forks = st.saves.forks
        async with trio.open_nursery() as n:
            n.start_soon(st.checkpoint)
            await _until(lambda: st.saves.forks == forks + 1)
            assert st.saves.in_progress and e.keyspace.saving is None  # no image kept here
            assert st.request() is False  # a second checkpoint never overlaps (BGSAVE refused)
            for round_ in range(3):  # the parent serves while the child is held
                await _change(e, round_)
            await _until(pid_file.exists)
            flag.touch()
        assert st.saves.last_ok and not st.saves.in_progress and st.saves.parts == len(at_cut)
        assert st.saves.fork_usec > 0 and gc.get_freeze_count() == 0
        pid, nice = (int(x) for x in pid_file.read_text().split())
        assert _reaped(pid) and nice == min(19, os.nice(0) + forksave.CHILD_NICE)  # yields
        ks_file = _only(data, "keyspace-*.bin")
        assert _file_bodies(ks_file) == at_cut  # the cut, byte for byte as the sliced path
        await _change(e, 3)  # after the checkpoint too
        final = _state(e.keyspace)
    # crash=True: stopped as kill -9 leaves it (no final checkpoint, the WAL as written)
    async with running(data, shards=2, keyspace_class="fsync") as (e, _):
        assert _state(e.keyspace) == final  # the WAL after the cut, replayed once
        assert e.keyspace.get("s5") == b"changed3" and lists.get(e.keyspace, "big") is not None
    assert check(data).problems == []


@pytest.mark.parametrize("how", ["enospc", "killed", "status"])
async def test_a_failed_child_changes_nothing_and_is_reported(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str, caplog: Any) -> None:
    async with running(tmp_path, shards=1, keyspace_class="fsync") as (e, st):
        await _fill(e)
        await st.checkpoint()
        before = _saved(tmp_path)
        done = st.checkpoints
        await _change(e, 0)
        want = _state(e.keyspace)

        def fail() -> None:
            if how == "enospc":
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            if how == "killed":
                os.kill(os.getpid(), signal.SIGKILL)
            os._exit(3)
        monkeypatch.setattr(forksave, "CHILD_HOOK", fail)
        reason = {"enospc": os.strerror(errno.ENOSPC), "killed": "killed by signal 9",
                  "status": "exited with status 3"}[how]
        with pytest.raises(OSError, match=reason):
            await st.checkpoint()  # SAVE's path: the error reaches the caller
        assert not st.saves.last_ok and st.checkpoints == done
        assert _saved(tmp_path) == before  # no .tmp among them either
        assert gc.get_freeze_count() == 0
        with caplog.at_level(logging.ERROR, "topicsrv.storage"):  # BGSAVE's path: logged
            st.request()
            await _until(lambda: st.last_checkpoint_error is not None)
        assert reason in caplog.text and not st.saves.last_ok
        monkeypatch.setattr(forksave, "CHILD_HOOK", None)
        await _wait(kstrings.put(e.keyspace, [("alive", b"1")]))  # still serving
        want["alive"] = (b"1", 0)
        await st.checkpoint()
        assert st.saves.last_ok
    async with running(tmp_path, shards=1, keyspace_class="fsync") as (e, _):
        assert _state(e.keyspace) == want


async def test_a_stop_while_the_child_runs_kills_and_reaps_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    flag, pid_file = tmp_path / "never", tmp_path / "pid"
    data = tmp_path / "data"
    async with running(data, shards=1, keyspace_class="fsync") as (e, st):
        monkeypatch.setattr(forksave, "CHILD_HOOK", _hold_child(flag, pid_file))
        await _fill(e)
        assert st.request()  # BGSAVE: the periodic checkpointer forks
        await _until(pid_file.exists)
        pid = int(pid_file.read_text().split()[0])
        assert st.saves.in_progress
        want = _state(e.keyspace)
    # the clean stop cancelled the checkpointer: its child is gone, then the final checkpoint
    # (in process) was written
    assert _reaped(pid) and not list(data.glob("*.tmp")) and gc.get_freeze_count() == 0
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    monkeypatch.setattr(forksave, "CHILD_HOOK", None)
    async with running(data, shards=1, keyspace_class="fsync") as (e, _):
        assert _state(e.keyspace) == want
    assert check(data).problems == []


async def test_a_refused_fork_takes_the_sliced_path(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: Any) -> None:
    async with running(tmp_path, shards=1, keyspace_class="fsync") as (e, st):
        await _fill(e)
        at_cut = _bodies(e.keyspace)
        forks = st.saves.forks

        def refuse() -> int:
            raise OSError(errno.ENOMEM, os.strerror(errno.ENOMEM))
        monkeypatch.setattr(os, "fork", refuse)
        with caplog.at_level(logging.WARNING, "topicsrv.storage"):
            await st.checkpoint()
        assert "fork refused" in caplog.text and st.saves.forks == forks and st.saves.last_ok
        assert gc.get_freeze_count() == 0
        ks_file = _only(tmp_path, "keyspace-*.bin")
        assert _file_bodies(ks_file) == at_cut


async def test_the_sliced_path_when_fork_is_off(tmp_path: Path) -> None:
    async with running(tmp_path, shards=1, keyspace_class="fsync") as (e, st):
        st.saves.fork = False
        forks = st.saves.forks
        await _fill(e)
        at_cut = _bodies(e.keyspace)
        await st.checkpoint()
        assert st.saves.forks == forks and st.saves.parts == len(at_cut)
        ks_file = _only(tmp_path, "keyspace-*.bin")
        assert _file_bodies(ks_file) == at_cut
        assert keyspacelog.read_snapshot(ks_file)


def test_storage_forks_by_default(tmp_path: Path) -> None:
    assert Storage(Engine(), tmp_path).saves.fork is True


def test_the_heap_ranges_a_collapse_asks_for() -> None:
    """thp.py Rule 1: 2 MiB-aligned parts of private writable anonymous mappings only."""
    maps = "\n".join([
        "00400000-00800000 r-xp 00000000 08:01 1 /usr/bin/python3.11",  # code
        "01000000-01a00000 rw-p 00000000 00:00 0 [heap]",
        "7f0000100000-7f0000500000 rw-p 00000000 00:00 0 ",  # anonymous: 2 MiB of it aligned
        "7f0001000000-7f0001200000 rw-s 00000000 00:01 5 /dev/zero (deleted)",  # shared
        "7f0002000000-7f0002400000 rw-p 00000000 08:01 7 /var/data/file",  # a file
        "7f0003000000-7f0003100000 rw-p 00000000 00:00 0",  # under 2 MiB
        "7ffc00000000-7ffc00400000 rw-p 00000000 00:00 0 [stack]",
    ])
    assert thp.ranges(maps) == [(0x1000000, 0xA00000), (0x7F0000200000, 0x200000)]
    assert thp.collapse() >= 0  # never raises, whatever the kernel says
