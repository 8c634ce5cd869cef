"""XDELEX / XACKDEL deletes are XDEL's journaled deletes: they survive a crash (WAL replay);
an ACKED trim's front survives a restart like any trim's."""

from __future__ import annotations

from pathlib import Path

from topicsrv.engine import groups
from topicsrv.engine.groups import grouprefs
from topicsrv.engine.log.records import prepare_fields

from .harness import live, running


async def test_ref_deletes_survive_a_crash(tmp_path: Path) -> None:
    async with running(tmp_path, crash=True, shards=1) as (e, _st):
        _, token = e.write("s", [prepare_fields([b"i", b"%d" % i]) for i in range(6)])
        assert token is not None
        await token.wait()
        t = e.get("s")
        g, token = e.group_create(t, "g", 0, 0, None)
        assert g is not None and token is not None
        await token.wait()
        groups.read_new(t, g, "c", 3, e.now())
        codes, token = e.delete_refs("s", [1, 5], grouprefs.KEEPREF)
        assert codes == [1, 1] and token is not None
        await token.wait()
        codes, token = e.delete_refs("s", [2, 4], grouprefs.ACKED, g)
        assert codes == [1, 2] and token is not None  # 4: g has not read it
        await token.wait()
    async with running(tmp_path, shards=1) as (e, _st):  # deletes: gated, survive a crash
        assert sorted(live(e, "s")) == [3, 4, 6]
        t = e.get("s")
        g = groups.find(t, "g")
        assert g is not None
        groups.setid(g, 0, 0, None)  # (delivery progress is kept at checkpoints only)
        groups.read_new(t, g, "c", 2, e.now())
        groups.ack(g, [3, 4])
        floor = grouprefs.acked_floor(t)
        assert floor == 5  # g has read up to 4 and acked all of it
        removed, _ = e.trim("s", minid_seq=floor)  # XTRIM MINID ... ACKED
        assert removed == 2
    async with running(tmp_path, shards=1) as (e, _st):  # a clean restart keeps the trim
        assert sorted(live(e, "s")) == [6]
        assert e.get("s").front == 5
