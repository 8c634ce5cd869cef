"""The keyspace's open frame (storage/wal.py Rule 9, storage/keyspacelog.py Rule 2): the
keyspace operations a WAL batch gathers between two other frames of shard 0 are written as
one T_KEYSPACE frame, in their place among the shard's frames, and replay gives back every
operation in order."""

from __future__ import annotations

from pathlib import Path

from topicsrv.engine.keyspace import strings as kstrings
from topicsrv.storage import frames
from topicsrv.storage.wal import OPEN_BODY_MAX
from topicsrv.storage.walread import wal_files

from .harness import running

FUTURE = 4_102_444_800_000  # 2100-01-01, ms


def _frames(d: Path) -> list[frames.Frame]:
    out: list[frames.Frame] = []
    for _, shard, path in wal_files(d / "wal"):
        if shard == 0:
            buf = memoryview(path.read_bytes())
            out += [f for f in frames.scan(buf, frames.FILE_HEADER_SIZE) if isinstance(f, frames.Frame)]
    return out


async def test_the_operations_of_a_batch_share_a_frame_in_their_place(tmp_path: Path) -> None:
    async with running(tmp_path, crash=True, shards=1, keyspace_class="fsync") as (e, _st):
        ks = e.keyspace
        # one synchronous step: everything below lands in the same batch of shard 0
        kstrings.put(ks, [("a", b"1")])
        kstrings.put(ks, [("b", b"2")])
        kstrings.put(ks, [("a", b"3")])  # a key set twice keeps its last value
        e.put_topic("t", {})  # a topic frame of shard 0 in between closes the open frame
        kstrings.put(ks, [("c", b"4")])
        kstrings.set_deadline(ks, "t", FUTURE, False, False, False, False)
        _, token = kstrings.delete(ks, ["b"])
        assert token is not None
        await token.wait()  # fsync class: the batch is on disk
    kinds = [f.ftype for f in _frames(tmp_path) if f.ftype in (frames.T_KEYSPACE, frames.T_TOPIC)]
    assert kinds == [frames.T_KEYSPACE, frames.T_TOPIC, frames.T_KEYSPACE]
    async with running(tmp_path, shards=1, keyspace_class="fsync") as (e, _st):
        ks = e.keyspace
        assert [ks.get(k) for k in ("a", "b", "c")] == [b"3", None, b"4"]
        assert ks.kind("t") == "stream" and ks.deadline("t") == FUTURE


async def test_a_commit_group_keeps_its_own_frame(tmp_path: Path) -> None:
    """Inside a commit group (MULTI/EXEC) an operation is captured as a frame of its own
    (wal.py Rule 8) and comes back with the group."""
    async with running(tmp_path, crash=True, shards=1, keyspace_class="fsync") as (e, _st):
        ks = e.keyspace
        kstrings.put(ks, [("before", b"1")])
        e.journal.begin_group()
        tokens = [kstrings.put(ks, [("in", b"2")]), kstrings.put(ks, [("in2", b"3")])]
        e.journal.end_group()
        kstrings.put(ks, [("after", b"4")])
        for t in tokens:
            assert t is not None
            await t.wait()
    async with running(tmp_path, shards=1, keyspace_class="fsync") as (e, _st):
        assert [e.keyspace.get(k) for k in ("before", "in", "in2", "after")] == [
            b"1", b"2", b"3", b"4"]


async def test_a_big_value_is_a_frame_of_its_own(tmp_path: Path) -> None:
    """wal.py Rule 9: a body of OPEN_BODY_MAX or more is not gathered (sealing copies a frame
    whole, which for big values would hold a batch's worth of copies at once); the open frame
    before it is closed, so order holds."""
    big = b"x" * OPEN_BODY_MAX
    async with running(tmp_path, crash=True, shards=1, keyspace_class="fsync") as (e, _st):
        ks = e.keyspace
        kstrings.put(ks, [("a", b"1")])
        kstrings.put(ks, [("big", big)])
        kstrings.put(ks, [("b", b"2")])
        token = kstrings.put(ks, [("c", b"3")])
        assert token is not None
        await token.wait()
    sizes = [len(f.body) for f in _frames(tmp_path) if f.ftype == frames.T_KEYSPACE]
    assert len(sizes) == 3 and sizes[1] > OPEN_BODY_MAX > sizes[0] and sizes[2] < OPEN_BODY_MAX
    async with running(tmp_path, shards=1, keyspace_class="fsync") as (e, _st):
        assert [e.keyspace.get(k) for k in ("a", "big", "b", "c")] == [b"1", big, b"2", b"3"]
