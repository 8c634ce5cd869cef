"""The idempotency table survives restarts and crashes (engine/log/idempotency.py Rule 6;
docs/storage.md T_IDMP): a T_IDMP add frame just before its APPEND, the table in checkpoints,
XCFGSET as a gated T_IDMP cfg frame; a key whose APPEND never reached the WAL is dropped."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from topicsrv.clock import FakeClock
from topicsrv.engine import Engine
from topicsrv.engine.log.records import prepare_fields
from topicsrv.storage import frames

from .harness import running


async def _xadd(e: Engine, iid: bytes, value: bytes = b"v") -> dict[str, Any]:
    result, token = e.write("s", [prepare_fields([b"f", value])], idmp=(b"p", iid),
                            config={"durability": "fsync"})
    if token is not None:
        await token.wait()
    return result


@pytest.mark.parametrize("checkpoint", [False, True])
async def test_keys_survive_a_crash_with_their_windows(tmp_path: Path, checkpoint: bool) -> None:
    clock = FakeClock()
    async with running(tmp_path, clock=clock, crash=True) as (e, st):
        first = await _xadd(e, b"a")
        await e.idmp_configure(e.get("s"), 10, 50).wait()  # type: ignore[union-attr]
        if checkpoint:
            await st.checkpoint()
        second = await _xadd(e, b"b")
        assert (await _xadd(e, b"b"))["duplicate"]
    async with running(tmp_path, clock=clock) as (e, st):
        table = e.get("s").idempotency
        assert (table.duration_s, table.maxsize, table.added) == (10, 50, 2)
        assert not (await _xadd(e, b"a"))["duplicate"]  # XCFGSET cleared it, also on replay
        again = await _xadd(e, b"b", b"x")
        assert again["duplicate"] and again["seqs"] == second["seqs"] and again["ts"] == second["ts"]
        assert e.get("s").count == 3 and first["seqs"] != second["seqs"]
        clock.advance(10_000)  # the window is the engine clock's, across the restart
        assert not (await _xadd(e, b"b"))["duplicate"]


async def test_a_key_whose_append_was_cut_off_is_dropped(tmp_path: Path) -> None:
    async with running(tmp_path, crash=True) as (e, st):
        await _xadd(e, b"a")
        await _xadd(e, b"b")
    # a torn tail: the last frame (b's APPEND) is gone, its T_IDMP add just before it is not
    wal = sorted((tmp_path / "wal").glob("wal-*.log"), key=lambda p: p.stat().st_size)[-1]
    raw = memoryview(wal.read_bytes())
    got = [f for f in frames.scan(raw, frames.FILE_HEADER_SIZE) if isinstance(f, frames.Frame)]
    assert [f.ftype for f in got[-2:]] == [frames.T_IDMP, frames.T_APPEND]
    os.truncate(wal, got[-1].offset)
    async with running(tmp_path) as (e, st):
        assert e.get("s").count == 1
        assert (await _xadd(e, b"a"))["duplicate"]
        assert not (await _xadd(e, b"b"))["duplicate"]  # b was never durable: written now
        assert e.get("s").count == 2


async def test_a_batch_under_one_key_survives_a_crash(tmp_path: Path) -> None:
    """TOPIC.APPEND's write (resp/commands/topic_append.py Rule 2): one key for many records,
    kept with them across a crash, a repeat answered with the whole batch."""
    batch = [prepare_fields([b"f", b"%d" % i]) for i in range(3)]
    async with running(tmp_path, crash=True) as (e, st):
        result, token = e.write("s", batch, idmp=(b"p", b"batch-1"), config={"durability": "fsync"})
        assert token is not None
        await token.wait()
    async with running(tmp_path) as (e, st):
        again, _ = e.write("s", batch[:1], idmp=(b"p", b"batch-1"))
        assert again["duplicate"] and again["seqs"] == result["seqs"] == [1, 2, 3]
        assert e.get("s").count == 3
