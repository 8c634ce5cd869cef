"""Fault tests: damaged bytes on disk and a disk that refuses writes (ENOSPC)."""

from __future__ import annotations

import errno
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
import trio

from topicsrv.engine.log.segments import SEGMENT_RECORDS
from topicsrv.errors import TopicsError
from topicsrv.storage import frames, segfiles
from topicsrv.storage.fsck import check
from topicsrv.storage.fsops import OsOps
from topicsrv.storage.walread import wal_files

from .harness import live, running, write


async def eventually(cond: Callable[[], bool], what: str, tries: int, interval: float) -> None:
    """Poll `cond` until it holds; fail the test naming `what` if it never does."""
    for _ in range(tries):
        if cond():
            return
        await trio.sleep(interval)
    pytest.fail(f"{what} did not happen within {tries * interval:g}s")


class FaultyOps(OsOps):
    """A fault injector: the named call fails with ENOSPC while `failing` holds it."""

    def __init__(self) -> None:
        self.failing: set[str] = set()

    def writev(self, fd: int, buffers: Sequence[bytes]) -> int:
        if "writev" in self.failing:
            super().writev(fd, [b"\x07" * 5])  # a partial write lands first, like a real ENOSPC
            raise OSError(errno.ENOSPC, "No space left on device")
        return super().writev(fd, buffers)

    def fdatasync(self, fd: int) -> None:
        if "fdatasync" in self.failing:
            raise OSError(errno.ENOSPC, "No space left on device")
        super().fdatasync(fd)


async def _crashed_wal(tmp_path: Path, n: int) -> tuple[Path, dict[int, bytes]]:
    """A data dir whose WAL holds `n` single-record fsync writes (no checkpoint since)."""
    async with running(tmp_path, crash=True, shards=1) as (e, _):
        e.put_topic("w", {"durable": True})
        for i in range(n):
            await write(e, "w", [i])
        acked = live(e, "w")
    wal = [p for _, _, p in wal_files(tmp_path / "wal") if p.stat().st_size > frames.FILE_HEADER_SIZE]
    return wal[-1], acked


def _damaged_files(d: Path) -> list[Path]:
    return list(d.glob("wal/*.damaged-*"))


def _frame_offsets(path: Path) -> list[int]:
    buf = memoryview(path.read_bytes())
    return [f.offset for f in frames.scan(buf, frames.FILE_HEADER_SIZE) if isinstance(f, frames.Frame)]


async def test_truncated_tail_frame_ends_replay_at_the_last_good_frame(tmp_path: Path) -> None:
    wal, acked = await _crashed_wal(tmp_path, 20)
    size = wal.stat().st_size
    with wal.open("r+b") as f:
        f.truncate(size - 7)
    assert check(tmp_path).problems  # fsck sees the torn tail before recovery cuts it
    async with running(tmp_path) as (e, _):
        got = live(e, "w")
        # every frame before the torn one is replayed; only the last write is gone
        assert {s: acked[s] for s in list(acked)[:-1]} == {s: got[s] for s in list(acked)[:-1]}
        r = await write(e, "w", ["next"])
        assert r["first_seq"] > max(acked)  # never reused
    assert _damaged_files(tmp_path)  # the cut bytes were kept aside
    assert check(tmp_path).problems == []


