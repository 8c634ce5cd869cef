"""Consumer-group definition frames are proportional to the change (issue 10, item 13):
XGROUP CREATECONSUMER on a group with a large pending list writes a few bytes, and every
definition change still survives a crash."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import redis

from topicsrv.engine import groups
from topicsrv.engine.log.records import prepare_fields
from topicsrv.storage.walread import wal_files

from .harness import running


def _wal_bytes(d: Path) -> int:
    return sum(p.stat().st_size for _, _, p in wal_files(d / "wal"))


async def _durable(token: Any) -> None:
    if token is not None:
        await token.wait()


async def test_definition_changes_replay_over_a_checkpointed_pel(tmp_path: Path) -> None:
    n = 20_000
    async with running(tmp_path, crash=True, shards=1) as (e, st):
        for half in range(2):
            _, token = e.write("s", [prepare_fields([b"i", b"%d" % (half * n // 2 + i)]) for i in range(n // 2)])
            if token is not None:
                await token.wait()
        t = e.get("s")
        for name in ("g", "h", "x"):
            g, token = e.group_create(t, name, 0, 0, None)
            assert g is not None
            await _durable(token)
        g = groups.find(t, "g")
        assert g is not None
        groups.read_new(t, g, "c1", n, e.now())
        assert len(g.pel) == n
        await st.checkpoint()  # the PEL is persisted here (delivery progress: checkpoints only)
        before = _wal_bytes(tmp_path)
        ok, token = e.group_create_consumer(t, g, "c2")
        assert ok
        await _durable(token)
        grew = _wal_bytes(tmp_path) - before
        assert 0 < grew < 512, f"CREATECONSUMER wrote {grew} bytes"
        ok, token = e.group_destroy(t, "x")
        assert ok
        await _durable(token)
        h = groups.find(t, "h")
        assert h is not None
        await _durable(e.group_setid(t, h, 7, 0, 7))
        groups.read_new(t, g, "c3", 5, e.now())  # not logged: re-delivered after a crash
        pending, token = e.group_delete_consumer(t, g, "c3")
        assert pending == 0  # c3's entries came from beyond the cursor
        await _durable(token)
    async with running(tmp_path, shards=1) as (e, _):
        t = e.get("s")
        gs = groups.groups_of(t)
        assert gs is not None and [x.name for x in gs] == ["g", "h"]
        g, h = groups.find(t, "g"), groups.find(t, "h")
        assert g is not None and h is not None
        assert list(g.consumers) == ["c1", "c2"]
        assert len(g.pel) == n and len(g.consumers["c1"].pel) == n
        assert (h.last_seq, h.entries_read) == (7, 7)


def test_createconsumer_with_a_large_pel_writes_a_small_frame(server_factory: Any, tmp_path: Path) -> None:
    data = tmp_path / "gdata"
    srv = server_factory(data_dir=data)
    r = redis.Redis(port=srv.resp_port)
    n = 20_000
    pipe = r.pipeline(transaction=False)
    for i in range(n):
        pipe.xadd("jobs", {"n": str(i)})
    pipe.execute()
    r.xgroup_create("jobs", "workers", id="0")
    got = r.xreadgroup("workers", "w1", {"jobs": ">"}, count=n)
    assert len(got[0][1]) == n
    before = _wal_bytes(data)
    assert r.xgroup_createconsumer("jobs", "workers", "w2") == 1
    assert r.xgroup_createconsumer("jobs", "workers", "w3") == 1
    assert r.xgroup_delconsumer("jobs", "workers", "w3") == 0
    grew = _wal_bytes(data) - before
    assert grew < 2048, f"three XGROUP changes wrote {grew} bytes with {n} entries pending"
    srv.kill()
    srv2 = server_factory(data_dir=data)
    r2 = redis.Redis(port=srv2.resp_port)
    assert [c["name"] for c in r2.xinfo_consumers("jobs", "workers")][-1] == b"w2"
