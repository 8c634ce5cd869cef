"""A router dest's `source_trim` gaps (TRIMMED slots) on disk: never reclaimed silently."""

from __future__ import annotations

from pathlib import Path

from topicsrv.engine.log.segments import SEGMENT_RECORDS, TRIMMED
from topicsrv.storage import segfiles
from topicsrv.storage.fsck import check
from topicsrv.storage.state import state_of

from .harness import running, write
from .routerkit import settle

DISK = {"durability": "disk"}


async def test_a_dead_segment_holding_a_trimmed_slot_is_kept(tmp_path: Path) -> None:
    """Every record of the dest's first (full, sealed) segment is deleted, but two of its
    slots are a `source_trim` gap: the flip pass keeps the segment, and after a restart a
    reader still gets the `source_trim` tombstone."""
    async with running(tmp_path) as (e, st):
        e.put_topic("src", DISK)
        _, _, token = e.router_put("r", {"source": "src", "dest": "dst"})
        if token is not None:
            await token.wait()
        await write(e, "src", list(range(2000)))
        settle(e)
        await write(e, "src", ["x", "y", "z"])
        e.trim("src", minid_seq=2003)  # 2001, 2002 go unforwarded: a 2-seq source_trim gap
        await write(e, "src", list(range(2200)))
        settle(e)
        dst = e.get("dst")
        seg = dst.segs[0]
        assert seg.full and seg.flags.count(TRIMMED) == 2
        await st.checkpoint()  # the first segment is sealed into its file
        copies = [s for s in range(seg.base, seg.end) if seg.flags[s - seg.base] != TRIMMED]
        _, token = e.delete_seqs("dst", copies)
        if token is not None:
            await token.wait()
        assert seg.live == 0
        await st.flip_deleted(dst)
        stt = state_of(dst, st.nshards)
        assert seg.base // SEGMENT_RECORDS in stt.files  # not dropped
        assert segfiles.data_path(tmp_path / stt.dir, seg.base).exists()
        res = e.diff("dst", 0, 10)
        assert res.tombstone is not None and res.tombstone.reason == "source_trim"
    for crash in (True, False):
        async with running(tmp_path, crash=crash) as (e, _):
            res = e.diff("dst", 0, 10)
            assert res.tombstone is not None and res.tombstone.reason == "source_trim", res
    assert check(tmp_path).problems == []
