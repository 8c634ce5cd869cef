"""A source record deleted (or trimmed) after its router forwarded it, then a crash before
the next checkpoint: re-derivation gives it its dest seq again, so no dest seq a reader saw
ever holds another record (routerlog Rule 5, storage/removed.py)."""

from __future__ import annotations

from pathlib import Path

from topicsrv.storage.fsck import check

from .harness import running, write
from .routerkit import layout, settle, step

FSYNC = {"durability": "fsync"}


async def _router(engine, name, body):  # type: ignore[no-untyped-def]
    _, _, token = engine.router_put(name, body)
    if token is not None:
        await token.wait()


async def _del(engine, topic, seqs):  # type: ignore[no-untyped-def]
    n, token = engine.delete_seqs(topic, seqs)
    assert n == len(seqs)
    if token is not None:
        await token.wait()


async def test_a_forwarded_then_deleted_record_keeps_its_dest_seq(tmp_path: Path) -> None:
    """The records and the delete are in the WAL only: the copy comes back, and every copy
    after it keeps its seq (it used to come back one seq lower)."""
    async with running(tmp_path, crash=True) as (e, _):
        e.put_topic("src", FSYNC)
        await _router(e, "r", {"source": "src", "dest": "dst"})
        await write(e, "src", [f"a{i}" for i in range(6)])
        settle(e)
        await _del(e, "src", [2, 4])  # both forwarded already
        await write(e, "src", ["b0", "b1"])
        settle(e)
        seen = layout(e, "dst")
        assert list(seen.values()) == ["a0", "a1", "a2", "a3", "a4", "a5", "b0", "b1"]
    async with running(tmp_path, crash=True) as (e, _):
        assert layout(e, "dst") == seen
        await write(e, "src", ["c"])
        settle(e)
        assert layout(e, "dst") == {**seen, max(seen) + 1: "c"}
        seen = layout(e, "dst")
    async with running(tmp_path) as (e, _):  # after the startup checkpoint folded it in
        assert layout(e, "dst") == seen
    assert check(tmp_path).problems == []


async def test_a_record_deleted_before_it_was_forwarded_stays_skipped(tmp_path: Path) -> None:
    """Deleted between the checkpoint cut and its forward: no dest seq, as live."""
    async with running(tmp_path, crash=True) as (e, _):
        e.put_topic("src", FSYNC)
        await _router(e, "r", {"source": "src", "dest": "dst"})
        await write(e, "src", [f"a{i}" for i in range(4)])
        step(e, "r", 2)  # a0, a1 forwarded
        await _del(e, "src", [2, 3])  # a1 (forwarded) and a2 (not yet)
        await write(e, "src", ["b"])
        settle(e)
        seen = layout(e, "dst")
        assert list(seen.values()) == ["a0", "a1", "a3", "b"]
    async with running(tmp_path, crash=True) as (e, _):
        assert layout(e, "dst") == seen


async def test_a_checkpointed_record_deleted_after_a_lagging_forward(tmp_path: Path) -> None:
    """The source record is in a segment file (checkpointed while the router lagged); after
    the cut the router forwards it, it is deleted and the flip pass runs: its bytes stay on
    disk until a checkpoint has passed it, so recovery re-creates the copy. A delete made
    before the cut (not forwarded, so not flipped on disk yet) stays deleted and skipped
    after a restart from that checkpoint (its entry lists it: `dels`)."""
    async with running(tmp_path, crash=True) as (e, st):
        e.put_topic("src", FSYNC)
        await _router(e, "r", {"source": "src", "dest": "dst"})
        await write(e, "src", [f"a{i}" for i in range(10)])
        step(e, "r", 3)
        await st.checkpoint()  # src slots on disk, dst cursor 3
        await _del(e, "src", [5])  # before the next cut, never forwarded
        await st.checkpoint()  # the router still at 3: seq 5 stays live on disk, listed deleted
        settle(e)
        await _del(e, "src", [7, 8])
        await st.flip_deleted(e.get("src"))
        await write(e, "src", ["b"])
        settle(e)
        seen = layout(e, "dst")
        assert list(seen.values()) == [f"a{i}" for i in (0, 1, 2, 3, 5, 6, 7, 8, 9)] + ["b"]
        assert "a4" not in seen.values()
    async with running(tmp_path, crash=True) as (e, st):
        assert layout(e, "dst") == seen
        assert [d for d in layout(e, "src").values()] == [f"a{i}" for i in (0, 1, 2, 3, 5, 8, 9)] + ["b"]
        await st.checkpoint()
        await st.flip_deleted(e.get("src"))  # the cursors passed them: flipped now
    async with running(tmp_path) as (e, _):
        assert layout(e, "dst") == seen
        assert "a4" not in layout(e, "src").values()
    assert check(tmp_path).problems == []


