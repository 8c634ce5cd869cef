"""Large seqs on disk (issue 10, items 2 and 3): nothing overflows a u64, and recovery and
segments cost O(records), never O(seq range)."""

from __future__ import annotations

import http.client
import json
import time
import tracemalloc
from pathlib import Path
from typing import Any

import orjson
import pytest
import redis

from topicsrv.engine.config import SEQ_MAX
from topicsrv.errors import TopicsError
from topicsrv.storage import codec, frames
from topicsrv.storage.images import CHECKPOINT
from topicsrv.storage.walread import wal_files

from .harness import live, running, write

U63 = (1 << 63) - 1
BIG = SEQ_MAX - (1 << 20)  # the crash reservation (<= 1 << 17 seqs) still fits above it


async def test_a_topic_at_the_largest_seq_base_survives_a_crash(tmp_path: Path) -> None:
    """The reproducer of item 2: seq_base 2^63-1 and a 3-record write used to overflow the
    HeadWatermark (orjson: "Integer exceeds 64-bit range") and end the writer task. The
    largest seq_base is now SEQ_MAX (issue 23); a base with room for the reservation after
    a crash keeps what this tests."""
    async with running(tmp_path, crash=True, shards=1) as (e, st):
        e.put_topic("boom", {"seq_base": BIG, "durable": True})
        r = await write(e, "boom", [1, 2, 3])
        assert r["seqs"] == [BIG, BIG + 1, BIG + 2]
        await st.checkpoint()
        r2 = await write(e, "boom", [4])
    async with running(tmp_path, shards=1) as (e, _):
        got = live(e, "boom")
        assert sorted(got) == [*r["seqs"], r2["first_seq"]]
        nxt = await write(e, "boom", [5])
        assert r2["first_seq"] < nxt["first_seq"] <= r2["first_seq"] + (1 << 17)
    ck = orjson.loads((tmp_path / CHECKPOINT).read_bytes())
    assert all(t["ceiling"] <= SEQ_MAX for t in ck["topics"])


async def test_the_last_seq_is_refused_cleanly_and_survives_restarts(tmp_path: Path) -> None:
    async with running(tmp_path, crash=True, shards=1) as (e, st):
        e.put_topic("end", {})
        t = e.get("end")  # two seqs to go: not reachable through config within a test's time
        t.seq_base = t.next_seq = t.front = t._earliest = SEQ_MAX - 1
        r = await write(e, "end", ["a", "b"])
        assert r["last_seq"] == SEQ_MAX
        try:
            await write(e, "end", ["c"])
            raise AssertionError("a write past the last seq was accepted")
        except TopicsError as err:
            assert err.code == "seq_exhausted"
        await st.checkpoint()
    for _ in range(2):  # a crash, then a clean restart
        async with running(tmp_path, shards=1) as (e, _):
            assert sorted(live(e, "end")) == [SEQ_MAX - 1, SEQ_MAX]
            assert e.state("end")["next_seq"] == SEQ_MAX + 1
            try:
                await write(e, "end", ["d"])
                raise AssertionError("a write past the last seq was accepted")
            except TopicsError as err:
                assert err.code == "seq_exhausted"


async def test_a_crash_with_a_huge_seq_base_recovers_fast_in_little_memory(tmp_path: Path) -> None:
    """Item 3: seq_base 1e9, one record, SIGKILL: recovery used to allocate a slot per seq up
    to ~2 x seq_base (3.9 GB)."""
    base = 10**9
    async with running(tmp_path, crash=True, shards=1) as (e, _):
        e.put_topic("sb9", {"seq_base": base})
        r = await write(e, "sb9", [1])
    tracemalloc.start()
    t0 = time.monotonic()
    try:
        async with running(tmp_path, shards=1) as (e, _):
            elapsed = time.monotonic() - t0
            _, peak = tracemalloc.get_traced_memory()
            assert sorted(live(e, "sb9")) == [base]
            nxt = await write(e, "sb9", [2])
            assert base < nxt["first_seq"] <= base + (1 << 17)
            res = e.diff("sb9", 0, 10)
            assert res.seqs[0] == r["first_seq"]
    finally:
        tracemalloc.stop()
    assert peak < 32 << 20, f"recovery peaked at {peak} bytes"
    assert elapsed < 5.0


def _add_ceiling(path: Path, name: str, epoch: int, ceiling: int) -> None:
    with path.open("ab") as f:
        f.write(frames.encode(frames.T_CEIL, codec.encode_json({"name": name, "epoch": epoch, "ceiling": ceiling})))


