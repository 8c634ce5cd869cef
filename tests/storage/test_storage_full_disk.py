"""A full disk under every file the server writes outside the WAL (issue 40, fsops.py Rule 3):
a write that comes back short and then fails with ENOSPC leaves the old file byte for byte,
no temporary file, nothing changed in memory, and everything back after a restart. Also what
startup does with such a file found damaged (store.py Rules 4-5, fsck)."""

from __future__ import annotations

import errno
import logging
from pathlib import Path

import pytest

from topicsrv.engine import Engine
from topicsrv.engine.keyspace import strings as kstrings
from topicsrv.engine.log.segments import SEGMENT_RECORDS
from topicsrv.errors import StartupError
from topicsrv.storage import frames, functions, segfiles
from topicsrv.storage.fsck import check
from topicsrv.storage.fsops import OsOps
from topicsrv.storage.images import CHECKPOINT
from topicsrv.storage.state import state_of
from topicsrv.storage.store import Storage
from topicsrv.storage.walread import wal_files

from .diskfull import ENOSPC_TEXT, FullDisk
from .harness import live, running, write

LIB_A = b"#!lua name=a\nredis.register_function('fa', function() return 1 end)"
LIB_B = b"#!lua name=b\nredis.register_function('fb', function() return 2 end)"


def _tmp_files(d: Path) -> list[Path]:
    return sorted(d.rglob("*.tmp"))


def _glob(d: Path, pattern: str) -> list[Path]:
    return sorted(d.glob(pattern))


def _files(d: Path) -> dict[str, bytes]:
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


# ---- the helper ------------------------------------------------------------------------------


def test_write_file_cut_short_by_a_full_disk_keeps_the_old_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "f.json"
    path.write_bytes(b"old contents")
    disk = FullDisk(monkeypatch, "*/f.json*", "*/new.json*")
    with pytest.raises(OSError) as err:
        OsOps().write_file(path, b"N" * 10_000)
    assert err.value.errno == errno.ENOSPC
    assert (disk.short, disk.refused) == (1, 1)  # half went out, the rest was refused
    assert path.read_bytes() == b"old contents"
    with pytest.raises(OSError):
        OsOps().write_file(tmp_path / "new.json", b"x" * 100)
    assert not (tmp_path / "new.json").exists()
    assert _tmp_files(tmp_path) == []
    disk.free()
    OsOps().write_file(path, b"N" * 10_000)
    assert path.read_bytes() == b"N" * 10_000 and _tmp_files(tmp_path) == []


