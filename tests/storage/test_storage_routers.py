"""Routers with real storage in-process: definitions survive, copies are re-derived after a
crash at the dest seqs readers saw (docs/storage.md §Routers)."""

from __future__ import annotations

from pathlib import Path

import orjson

from topicsrv.engine.log.deletes import parse_match
from topicsrv.storage.fsck import check
from topicsrv.storage.images import CHECKPOINT

from .harness import running, write
from .routerkit import layout, metas, settle, step, write_nowait
from .test_storage_names import FailOneTopic

FSYNC = {"durability": "fsync"}


async def _router(engine, name, body):  # type: ignore[no-untyped-def]
    _, _, token = engine.router_put(name, body)
    if token is not None:
        await token.wait()


async def test_crash_keeps_the_dest_seq_of_every_copy(tmp_path: Path) -> None:
    async with running(tmp_path, crash=True) as (e, st):
        e.put_topic("src", FSYNC)
        e.put_topic("dst", FSYNC)
        await _router(e, "r", {"source": "src", "dest": "dst"})
        await write(e, "src", list(range(20)))
        settle(e)
        await st.checkpoint()  # the dest's slots and the cursor 20 go into checkpoint.json
        for i in range(5):
            await write(e, "src", [f"b{i}-{j}" for j in range(7)])
            step(e, "r", 4)  # the router lags behind, in odd batches
        seen = layout(e, "dst")
        assert len(seen) > 20
    async with running(tmp_path, crash=True) as (e, _):
        after = layout(e, "dst")
        assert {s: after[s] for s in seen} == seen  # every copy a reader saw, same seq
        settle(e)
        assert sorted(map(str, layout(e, "dst").values())) == sorted(map(str, layout(e, "src").values()))
        assert e.router_get("r")["cursor"] == e.get("src").head_seq
        seen = layout(e, "dst")
        await write(e, "src", ["c"])
        settle(e)
        seen = layout(e, "dst")
    async with running(tmp_path) as (e, _):  # a second crash: the same again
        assert layout(e, "dst") == seen
    assert check(tmp_path).problems == []


async def test_a_mixed_dest_keeps_its_layout(tmp_path: Path) -> None:
    """Direct writes, deletes and trims of a dest replay at their places among the copies."""
    async with running(tmp_path, crash=True) as (e, st):
        e.put_topic("src", FSYNC)
        e.put_topic("dst", {"durability": "disk"})
        await _router(e, "r", {"source": "src", "dest": "dst"})
        await write(e, "src", list(range(10)))
        step(e, "r", 3)
        await st.checkpoint()
        for i in range(6):
            await write(e, "src", [f"s{i}"] * 3)
            step(e, "r", 2)
            await write(e, "dst", [f"direct{i}"])
        _, token = e.delete_records("dst", None, parse_match(["tag", "Eq", "nope"]))
        deleted, token = e.delete_seqs("dst", [e.get("dst").head_seq - 1])
        assert deleted == 1
        if token is not None:
            await token.wait()
        step(e, "r", 5)
        await write(e, "dst", ["last"])
        before = layout(e, "dst")
        barrier = st.barrier(e.get("dst"))
        if barrier is not None:
            await barrier.wait()
    async with running(tmp_path) as (e, _):
        after = layout(e, "dst")  # recovery also forwarded what the router had not yet
        assert {s: d for s, d in after.items() if s <= max(before)} == before
        settle(e)
        datas = list(layout(e, "dst").values())
        assert sum(1 for d in datas if str(d).startswith("direct")) == 6


async def test_exactly_once_has_each_record_once_after_crashes(tmp_path: Path) -> None:
    body = {"source": "src", "dest": "dst", "guarantee": "exactly_once"}
    async with running(tmp_path, crash=True) as (e, _):
        e.put_topic("src", FSYNC)
        await _router(e, "r", body)
        await write(e, "src", list(range(12)))
        step(e, "r", 5)
    for round_ in range(3):
        async with running(tmp_path, crash=True) as (e, st):
            await write(e, "src", [f"r{round_}-{i}" for i in range(9)])
            step(e, "r", 7)
            if round_ == 1:
                await st.checkpoint()
                step(e, "r", 3)
    async with running(tmp_path) as (e, _):
        settle(e)
        keys = [m["_topics_router"] for m in metas(e, "dst")]
        assert len(keys) == len(set(keys)) == len(layout(e, "src")) == 12 + 27
        assert sorted(map(str, layout(e, "dst").values())) == sorted(map(str, layout(e, "src").values()))


async def test_router_definitions_survive_clean_and_crash_restarts(tmp_path: Path) -> None:
    async with running(tmp_path, crash=True) as (e, st):
        await _router(e, "keep", {"source": "a", "dest": "b", "filter": ["tag", "Eq", "x"]})
        await _router(e, "gone", {"source": "a", "dest": "c"})
        await st.checkpoint()
        await _router(e, "later", {"source": "b", "dest": "d", "preserve_node": False})
        await _router(e, "keep", {"source": "a", "dest": "b", "filter": ["tag", "Glob", "x*"]})
        token = e.router_delete("gone")
        if token is not None:
            await token.wait()
        want = {r["name"]: r for r in e.router_list()}
    for crash in (False, True):
        async with running(tmp_path, crash=crash) as (e, _):
            got = {r["name"]: r for r in e.router_list()}
            assert got.keys() == {"keep", "later"}
            for name in got:
                for key in ("source", "dest", "filter", "preserve_node", "created_ts", "cursor", "guarantee"):
                    assert got[name][key] == want[name][key], (name, key)
    ck = orjson.loads((tmp_path / CHECKPOINT).read_bytes())
    assert sorted(s["name"] for s in ck["routers"]) == ["keep", "later"]
    assert check(tmp_path).problems == []


