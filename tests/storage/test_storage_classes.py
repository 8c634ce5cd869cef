"""Each durability class across a crash and a clean restart; the cold tier."""

from __future__ import annotations

from pathlib import Path

from topicsrv.engine.log.segments import SEGMENT_RECORDS
from topicsrv.storage.fsck import check

from .harness import live, running, write


def _count(d: Path, pattern: str = "*.data") -> int:
    return len(list(d.glob(pattern)))


async def test_ephemeral_comes_back_empty_with_seqs_above_the_old_head(tmp_path: Path) -> None:
    for crash in (False, True):
        d = tmp_path / f"crash{crash}"
        async with running(d, crash=crash) as (e, _):
            e.put_topic("eph", {"durability": "ephemeral", "ttl_ms": 60000})
            r = await write(e, "eph", list(range(10)))
            assert r["durability"] == "ephemeral"
        async with running(d) as (e, _):
            t = e.get("eph")
            assert t.config.durability == "ephemeral" and t.config.ttl_ms == 60000  # config survives
            assert t.count == 0 and live(e, "eph") == {}
            nxt = await write(e, "eph", ["new"])
            assert nxt["first_seq"] > r["last_seq"]
            # a reader that had not read the old records is told they are gone
            res = e.diff("eph", 0, 10)
            assert res.tombstone is not None and res.tombstone.reason == "lost"
        assert _count(d / "topics", "eph@*/*.data") == 0  # records never hit segments


async def test_memory_topic_config_survives_and_records_may(tmp_path: Path) -> None:
    async with running(tmp_path, crash=True) as (e, _):
        e.put_topic("mem", {"durability": "memory", "cap_records": 100})
        r = await write(e, "mem", list(range(5)))
    async with running(tmp_path) as (e, _):
        t = e.get("mem")
        assert t.config.durability == "memory" and t.config.cap_records == 100
        got = live(e, "mem")
        assert set(got) <= set(r["seqs"])  # never a fabricated record
        nxt = await write(e, "mem", ["x"])
        assert nxt["first_seq"] not in got
    async with running(tmp_path) as (e, _):  # after a clean stop, rebuilt after readiness
        assert len(live(e, "mem")) == len(got) + 1


async def test_disk_class_keeps_what_was_flushed_and_never_rewinds(tmp_path: Path) -> None:
    async with running(tmp_path, crash=True) as (e, st):
        e.put_topic("dsk", {})
        r = await write(e, "dsk", list(range(20)))
        assert r["durability"] == "disk"
        for sh in st.shards:  # let the writers group-commit what was acked on enqueue
            while sh.batch.frames:
                await sh.step()
        flushed = live(e, "dsk")
        tail = await write(e, "dsk", ["maybe-lost"])  # acked on enqueue, crash before fsync
    async with running(tmp_path) as (e, _):
        got = live(e, "dsk")
        assert {s: got[s] for s in flushed} == flushed
        nxt = await write(e, "dsk", ["after"])
        assert nxt["first_seq"] > tail["last_seq"]  # the HeadWatermark kept seqs monotonic


async def test_fsync_ack_reports_real_fsync_ms(tmp_path: Path) -> None:
    async with running(tmp_path) as (e, _):
        e.put_topic("fs", {"durable": True})
        from topicsrv.engine.log.records import prepare_json

        _, token = e.write("fs", [prepare_json({"data": 1})])
        assert token is not None
        assert await token.wait() > 0.0
        e.put_topic("dk", {"durable": False})
        _, token = e.write("dk", [prepare_json({"data": 1})])
        assert token is None or await token.wait() == 0.0


async def test_cold_tier_relocates_old_segments_and_reads_are_unchanged(tmp_path: Path) -> None:
    hot, cold = tmp_path / "hot", tmp_path / "cold"
    async with running(hot, cold_dir=cold) as (e, st):
        e.put_topic("c", {"durable": True})
        for _ in range(5):
            await write(e, "c", list(range(SEGMENT_RECORDS)))
        await st.checkpoint()
        moved = await st.relocate()
        assert moved >= 2
        assert _count(cold / "topics" / "c@1") == moved
        assert _count(hot / "topics" / "c@1") == 6 - moved
        before = live(e, "c")
        _, tok = e.delete_seqs("c", [5])  # a delete of a record that lives in the cold tier
        await tok.wait()  # type: ignore[union-attr]
        await st.flip_deleted(e.get("c"))
        res = e.diff("c", 0, 10)
        assert len(res.records) == 10
    async with running(hot, cold_dir=cold) as (e, _):
        got = live(e, "c")
        assert 5 not in got
        assert got == {s: b for s, b in before.items() if s != 5}
    assert check(hot, cold).problems == []
