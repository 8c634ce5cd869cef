"""One WAL write per source append, however many routers read it (routerlog.py Rule 1):
the WAL files are read back and their frames counted."""

from __future__ import annotations

from pathlib import Path

from topicsrv.storage import frames

from .harness import running, write
from .routerkit import layout, settle, wal_frames


async def _run(path: Path, dests: int, durability: str) -> tuple[list[tuple[int, int]], int]:
    """The WAL frames the writes of a source add (with `dests` routers forwarding them all),
    and how many copies the dests got."""
    async with running(path, checkpoint_interval_s=3600) as (e, st):
        e.put_topic("src", {"durability": durability})
        for i in range(dests):
            _, _, token = e.router_put(f"r{i}", {"source": "src", "dest": f"d{i}"})
            if token is not None:
                await token.wait()
        await st.checkpoint()  # a fresh WAL generation: only what follows is counted
        before = len(wal_frames(path))
        for i in range(40):
            await write(e, "src", [{"i": i, "j": j, "pad": "x" * (i % 7)} for j in range(1 + i % 5)])
            settle(e, limit=7)  # forwarding interleaves with the writes
        barrier = st.barrier(e.get("src"))
        if barrier is not None:
            await barrier.wait()
        for sh in st.shards:
            await sh.drain()
        settle(e)  # a disk-class record is forwarded once durable (routerfwd Rule 7)
        got = wal_frames(path)[before:]
        copies = sum(len(layout(e, f"d{i}")) for i in range(dests))
    return got, copies


async def test_a_source_with_four_dests_writes_the_wal_of_a_source_with_none(tmp_path: Path) -> None:
    for durability in ("fsync", "disk"):
        plain, none = await _run(tmp_path / f"plain-{durability}", 0, durability)
        routed, copies = await _run(tmp_path / f"routed-{durability}", 4, durability)
        records = sum(1 + i % 5 for i in range(40))
        assert none == 0 and copies == 4 * records  # every record reached every dest
        assert len(routed) == len(plain)  # frames
        assert sum(n for _, n in routed) == sum(n for _, n in plain)  # bytes
        assert sorted(routed) == sorted(plain)
        assert sum(1 for t, _ in plain if t == frames.T_APPEND) == 40
        assert not any(t in (frames.T_APPEND_RC, frames.T_ROUTER) for t, _ in routed)