async def test_a_deleted_topic_takes_its_routers_along(tmp_path: Path) -> None:
    async with running(tmp_path, crash=True) as (e, st):
        e.put_topic("a", FSYNC)
        await _router(e, "ab", {"source": "a", "dest": "b"})
        await _router(e, "cd", {"source": "c", "dest": "d"})
        await write(e, "a", list(range(5)))
        settle(e)
        await st.checkpoint()
        await write(e, "a", ["x", "y"])
        settle(e)
        copies = layout(e, "b")
        for name in ("a", "d"):
            _, token = e.delete_topic(name)
            if token is not None:
                await token.wait()
        assert e.router_list() == []
    async with running(tmp_path, crash=True) as (e, _):
        assert e.router_list() == []
        assert e.find("a") is None and e.find("d") is None
        assert layout(e, "b") == copies  # the copies stay, at their seqs
        assert not e.get("b").ext.get("router_in") and not e.get("c").ext.get("router_out")
    async with running(tmp_path) as (e, _):
        assert e.router_list() == []


async def test_a_failed_dest_checkpoint_keeps_cursor_and_dest_together(tmp_path: Path) -> None:
    """Rule 4: the dest keeps its older entry (slots and cursor of the same step); the
    source's checkpoint succeeds. After a crash the copies come back at their seqs."""
    ops = FailOneTopic("dst@")
    async with running(tmp_path, crash=True, shards=1, ops=ops) as (e, st):
        e.put_topic("src", FSYNC)
        await _router(e, "r", {"source": "src", "dest": "dst"})
        await write(e, "src", list(range(8)))
        settle(e)
        await st.checkpoint()
        assert st.last_checkpoint_error is not None and "dst" in st.last_checkpoint_error
        await write(e, "src", list(range(8, 15)))
        step(e, "r", 4)
        await write(e, "dst", ["direct"])
        step(e, "r", 2)
        await st.checkpoint()
        seen = layout(e, "dst")
    entries = {t["name"]: t for t in orjson.loads((tmp_path / CHECKPOINT).read_bytes())["topics"]}
    assert "replay_from" in entries["dst"] and "replay_from" not in entries["src"]
    async with running(tmp_path, shards=1, ops=ops) as (e, _):
        got = layout(e, "dst")
        assert {s: got[s] for s in seen} == seen
        settle(e)
        assert len(layout(e, "dst")) == 15 + 1


async def test_a_router_forwards_only_durable_records_so_a_crash_loses_no_copy(tmp_path: Path) -> None:
    """A disk-class source acknowledges on enqueue, so a crash can lose records readers of the
    source saw. Its router forwards a record only once it is durable (routerfwd Rule 7): the
    queued records are not in the dest, the crash loses no copy, and the dest comes back with
    no `lost` gap; the next copy takes the next seq (issue 23: no tombstone where nothing
    forwarded was lost)."""
    async with running(tmp_path, crash=True) as (e, _):
        e.put_topic("src", {"durability": "disk"})
        await _router(e, "r", {"source": "src", "dest": "dst"})
        await write(e, "src", list(range(5)))
        settle(e)
        write_nowait(e, "src", ["unsynced"] * 4)  # queued, never written: the crash loses them
        settle(e)
        seen = layout(e, "dst")
        assert sorted(seen.values()) == list(range(5))  # held until durable
        top = max(seen)
    async with running(tmp_path) as (e, _):
        assert layout(e, "dst") == seen
        res = e.diff("dst", 0, 100)
        assert res.tombstone is None and res.head_seq == top
        await write(e, "src", ["new"])
        settle(e)
        assert layout(e, "dst") == {**seen, top + 1: "new"}


async def test_a_mirror_is_re_derived_to_the_same_layout(tmp_path: Path) -> None:
    """A <-> B with allow_cycle: each side's direct writes and the other's copies interleave;
    after a crash both come back at the same seqs (passes repeat to a fixed point)."""
    async with running(tmp_path, crash=True) as (e, st):
        e.put_topic("a", FSYNC)
        e.put_topic("b", FSYNC)
        await _router(e, "ab", {"source": "a", "dest": "b", "allow_cycle": True})
        await _router(e, "ba", {"source": "b", "dest": "a", "allow_cycle": True})
        await st.checkpoint()
        for i in range(6):
            await write(e, "a", [f"a{i}"] * 2)
            step(e, "ab", 3)
            await write(e, "b", [f"b{i}"])
            step(e, "ba", 2)
        settle(e)
        seen = {t: layout(e, t) for t in ("a", "b")}
    async with running(tmp_path) as (e, _):
        assert {t: layout(e, t) for t in ("a", "b")} == seen
        assert sorted(map(str, seen["a"].values())) == sorted(map(str, seen["b"].values()))


async def test_source_trim_gaps_keep_their_reason_on_disk(tmp_path: Path) -> None:
    """TRIMMED slots (a segment) and runs (checkpoint `runs`) come back TRIMMED."""
    async with running(tmp_path) as (e, st):
        e.put_topic("src", {"durability": "fsync", "cap_records": 3})
        await write(e, "src", list(range(10)))  # 7 evicted before the router exists...
        await _router(e, "r", {"source": "src", "dest": "dst"})
        await write(e, "src", list(range(10, 20)))  # ...and 7 more evicted unforwarded
        settle(e)
        gap = e.diff("dst", 0, 100)
        assert gap.tombstone is not None and gap.tombstone.reason == "source_trim"
        before = (gap.tombstone.to_json(), layout(e, "dst"))
        await st.checkpoint()
    async with running(tmp_path) as (e, _):
        res = e.diff("dst", 0, 100)
        assert res.tombstone is not None and (res.tombstone.to_json(), layout(e, "dst")) == before
    assert check(tmp_path).problems == []