async def test_flipped_bit_in_a_wal_frame_stops_replay_there_without_crashing(tmp_path: Path) -> None:
    wal, acked = await _crashed_wal(tmp_path, 20)
    offs = _frame_offsets(wal)
    raw = bytearray(wal.read_bytes())
    victim = offs[len(offs) // 2]
    raw[victim + frames.HEADER_SIZE + 3] ^= 0x10
    wal.write_bytes(bytes(raw))
    async with running(tmp_path) as (e, _):
        got = live(e, "w")
        assert got  # the good frames before the damage were replayed
        assert all(got[s] == acked[s] for s in got)
        assert len(got) < len(acked)
        r = await write(e, "w", ["next"])
        assert r["first_seq"] > max(acked)
        res = e.diff("w", max(got), 10)
        assert res.tombstone is not None and res.tombstone.reason == "lost"


async def _sealed(tmp_path: Path) -> tuple[Path, segfiles.SegFile, dict[int, bytes]]:
    async with running(tmp_path) as (e, _):
        e.put_topic("s", {"durable": True})
        await write(e, "s", list(range(SEGMENT_RECORDS + 5)))
        acked = live(e, "s")
    data = segfiles.data_path(tmp_path / "topics" / "s@1", 1)
    return data, segfiles.load(data, data.with_suffix(".idx"), 1).sf, acked


async def test_flipped_bit_in_a_segment_loses_that_record_only(tmp_path: Path) -> None:
    data, sf, acked = await _sealed(tmp_path)
    raw = bytearray(data.read_bytes())
    raw[sf.offsets[99] + frames.HEADER_SIZE + 30] ^= 0x01  # inside seq 100's body
    data.write_bytes(bytes(raw))
    rep = check(tmp_path)
    assert rep.problems and "checksum" in " ".join(rep.problems)
    proc = await trio.run_process([sys.executable, "-m", "topicsrv", "check", "--data-dir", str(tmp_path)],
                                  capture_stdout=True, check=False)
    assert proc.returncode == 1 and b"DAMAGE" in proc.stdout
    async with running(tmp_path) as (e, _):
        got = live(e, "s")
        assert 100 not in got
        assert {s: b for s, b in acked.items() if s != 100} == got
        res = e.diff("s", 99, 10)
        assert res.tombstone is not None and res.tombstone.reason == "lost"


@pytest.mark.parametrize(("byte", "deleted"), [(0x5D, False), (0xD4, False), (0xD5, True)])
async def test_delete_flag_only_the_exact_sentinel_reads_deleted(tmp_path: Path, byte: int, deleted: bool) -> None:
    data, sf, acked = await _sealed(tmp_path)
    with data.open("r+b") as f:  # a half-written flag byte is anything but 0xD5
        f.seek(sf.offsets[9] + frames.FLAG_OFFSET)
        f.write(bytes([byte]))
    assert check(tmp_path).problems == []  # the flag is outside the checksum
    async with running(tmp_path) as (e, _):
        assert (10 not in live(e, "s")) == deleted
        assert len(live(e, "s")) == len(acked) - deleted


async def test_missing_idx_is_rebuilt_from_the_data_frames(tmp_path: Path) -> None:
    data, _, acked = await _sealed(tmp_path)
    data.with_suffix(".idx").unlink()
    assert any("missing" in p for p in check(tmp_path).problems)
    async with running(tmp_path) as (e, _):
        assert live(e, "s") == acked
    assert data.with_suffix(".idx").exists()
    assert check(tmp_path).problems == []


@pytest.mark.parametrize("call", ["writev", "fdatasync"])
async def test_enospc_fails_the_write_with_507_and_writes_resume(tmp_path: Path, call: str) -> None:
    ops = FaultyOps()
    async with running(tmp_path, ops=ops, crash=True) as (e, st):
        e.put_topic("n", {"durable": True})
        ok = await write(e, "n", ["before"])
        ops.failing.add(call)
        with pytest.raises(TopicsError) as err:
            await write(e, "n", ["doomed"])
        assert err.value.code == "insufficient_storage" and err.value.status == 507
        with pytest.raises(TopicsError) as err2:  # refused up front, nothing applied
            await write(e, "n", ["refused"])
        assert err2.value.code == "insufficient_storage"
        assert e.get("n").head_seq == ok["last_seq"] + 1  # the refused write took no seq
        # Reads keep working. The failed fsync write was never readable (records of fsync
        # topics are readable once durable) and its writer got 507: its seq is skipped
        # silently, nobody is told about a record nobody could have seen.
        ops.failing.clear()
        res = e.diff("n", ok["last_seq"], 10)
        assert res.tombstone is None and res.records == [] and res.caught_up
        assert e.diff("n", 0, 10).records[0].endswith(b'"data":"before"}')
        await eventually(lambda: st.stats()["writable"], "the store becoming writable again", 100, 0.05)
        after = await write(e, "n", ["after"])
        assert after["first_seq"] == ok["last_seq"] + 2
    async with running(tmp_path) as (e, _):
        got = live(e, "n")
        assert set(got) == {ok["last_seq"], after["first_seq"]}
    assert check(tmp_path).problems == []


async def test_a_failed_disk_batch_reports_its_acknowledged_records_lost(tmp_path: Path) -> None:
    """disk-class writes are acknowledged on enqueue and readable at once: when their batch
    cannot be made durable, a reader crossing them gets a `lost` tombstone."""
    ops = FaultyOps()
    async with running(tmp_path, ops=ops, crash=True) as (e, st):
        e.put_topic("d", {"durable": False})
        before = await write(e, "d", ["before"])
        await eventually(  # let the first batch become durable
            lambda: e.get("d").head_seq == before["last_seq"] and not st.shards[0].batch.frames,
            "the first batch being flushed", 100, 0.01)
        await trio.sleep(0.05)
        ops.failing.add("fdatasync")
        doomed = await write(e, "d", ["doomed"])  # acknowledged on enqueue
        assert e.diff("d", before["last_seq"], 10).seqs == [doomed["first_seq"]]  # seen by readers
        await eventually(lambda: not st.stats()["writable"], "the failed fdatasync marking the store unwritable",
                         200, 0.01)
        ops.failing.clear()
        res = e.diff("d", before["last_seq"], 10)
        assert res.tombstone is not None and res.tombstone.reason == "lost"
        assert res.tombstone.gap_from <= doomed["first_seq"] <= res.tombstone.gap_to
        await eventually(lambda: st.stats()["writable"], "the store becoming writable again", 100, 0.05)


async def test_check_tells_an_unfinished_segment_append_from_damage(tmp_path: Path) -> None:
    """A crash during a checkpoint can leave a torn frame after the slots the checkpoint lists:
    the WAL still holds those records, so `check` notes it; a torn checkpointed slot is damage."""
    async with running(tmp_path, crash=True) as (e, st):
        e.put_topic("s", {"durable": True})
        await write(e, "s", list(range(50)))
        await st.checkpoint()
    data = next((tmp_path / "topics").glob("s@1/*.data"))
    whole = data.read_bytes()
    data.write_bytes(whole + whole[-30:-5])  # half a frame appended, as a killed append leaves
    rep = check(tmp_path)
    assert rep.problems == [] and any("unfinished append" in n for n in rep.notes)
    data.write_bytes(whole[:-40])  # a slot the checkpoint vouches for is torn
    assert check(tmp_path).problems