def test_a_write_that_accepts_no_byte_fails_instead_of_looping(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "f.json"
    path.write_bytes(b"old")
    monkeypatch.setattr("os.writev", lambda fd, bufs: 0)
    with pytest.raises(OSError) as err:
        OsOps().write_file(path, b"new contents")
    assert err.value.errno == errno.ENOSPC and "0 of 12 bytes" in str(err.value)
    assert path.read_bytes() == b"old" and _tmp_files(tmp_path) == []


# ---- functions.json ------------------------------------------------------------------------


def test_functions_save_on_a_full_disk_keeps_the_stored_set(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    functions.save(tmp_path, [LIB_A])
    before = (tmp_path / functions.NAME).read_bytes()
    FullDisk(monkeypatch, f"*/{functions.NAME}*")
    with pytest.raises(OSError, match=ENOSPC_TEXT):
        functions.save(tmp_path, [LIB_A, LIB_B])
    assert (tmp_path / functions.NAME).read_bytes() == before
    assert functions.load(tmp_path) == [LIB_A] and functions.check(tmp_path) is None
    assert _tmp_files(tmp_path) == []


@pytest.mark.parametrize("content", [b'{"libraries": ["#!lua name=a\\nredis.reg', b"",
                                     b'{"libs": []}', b'{"libraries": [1]}', b"[]"])
def test_a_damaged_functions_file_is_named_and_reads_as_no_libraries(tmp_path: Path, content: bytes) -> None:
    (tmp_path / functions.NAME).write_bytes(content)
    assert functions.check(tmp_path) is not None
    assert functions.load(tmp_path) == []
    problems = [p for p in check(tmp_path).problems if p.startswith(f"{functions.NAME}: ")]
    assert len(problems) == 1 and functions.REPAIR in problems[0]


def test_replacing_a_damaged_functions_file_keeps_its_bytes(tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / functions.NAME).write_bytes(b'{"libraries": ["#!lua')
    disk = FullDisk(monkeypatch, f"*/{functions.NAME}*")
    with pytest.raises(OSError):
        functions.replace_damaged(tmp_path)
    assert (tmp_path / functions.NAME).read_bytes() == b'{"libraries": ["#!lua'
    disk.free()
    assert functions.replace_damaged(tmp_path) == functions.DAMAGED_COPY
    assert (tmp_path / functions.DAMAGED_COPY).read_bytes() == b'{"libraries": ["#!lua'
    assert functions.check(tmp_path) is None and functions.load(tmp_path) == []
    assert check(tmp_path).problems == []


async def test_startup_names_a_damaged_functions_file_once_and_serves(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    (tmp_path / functions.NAME).write_bytes(b'{"libraries": ["#!lua')
    caplog.set_level(logging.ERROR, logger="topicsrv.storage")
    async with running(tmp_path) as (e, st):
        assert list(st.damaged) == [functions.NAME]
        [report] = st.damage_report()
        assert report["file"] == functions.NAME and report["repair"] == functions.REPAIR
        await write(e, "t", [1, 2])  # everything else is served
        assert len(live(e, "t")) == 2
    named = [r for r in caplog.records if functions.NAME in r.getMessage()]
    assert len(named) == 1 and named[0].levelno == logging.ERROR
    assert str(tmp_path / functions.NAME) in named[0].getMessage()


# ---- checkpoint.json and the keyspace snapshot ----------------------------------------------


@pytest.mark.parametrize("fork", [True, False], ids=["fork", "sliced"])
@pytest.mark.parametrize("target", [CHECKPOINT, "keyspace-"])
async def test_a_checkpoint_cut_short_changes_nothing_and_the_wal_keeps_everything(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, target: str, fork: bool) -> None:
    async with running(tmp_path, crash=True, shards=1, keyspace_class="fsync") as (e, st):
        st.saves.fork = fork  # the keyspace file by a forked child, or in parts in process
        e.put_topic("t", {"durable": True})
        await write(e, "t", list(range(10)))
        token = kstrings.put(e.keyspace, [("k1", b"v1")])
        assert token is not None
        await token.wait()
        await st.checkpoint()
        before = {n: b for n, b in _files(tmp_path).items() if n == CHECKPOINT or n.startswith("keyspace-")}
        entries, gen, done = dict(st.entries), st.ckpt_gen, st.checkpoints
        await write(e, "t", list(range(10, 20)))
        token = kstrings.put(e.keyspace, [("k2", b"v2")])
        assert token is not None
        await token.wait()
        acked = live(e, "t")
        disk = FullDisk(monkeypatch, f"*/{target}*")
        with pytest.raises(OSError, match=ENOSPC_TEXT):
            await st.checkpoint()
        # a forked child met the full disk in its own copy of this test's FullDisk
        assert disk.short == (0 if fork and target == "keyspace-" else 1)
        assert not st.saves.last_ok
        after = {n: b for n, b in _files(tmp_path).items() if n == CHECKPOINT or n.startswith("keyspace-")}
        assert after == before  # the old checkpoint and its keyspace file, byte for byte
        assert (st.entries, st.ckpt_gen, st.checkpoints) == (entries, gen, done)
        assert _tmp_files(tmp_path) == []
        disk.free()
    async with running(tmp_path, shards=1, keyspace_class="fsync") as (e, _):
        assert live(e, "t") == acked
        assert (e.keyspace.get("k1"), e.keyspace.get("k2")) == (b"v1", b"v2")
    assert check(tmp_path).problems == []


async def test_a_damaged_keyspace_snapshot_stops_startup_naming_it(tmp_path: Path) -> None:
    async with running(tmp_path, shards=1) as (e, _):
        kstrings.put(e.keyspace, [("k", b"v")])
    [snap] = _glob(tmp_path, "keyspace-*.bin")
    raw = snap.read_bytes()
    snap.write_bytes(raw[:len(raw) - 5])
    assert any(snap.name in p for p in check(tmp_path).problems)
    st = Storage(Engine(), tmp_path, shards=1)
    st.refuse_until_recovered()
    with pytest.raises(StartupError) as err:
        await st.open()
    assert str(snap) in str(err.value) and "python -m topicsrv check" in str(err.value)
    assert snap.read_bytes() == raw[:len(raw) - 5]


# ---- segment .idx files ------------------------------------------------------------------------


async def test_an_index_cut_short_leaves_the_segment_as_the_last_good_index_says(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async with running(tmp_path, crash=True, shards=1) as (e, st):
        e.put_topic("s", {"durable": True})
        await write(e, "s", list(range(100)))
        await st.checkpoint()
        sf = state_of(e.get("s"), st.nshards).files[0]
        idx = segfiles.idx_path(tmp_path / "topics" / "s@1", sf.base)
        before, count, size = idx.read_bytes(), sf.count, sf.size
        await write(e, "s", list(range(100, 150)))
        disk = FullDisk(monkeypatch, "*.idx*")
        await st.checkpoint()  # this topic keeps its previous entry (checkpoint.py Rule 4)
        assert disk.short == 1 and st.last_checkpoint_error is not None
        assert ENOSPC_TEXT in st.last_checkpoint_error
        assert idx.read_bytes() == before
        assert (sf.count, sf.size) == (count, size)  # memory still says what the .idx says
        assert _tmp_files(tmp_path) == []
        disk.free()
        await st.checkpoint()  # cuts the bytes the failed append left, appends again
        assert st.last_checkpoint_error is None and sf.count == 150
        acked = live(e, "s")
    assert check(tmp_path).problems == []
    async with running(tmp_path, shards=1) as (e, _):
        assert live(e, "s") == acked


# ---- a damaged WAL tail set aside at recovery --------------------------------------------------


async def test_a_wal_tail_that_cannot_be_set_aside_is_not_cut(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async with running(tmp_path, crash=True, shards=1) as (e, _):
        e.put_topic("w", {"durable": True})
        for i in range(20):
            await write(e, "w", [i])
    wal = [p for _, _, p in wal_files(tmp_path / "wal") if p.stat().st_size > frames.FILE_HEADER_SIZE][-1]
    offs = [f.offset for f in frames.scan(memoryview(wal.read_bytes()), frames.FILE_HEADER_SIZE)
            if isinstance(f, frames.Frame)]
    raw = bytearray(wal.read_bytes())
    raw[offs[len(offs) // 2] + frames.HEADER_SIZE + 3] ^= 0x10
    wal.write_bytes(bytes(raw))
    disk = FullDisk(monkeypatch, "*.damaged-*")
    st = Storage(Engine(), tmp_path, shards=1)
    st.refuse_until_recovered()
    with pytest.raises(StartupError, match=ENOSPC_TEXT):
        await st.open()
    assert disk.short == 1
    assert wal.read_bytes() == bytes(raw)  # not cut: the bytes past the damage are all there
    assert _glob(tmp_path, "wal/*.damaged-*") == [] and _tmp_files(tmp_path) == []
    disk.free()
    async with running(tmp_path, shards=1) as (e, _):
        assert live(e, "w")
    [aside] = _glob(tmp_path, "wal/*.damaged-*")
    assert aside.read_bytes() == bytes(raw)[len(raw) - aside.stat().st_size:]


# ---- cold copies ---------------------------------------------------------------------------------


async def test_a_cold_copy_cut_short_keeps_the_segment_hot(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hot, cold = tmp_path / "hot", tmp_path / "cold"
    async with running(hot, crash=True, cold_dir=cold) as (e, st):
        e.put_topic("c", {"durable": True})
        for _ in range(4):
            await write(e, "c", list(range(SEGMENT_RECORDS)))
        await st.checkpoint()
        hot_files = _files(hot / "topics")
        disk = FullDisk(monkeypatch, f"{cold}/*")
        with pytest.raises(OSError, match=ENOSPC_TEXT):
            await st.relocate()
        assert disk.short == 1
        assert not any(sf.cold for sf in state_of(e.get("c"), st.nshards).files.values())
        assert _files(hot / "topics") == hot_files
        assert [p for p in cold.rglob("*") if p.is_file()] == []
        disk.free()
        assert await st.relocate() >= 1
        await st.checkpoint()
        acked = live(e, "c")
    async with running(hot, cold_dir=cold) as (e, _):
        assert live(e, "c") == acked
    assert check(hot, cold).problems == []
