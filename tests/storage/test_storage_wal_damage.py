"""A damaged byte in the middle of a WAL file (issue 10, item 6): replay of that shard stops
there, but no seq that may have been acknowledged is ever handed out again, readers below
get a `lost` tombstone, and startup says so at ERROR."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from topicsrv.storage import frames
from topicsrv.storage.fsck import check
from topicsrv.storage.walread import wal_files

from .harness import live, running, write

WRITES = 40
PER_WRITE = 100  # 4000 seqs: several HeadWatermark reservations (1024 at least each) deep


def _damaged_files(d: Path) -> list[Path]:
    return list(d.glob("wal/*.damaged-*"))


def _frames(path: Path) -> list[frames.Frame]:
    buf = memoryview(path.read_bytes())
    return [f for f in frames.scan(buf, frames.FILE_HEADER_SIZE) if isinstance(f, frames.Frame)]


def _flip(path: Path, where: str) -> int:
    """Flip one bit a third of the way into the file, in a frame's body or its length field
    (then the reader has to step byte by byte to find the next good frame)."""
    fs = [f for f in _frames(path) if f.ftype in (frames.T_APPEND, frames.T_CEIL)]
    victim = fs[len(fs) // 3]
    raw = bytearray(path.read_bytes())
    at = victim.offset + (frames.HEADER_SIZE + 5 if where == "body" else 2)
    raw[at] ^= 0x08
    path.write_bytes(bytes(raw))
    return victim.offset


@pytest.mark.parametrize(("cls", "where"), [
    ("fsync", "body"), ("disk", "body"), ("disk", "length"), ("memory", "body"), ("ephemeral", "body"),
])
async def test_a_flipped_bit_mid_wal_never_reuses_an_acknowledged_seq(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, cls: str, where: str) -> None:
    async with running(tmp_path, crash=True, shards=1) as (e, st):
        e.put_topic("other", {"durability": "fsync"})
        await write(e, "other", ["o"])
        await st.checkpoint()  # "other" is safe in a segment; its frames still share the shard
        e.put_topic("d", {"durability": cls})
        acked: list[int] = []
        for i in range(WRITES):
            acked += (await write(e, "d", [f"{i}.{j}" for j in range(PER_WRITE)]))["seqs"]
        for sh in st.shards:  # everything the writers were given is on disk before the "crash"
            await sh.drain()
    wal = [p for _, _, p in wal_files(tmp_path / "wal") if p.stat().st_size > frames.FILE_HEADER_SIZE][-1]
    offset = _flip(wal, where)
    assert check(tmp_path).problems
    with caplog.at_level(logging.ERROR, logger="topicsrv.storage"):
        async with running(tmp_path, shards=1) as (e, _):
            got = live(e, "d")
            assert len(got) < len(acked)  # replay stopped at the damage
            nxt = await write(e, "d", ["after"])
            assert nxt["first_seq"] > max(acked)  # never an acknowledged seq again
            below = max(got) if got else 0
            res = e.diff("d", below, 10)
            assert res.tombstone is not None and res.tombstone.reason == "lost"
            assert res.tombstone.gap_to >= max(acked)
            # the other topic lost nothing and reads without a tombstone
            other = e.diff("other", 0, 10)
            assert other.tombstone is None and len(other.records) == 1
    errors = " ".join(r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR)
    assert wal.name in errors and f"offset {offset}" in errors
    assert "topics affected" in errors and "d (seqs continue at" in errors
    assert _damaged_files(tmp_path)
    assert check(tmp_path).problems == []  # the data dir is consistent again


async def test_a_torn_tail_skips_no_more_than_before(tmp_path: Path) -> None:
    """A write cut short by a crash (a frame running past the end of the file) is not
    damage in the middle: no safety margin beyond the durable ceiling."""
    async with running(tmp_path, crash=True, shards=1) as (e, st):
        e.put_topic("t", {"durability": "disk"})
        for i in range(3):
            await write(e, "t", [i])
        for sh in st.shards:
            await sh.drain()
    wal = [p for _, _, p in wal_files(tmp_path / "wal") if p.stat().st_size > frames.FILE_HEADER_SIZE][-1]
    with wal.open("ab") as f:
        f.write(frames.encode(frames.T_APPEND, b"x" * 40)[:30])
    async with running(tmp_path, shards=1) as (e, _):
        assert len(live(e, "t")) == 3
        nxt = await write(e, "t", ["n"])
        assert nxt["first_seq"] <= 3 + 2048