async def test_a_filtered_router_over_a_trimmed_source(tmp_path: Path) -> None:
    """XTRIM after forwarding (the copies come back) and before forwarding (exactly as
    many `source_trim` seqs as records the filter would have passed)."""
    async with running(tmp_path, crash=True) as (e, _):
        e.put_topic("src", FSYNC)
        await _router(e, "r", {"source": "src", "dest": "dst", "filter": ["tag", "Eq", "k"]})
        for i in range(6):
            await write(e, "src", [f"a{i}"], tag="k" if i % 2 else "x")
        settle(e)  # a1, a3, a5
        for i in range(6):
            await write(e, "src", [f"b{i}"], tag="k" if i % 2 else "x")
        _, token = e.trim("src", minid_seq=10)  # a0..b2 go; b1 was never forwarded
        if token is not None:
            await token.wait()
        settle(e)  # a 1-seq source_trim gap, then b3, b5
        seen = layout(e, "dst")
        assert list(seen.values()) == ["a1", "a3", "a5", "b3", "b5"]
        assert max(seen) == 6
    async with running(tmp_path, crash=True) as (e, _):
        assert layout(e, "dst") == seen
        res = e.diff("dst", 3, 10)  # reads after seq 3
        assert res.tombstone is not None and res.tombstone.reason == "source_trim"


async def test_a_chain_replays_deletes_of_its_middle_topic_in_order(tmp_path: Path) -> None:
    """a -> b -> c: b (itself re-derived) deletes one copy c had forwarded and one it had
    not; c comes back exactly as readers saw it (it waits for b's delete: Rule 3)."""
    async with running(tmp_path, crash=True) as (e, _):
        e.put_topic("a", FSYNC)
        await _router(e, "ab", {"source": "a", "dest": "b"})
        await _router(e, "bc", {"source": "b", "dest": "c"})
        await write(e, "a", [f"a{i}" for i in range(6)])
        step(e, "ab", 6)
        step(e, "bc", 3)  # c has a0..a2
        await _del(e, "b", [2, 5])  # a1 (forwarded to c), a4 (not yet)
        await write(e, "a", ["z"])
        settle(e)
        seen = {t: layout(e, t) for t in ("b", "c")}
        assert list(seen["c"].values()) == ["a0", "a1", "a2", "a3", "a5", "z"]
    async with running(tmp_path, crash=True) as (e, _):
        assert {t: layout(e, t) for t in ("b", "c")} == seen


async def test_a_mirror_waits_for_the_delete_of_its_other_side(tmp_path: Path) -> None:
    """a <-> b: b deletes b1 before ba forwarded it. Re-deriving a must not copy b1 while
    b's delete is still waiting for a's own records (removed.py Rule 3)."""
    async with running(tmp_path, crash=True) as (e, st):
        e.put_topic("a", FSYNC)
        e.put_topic("b", FSYNC)
        await _router(e, "ab", {"source": "a", "dest": "b", "allow_cycle": True})
        await _router(e, "ba", {"source": "b", "dest": "a", "allow_cycle": True})
        await st.checkpoint()  # both routers known from the start: b is re-derived first
        await write(e, "b", ["b0", "b1"])
        await write(e, "a", ["a0"])
        step(e, "ab", 10)
        await _del(e, "b", [2])
        settle(e)
        seen = {t: layout(e, t) for t in ("a", "b")}
        assert list(seen["a"].values()) == ["a0", "b0"]
    async with running(tmp_path, crash=True) as (e, _):
        assert {t: layout(e, t) for t in ("a", "b")} == seen


def test_fsck_reports_a_malformed_oc() -> None:
    from topicsrv.storage import codec, frames
    from topicsrv.storage.fsck import _check_body

    def frame(oc: object) -> frames.Frame:
        body = codec.encode_json({"name": "s", "epoch": 1, "selector": {"seqs": [1]}, "bound": 2, "oc": oc})
        return frames.Frame(0, frames.T_DELETE, 0, memoryview(body))

    assert _check_body(frame({"r": [3, 1700000000000]})) is None
    problem = _check_body(frame({"r": "3"}))
    assert problem is not None and "oc" in problem