async def test_a_ceiling_far_above_the_head_costs_no_memory(tmp_path: Path) -> None:
    """Older versions reserved HeadWatermarks at ~2 x seq_base: a data dir they left must
    still recover in O(records), with the reserved range reported `lost` (a Run)."""
    base = 10**9
    async with running(tmp_path, crash=True, shards=1) as (e, _):
        e.put_topic("old", {"seq_base": base})
        await write(e, "old", ["a"])
    wal = [p for _, _, p in wal_files(tmp_path / "wal")][-1]
    _add_ceiling(wal, "old", 1, 2 * base + 5)
    tracemalloc.start()
    try:
        async with running(tmp_path, shards=1) as (e, st):
            _, peak = tracemalloc.get_traced_memory()
            res = e.diff("old", base, 10)
            assert res.tombstone is not None and res.tombstone.reason == "lost"
            assert res.tombstone.gap_to == 2 * base + 5
            nxt = await write(e, "old", ["b"])
            assert nxt["first_seq"] == 2 * base + 6
            await st.checkpoint()  # the gap is persisted as one Run, not a slot per seq
    finally:
        tracemalloc.stop()
    assert peak < 32 << 20
    assert sum(p.stat().st_size for p in (tmp_path / "topics").rglob("*")) < 64 << 10
    async with running(tmp_path, shards=1) as (e, _):
        assert sorted(live(e, "old")) == [base, 2 * base + 6]
        assert e.diff("old", base, 10).tombstone.gap_to == 2 * base + 5  # type: ignore[union-attr]


# ---- a real server (HTTP and RESP) -------------------------------------------------------------


def _http(port: int, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        raw = None if body is None else json.dumps(body).encode()
        conn.request(method, path, body=raw, headers={"Content-Type": "application/json"} if raw else {})
        resp = conn.getresponse()
        return resp.status, json.loads(resp.read() or b"null")
    finally:
        conn.close()


def _peak_rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def test_a_real_server_survives_huge_seq_bases_and_restarts_small(server_factory: Any, tmp_path: Path) -> None:
    data = tmp_path / "seqdata"
    srv = server_factory(data_dir=data)
    p = srv.http_port
    last3 = SEQ_MAX - 2
    status, body = _http(p, "POST", "/v0/topics/boom", {"records": [{"data": 1}, {"data": 2}, {"data": 3}],
                                                          "config": {"seq_base": last3}})
    assert status == 200 and body["seqs"] == [last3, last3 + 1, SEQ_MAX]
    for bad in (U63, U63 + 1):  # issue 23: seqs stay signed 64-bit integers
        status, body = _http(p, "POST", "/v0/topics/over", {"records": [{"data": 1}],
                                                              "config": {"seq_base": bad}})
        assert status == 400 and body["error"]["code"] == "invalid_request"
    r = redis.Redis(port=srv.resp_port)
    assert r.execute_command("TOPIC.CREATE", "rboom", "SEQ_BASE", str(last3))
    ids = [r.xadd("rboom", {"n": str(i)}) for i in range(3)]
    assert [int(i.split(b"-")[1]) for i in ids] == [last3, last3 + 1, SEQ_MAX]
    status, _ = _http(p, "POST", "/v0/topics/sb9", {"records": [{"data": 1}], "config": {"seq_base": 10**9}})
    assert status == 200
    time.sleep(0.05)  # let the writers sync (disk class acknowledges on enqueue)
    assert _http(p, "GET", "/v0/ready")[0] == 200  # still alive
    srv.kill()

    t0 = time.monotonic()
    srv2 = server_factory(data_dir=data)
    took = time.monotonic() - t0
    assert srv2.proc is not None
    rss_mb = _peak_rss_kb(srv2.proc.pid) / 1024
    assert rss_mb < 400, f"restart peaked at {rss_mb:.0f} MB"
    assert took < 20
    status, body = _http(srv2.http_port, "POST", "/v0/topics/sb9/diff", {"from_seq": 0})
    assert status == 200 and [rec["data"] for rec in body["records"]] == [1]
    status, body = _http(srv2.http_port, "POST", "/v0/topics/sb9", {"records": [{"data": 2}]})
    assert status == 200 and 10**9 < body["first_seq"] <= 10**9 + (1 << 17)
    r2 = redis.Redis(port=srv2.resp_port)
    assert r2.xlen("rboom") == 3
    with pytest.raises(redis.ResponseError, match="exhausted"):  # full since before the kill
        r2.xadd("rboom", {"n": "3"})
