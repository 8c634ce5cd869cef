"""Engine + real storage in-process: what survives a clean restart and a crash."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from topicsrv.engine.log.deletes import parse_match
from topicsrv.engine.log.records import prepare_fields, prepare_json
from topicsrv.engine.log.segments import SEGMENT_RECORDS
from topicsrv.storage import frames, segfiles
from topicsrv.storage.fsck import check

from .harness import live, running, write


def _state(engine, name):  # type: ignore[no-untyped-def]
    d = engine.describe(engine.get(name))
    return {k: d[k] for k in ("epoch", "head_seq", "earliest_seq", "count", "bytes", "durability")}


async def test_clean_restart_keeps_records_tags_deletes_and_watermarks(tmp_path: Path) -> None:
    async with running(tmp_path) as (e, _):
        e.put_topic("t", {"durable": True})
        await write(e, "t", list(range(6000)), tag="a")
        await write(e, "t", ["x", "y"], tag="b", node="n1")
        _, tok = e.delete_records("t", 10, None)
        await tok.wait()  # type: ignore[union-attr]
        _, tok = e.delete_seqs("t", [100, 5000])
        await tok.wait()  # type: ignore[union-attr]
        before, state = live(e, "t"), _state(e, "t")
    async with running(tmp_path) as (e, _):
        assert live(e, "t") == before
        assert _state(e, "t") == state
        # the tag index came back: a match delete finds the restored tagged records
        res, _ = e.delete_records("t", None, parse_match("b"))
        assert res["deleted"] == 2
        nxt = await write(e, "t", ["z"])
        assert nxt["first_seq"] == state["head_seq"] + 1  # clean restart: no gap
    assert check(tmp_path).problems == []


async def test_crash_keeps_every_fsync_ack_and_never_reuses_a_seq(tmp_path: Path) -> None:
    acked: dict[int, bytes] = {}
    async with running(tmp_path, crash=True) as (e, _):
        e.put_topic("f", {"durability": "fsync"})
        for i in range(50):
            r = await write(e, "f", [i, i])
            for s in r["seqs"]:
                acked[s] = e.get("f").record_at(s)[0]  # type: ignore[index]
        head = e.get("f").head_seq
    async with running(tmp_path) as (e, _):
        got = live(e, "f")
        assert {s: got[s] for s in acked} == acked
        r = await write(e, "f", ["after"])
        assert r["first_seq"] > head  # seqs are never reused
        # An fsync topic's readers only ever saw durable records, and the WAL ended cleanly,
        # so the reserved-but-unused seqs between the old head and the new write hid nothing
        # anyone read or was acknowledged: a reader at the old head just reads on.
        res = e.diff("f", head, 100)
        assert res.tombstone is None and res.seqs == [r["first_seq"]]
    assert check(tmp_path).problems == []


async def test_crash_of_a_disk_topic_reports_the_unsynced_tail_lost(tmp_path: Path) -> None:
    """disk-class writes are acknowledged on enqueue, so after a crash the seqs above the
    recovered head may have been acknowledged and read: a reader crossing them is told."""
    async with running(tmp_path, crash=True) as (e, _):
        e.put_topic("k", {"durability": "disk"})
        for i in range(20):
            await write(e, "k", [i])
        head = e.get("k").head_seq
    async with running(tmp_path) as (e, _):
        r = await write(e, "k", ["after"])
        assert r["first_seq"] > head
        res = e.diff("k", head, 100)
        assert res.tombstone is not None and res.tombstone.reason == "lost"
    assert check(tmp_path).problems == []


async def test_fsync_records_are_readable_only_once_durable(tmp_path: Path) -> None:
    """Readers see fsync-class records in durable commit order: never one a crash could take
    back (docs/decisions.md)."""
    async with running(tmp_path) as (e, _):
        e.put_topic("v", {"durability": "fsync"})
        first = await write(e, "v", ["a"])
        _, token = e.write("v", [prepare_json({"data": "b"})])
        assert token is not None
        hidden = e.diff("v", 0, 10)
        assert hidden.seqs == [first["first_seq"]] and hidden.head_seq == first["last_seq"]
        assert e.state("v")["head_seq"] == first["last_seq"]
        await token.wait()
        shown = e.diff("v", 0, 10)
        assert shown.seqs == [first["first_seq"], first["first_seq"] + 1]


async def test_delete_of_a_sealed_record_survives_wal_trim_and_crash(tmp_path: Path) -> None:
    async with running(tmp_path, crash=True) as (e, st):
        e.put_topic("d", {"durable": True})
        await write(e, "d", list(range(SEGMENT_RECORDS + 10)))
        await st.checkpoint()  # segment 1 sealed on disk, WAL trimmed
        _, tok = e.delete_seqs("d", [7, 8])
        await tok.wait()  # type: ignore[union-attr]
        await st.flip_deleted(e.get("d"))
        await st.checkpoint()  # the Delete frame is trimmed away with the WAL
        data = next((tmp_path / "topics").glob("d@1/*.data"))
    raw = data.read_bytes()
    sf = segfiles.load(data, data.with_suffix(".idx"), 1).sf
    assert raw[sf.offsets[6] + frames.FLAG_OFFSET] == frames.DELETED_FLAG  # seq 7 = slot 6
    assert raw[sf.offsets[5] + frames.FLAG_OFFSET] == 0
    async with running(tmp_path) as (e, _):
        got = live(e, "d")
        assert 7 not in got and 8 not in got and 6 in got and 9 in got
        assert e.get("d").count == SEGMENT_RECORDS + 8


async def test_a_segment_whose_every_record_is_deleted_is_unlinked(tmp_path: Path) -> None:
    async with running(tmp_path) as (e, st):
        e.put_topic("u", {"durable": True})
        await write(e, "u", ["keep"], tag="k")
        for _ in range(2):
            await write(e, "u", ["gone"] * (SEGMENT_RECORDS - 1), tag="g")
        await write(e, "u", ["keep"] * 10, tag="k")
        await st.checkpoint()
        d = tmp_path / "topics" / "u@1"
        assert segfiles.data_path(d, SEGMENT_RECORDS).exists()
        _, tok = e.delete_records("u", None, parse_match("g"))
        await tok.wait()  # type: ignore[union-attr]
        await st.flip_deleted(e.get("u"))
        # the interior segment [4096, 8192) is all dead: unlinked whole
        assert not segfiles.data_path(d, SEGMENT_RECORDS).exists()
        before = live(e, "u")
    async with running(tmp_path) as (e, _):
        assert live(e, "u") == before
        assert e.get("u").count == 11
    assert check(tmp_path).problems == []


async def test_topic_drop_and_recreate_survive_with_a_new_epoch(tmp_path: Path) -> None:
    async with running(tmp_path, crash=True) as (e, _):
        e.put_topic("r", {"durable": True})
        await write(e, "r", [1, 2, 3])
        _, tok = e.delete_topic("r")
        await tok.wait()  # type: ignore[union-attr]
        _, _, tok = e.put_topic("r", {"durable": True, "ttl_ms": 5000})
        await tok.wait()  # type: ignore[union-attr]
        await write(e, "r", [9])
    async with running(tmp_path) as (e, _):
        t = e.get("r")
        assert t.epoch == 2 and t.config.ttl_ms == 5000
        assert [b for b in live(e, "r").values()][0].endswith(b'"data":9}')
        _, tok = e.delete_topic("r")
        await tok.wait()  # type: ignore[union-attr]
    async with running(tmp_path) as (e, _):
        assert e.find("r") is None
        e.put_topic("r", {})
        assert e.get("r").epoch == 3  # epochs outlive the topic: stale cursors see `recreated`


async def test_group_commit_batches_concurrent_fsync_writers(tmp_path: Path) -> None:
    async with running(tmp_path) as (e, st):
        e.put_topic("g", {"durable": True})

        async def writer(i: int) -> None:
            for k in range(20):
                await write(e, "g", [i, k])

        async with trio.open_nursery() as n:
            for i in range(32):
                n.start_soon(writer, i)
        s = st.stats()
        assert s["wal_records"] == 32 * 20 * 2
        assert s["records_per_sync"] > 4  # many writes share one fdatasync


@pytest.mark.parametrize("shards", [1, 3])
async def test_shard_count_can_change_between_runs(tmp_path: Path, shards: int) -> None:
    async with running(tmp_path, crash=True, shards=4) as (e, _):
        for i in range(8):
            e.put_topic(f"s{i}", {"durable": True})
            await write(e, f"s{i}", [i] * 3)
    async with running(tmp_path, shards=shards) as (e, _):
        for i in range(8):
            assert len(live(e, f"s{i}")) == 3
            await write(e, f"s{i}", [i])
    async with running(tmp_path, shards=4) as (e, _):
        assert all(len(live(e, f"s{i}")) == 4 for i in range(8))


async def test_bare_segments_of_entries_persist_and_come_back_identical(tmp_path: Path) -> None:
    """Sealed segments of XADD records are kept without their IDs in memory (segments Rule 7):
    the segment files, a restart and the reads after it see the very same entries."""
    recs = [prepare_fields([b"f", b"v%d" % i]) for i in range(4 * SEGMENT_RECORDS)]
    async with running(tmp_path) as (e, st):
        e.put_topic("c", {"durable": True})
        for k in range(0, len(recs), 1000):
            _, tok = e.write("c", recs[k:k + 1000])
            await tok.wait()  # type: ignore[union-attr]
        assert e.get("c").segs[0].bare  # type: ignore[union-attr]
        _, tok = e.delete_seqs("c", [5, 6, SEGMENT_RECORDS + 1])
        await tok.wait()  # type: ignore[union-attr]
        await st.checkpoint()
        before = live(e, "c")
    async with running(tmp_path) as (e, _):
        topic = e.get("c")
        assert topic.segs[0].bare and not topic.segs[-2].bare  # type: ignore[union-attr]
        assert live(e, "c") == before and 5 not in before and len(before) == len(recs) - 3
    assert check(tmp_path).problems == []
