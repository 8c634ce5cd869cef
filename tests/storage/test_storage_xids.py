"""Client-chosen stream IDs survive restarts and crashes (engine/log/xids.py; docs/storage.md):
the APPEND and REC trailers, the checkpoint's `xid_since`/`last_id`, the XSETID frame."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from topicsrv.engine import Engine
from topicsrv.engine.log import xids
from topicsrv.engine.log.records import prepare_fields
from topicsrv.storage import codec

from .harness import running


async def _add(e: Engine, name: str, xid: tuple[int, int | None] | None, n: int = 1) -> Any:
    result, token = e.write(name, [prepare_fields([b"i", b"%d" % k]) for k in range(n)], xid=xid,
                            config={"durability": "fsync"})
    if token is not None:
        await token.wait()
    return result


def _ids(e: Engine, name: str) -> list[tuple[int, int]]:
    """The IDs of the live records, in seq order."""
    t = e.get(name)
    out = []
    for seq in range(t.front, t.next_seq):
        if t.record_at(seq) is not None:
            out.append(xids.xid_of(t, seq))
    return out


async def _script(e: Engine) -> list[tuple[int, int]]:
    await _add(e, "s", None, 3)  # an implicit era first
    t = e.get("s")
    implicit = [xids.xid_of(t, s) for s in range(t.seq_base, t.next_seq)]
    await _add(e, "s", (10**15, 7))
    await _add(e, "s", None, 2)  # `*` after an explicit ID: same ms, seq + 1
    await _add(e, "s", (10**15 + 5, None))
    _, token = e.delete_seqs("s", [t.next_seq - 2])
    if token is not None:
        await token.wait()
    return implicit + [(10**15, 7), (10**15, 8), (10**15 + 5, 0)]


@pytest.mark.parametrize("checkpoint", [False, True])
async def test_ids_survive_a_crash(tmp_path: Path, checkpoint: bool) -> None:
    async with running(tmp_path, crash=True) as (e, st):
        if checkpoint:  # segments carry the first part, the WAL the rest
            await _add(e, "s", (5, 5))
            await st.checkpoint()
            for _ in range(4):
                await _add(e, "s", (6, None))
            want = [(5, 5), (6, 0), (6, 1), (6, 2), (6, 3)]
        else:
            want = await _script(e)
        assert _ids(e, "s") == want
        last = e.get("s").last_id
    async with running(tmp_path) as (e, st):
        t = e.get("s")
        assert _ids(e, "s") == want and t.last_id == last
        got = await _add(e, "s", None)  # `*` continues above the recovered last ID
        assert got["xids"][0] > last


async def test_ids_survive_a_clean_restart_and_xsetid_a_crash(tmp_path: Path) -> None:
    async with running(tmp_path) as (e, st):
        want = await _script(e)
    async with running(tmp_path, crash=True) as (e, st):  # recovered from segments + checkpoint
        t = e.get("s")
        assert _ids(e, "s") == want
        await e.set_stream_id(t, (10**16, 0)).wait()  # type: ignore[union-attr]
    async with running(tmp_path) as (e, st):
        t = e.get("s")
        assert _ids(e, "s") == want and t.last_id == (10**16, 0)
        assert (await _add(e, "s", None))["xids"][0] == (10**16, 1)
        with pytest.raises(Exception, match="equal or smaller"):
            await _add(e, "s", (10**16, 1))


async def test_xsetid_below_a_deleted_top_survives_a_restart(tmp_path: Path) -> None:
    async with running(tmp_path, crash=True) as (e, st):
        await _add(e, "s", (1, 1))
        await _add(e, "s", (9, 9))
        t = e.get("s")
        _, token = e.delete_seqs("s", [t.head_seq])
        if token is not None:
            await token.wait()
        await st.checkpoint()  # the deleted slot's ID (9-9) is in the segment file
        await e.set_stream_id(t, (2, 0)).wait()  # type: ignore[union-attr]
    async with running(tmp_path) as (e, st):
        assert e.get("s").last_id == (2, 0)
        await _add(e, "s", (3, 0))  # accepted, as Redis does after XSETID 2-0
        assert _ids(e, "s") == [(1, 1), (3, 0)]
        assert xids.exact(e.get("s"), (3, 0)) == e.get("s").head_seq


def test_bodies_without_the_trailer_read_as_implicit() -> None:
    items = [(b"*2\r\n$3\r\n1-1\r\n*0\r\n", 0, None, "t")]
    body = memoryview(codec.encode_append("s", 1, 1, 5, items))
    *_, n, pos = codec.append_header(body)
    assert codec.append_xids(body, pos, n) is None
    body = memoryview(codec.encode_append("s", 1, 1, 5, items, [(7, 8)]))
    assert list(codec.append_items(body, pos, n))[0][0] == items[0][0]
    assert codec.append_xids(body, pos, n) == [(7, 8)]
    rc = memoryview(codec.encode_append_rc("s", 1, 1, 5, items, 42, [(7, 8)]))
    assert codec.append_xids(rc, pos, n, rc=True) == [(7, 8)] and codec.append_rc(rc) == 42
    assert codec.decode_slot(memoryview(codec.encode_slot(3, 4, b"x", 1, None, None)))[6] is None
    assert codec.decode_slot(memoryview(codec.encode_slot(3, 4, b"x", 1, None, None, (1, 2))))[6] == (1, 2)
