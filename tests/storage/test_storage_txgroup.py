"""Commit groups (storage/txgroup.py): the frames of one atomic unit that belong to several
WAL shards come back after a crash all together or not at all.

A crash is simulated the way it happens: a shard's writer stops before some batch, so its WAL
file ends before that batch (everything after it in that shard is gone too). The tests cut a
shard's file just before its copy of the group and check what recovery brings back.
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from topicsrv.engine.keyspace import strings as kstrings
from topicsrv.engine.records import prepare_json
from topicsrv.storage import frames, txgroup
from topicsrv.storage.state import shard_of
from topicsrv.storage.walread import wal_files

from .harness import live, running, write

SHARDS = 4
TOPIC = next(f"t{i}" for i in range(100) if shard_of(f"t{i}", SHARDS) != 0)
OTHER = shard_of(TOPIC, SHARDS)


def _scan(path: Path) -> list[frames.Frame]:
    buf = memoryview(path.read_bytes())
    return [f for f in frames.scan(buf, frames.FILE_HEADER_SIZE) if isinstance(f, frames.Frame)]


def _last_file(d: Path, shard: int) -> Path:
    return [p for _, s, p in wal_files(d / "wal") if s == shard][-1]


def _group_frames(d: Path, shard: int) -> list[frames.Frame]:
    return [f for f in _scan(_last_file(d, shard)) if f.ftype == frames.T_GROUP]


def _cut_before_group(d: Path, shard: int) -> None:
    """The shard's writer stopped just before the batch holding its copy."""
    path = _last_file(d, shard)
    (g,) = [f for f in _scan(path) if f.ftype == frames.T_GROUP]
    raw = path.read_bytes()
    path.write_bytes(raw[:g.offset])


async def _multi(tmp_path: Path) -> None:
    """As EXEC runs MULTI {SET k v, XADD TOPIC ...}: one group, keyspace in shard 0, the
    record in TOPIC's shard; then a write after it in each shard."""
    async with running(tmp_path, crash=True, shards=SHARDS, keyspace_class="fsync") as (e, st):
        e.put_topic(TOPIC, {"durability": "fsync"})
        await write(e, TOPIC, ["before"])
        e.journal.begin_group()
        tokens = [kstrings.put(e.keyspace, [("k", b"v")])]
        tokens.append(e.write(TOPIC, [prepare_json({"data": "in-tx"}, 0)])[1])
        e.journal.end_group()
        for t in tokens:
            if t is not None:
                await t.wait()
        for sh in st.shards:
            await sh.drain()
    # one copy in each owning shard, carrying both frames; no plain frame of either
    for shard in (0, OTHER):
        (g,) = _group_frames(tmp_path, shard)
        _, parts = txgroup.decode(g.body)
        assert sorted((s, t) for s, t, _ in parts) == sorted([(0, frames.T_KEYSPACE), (OTHER, frames.T_APPEND)])
    assert not [f for f in _scan(_last_file(tmp_path, 0)) if f.ftype == frames.T_KEYSPACE]


@pytest.mark.parametrize("cut", [(), (0,), (OTHER,), (0, OTHER)])
async def test_a_group_comes_back_whole_or_not_at_all(tmp_path: Path, cut: tuple[int, ...]) -> None:
    await _multi(tmp_path)
    for shard in cut:
        _cut_before_group(tmp_path, shard)
    async with running(tmp_path, shards=SHARDS, keyspace_class="fsync") as (e, _st):
        got = (e.keyspace.get("k"), {seq: orjson.loads(b)["data"] for seq, b in live(e, TOPIC).items()})
    if len(cut) == 2:  # no copy survived: nothing of the group
        assert got == (None, {1: "before"})
    else:  # any copy survived: all of it, in place (the record keeps its seq)
        assert got == (b"v", {1: "before", 2: "in-tx"})


@pytest.mark.parametrize("cut", [(), (0,), (OTHER,), (0, OTHER)])
async def test_set_over_a_topic_keeps_one_of_the_two_keys(tmp_path: Path, cut: tuple[int, ...]) -> None:
    """SET over a topic deletes it and stores the string: after a crash either the string
    (topic gone) or the topic (string missing), never both keys and never neither."""
    async with running(tmp_path, crash=True, shards=SHARDS, keyspace_class="fsync") as (e, st):
        e.put_topic(TOPIC, {"durability": "fsync"})
        await write(e, TOPIC, ["r"])
        token = kstrings.put(e.keyspace, [(TOPIC, b"now a string")])
        assert token is not None
        await token.wait()
        for sh in st.shards:
            await sh.drain()
    for shard in (0, OTHER):
        (g,) = _group_frames(tmp_path, shard)
        assert sorted(t for _, t, _ in txgroup.decode(g.body)[1]) == [frames.T_DROP, frames.T_KEYSPACE]
    for shard in cut:
        _cut_before_group(tmp_path, shard)
    async with running(tmp_path, shards=SHARDS, keyspace_class="fsync") as (e, _st):
        kind = e.keyspace.kind(TOPIC)
        value = e.keyspace.value(TOPIC) if TOPIC in e.keyspace.strings else None
    assert (kind, value) == (("stream", None) if len(cut) == 2 else ("string", b"now a string"))


def test_splicer_places_a_missing_copy_at_the_end_of_its_shard_generation() -> None:
    body = txgroup.encode(7, [(0, frames.encode(frames.T_KEYSPACE, b"ks")),
                              (2, frames.encode(frames.T_DROP, b"drop"))])
    sp = txgroup.Splicer()
    sp.add(5, 0, frames.T_KEYSPACE, memoryview(b"a"))
    sp.add(5, 0, frames.T_GROUP, memoryview(body))
    sp.add(5, 2, frames.T_APPEND, memoryview(b"x"))  # shard 2 stopped before its copy
    sp.add(6, 1, frames.T_APPEND, memoryview(b"y"))
    got = [(g, t, bytes(b)) for g, t, b in sp.finish(set())]
    assert got == [(5, frames.T_KEYSPACE, b"a"), (5, frames.T_KEYSPACE, b"ks"),
                   (5, frames.T_APPEND, b"x"), (5, frames.T_DROP, b"drop"), (6, frames.T_APPEND, b"y")]
    sp2 = txgroup.Splicer()
    sp2.add(5, 0, frames.T_GROUP, memoryview(body))
    assert [t for _, t, _ in sp2.finish({2})] == [frames.T_KEYSPACE]  # damaged: not spliced
    assert "shard 2" in sp2.notes[0]


def test_group_codec_round_trip_and_malformed_bodies() -> None:
    parts = [(3, frames.encode(frames.T_TOPIC, b'{"a":1}')), (0, frames.encode(frames.T_KEYSPACE, b""))]
    body = txgroup.encode(2**64 - 1, parts)
    gid, got = txgroup.decode(memoryview(body))
    assert gid == 2**64 - 1
    assert [(s, t, bytes(b)) for s, t, b in got] == [(3, frames.T_TOPIC, b'{"a":1}'), (0, frames.T_KEYSPACE, b"")]
    for bad in (body[:-1], body + b"\x00", body[:5]):
        with pytest.raises(ValueError):
            txgroup.decode(memoryview(bad))


async def test_a_group_spanning_turns_is_acknowledged_with_its_own_frame_only(tmp_path: Path) -> None:
    """txgroup.py Rule 7 (a Lua script past busy-reply-threshold): the shards' writers run
    while the group is open and write the batch that was open when a captured write ran; that
    write's token must still wait for the batch holding the group's frame."""
    async with running(tmp_path, shards=SHARDS, keyspace_class="fsync") as (e, st):
        e.put_topic(TOPIC, {"durability": "fsync"})
        before = e.write(TOPIC, [prepare_json({"data": "before"}, 0)])[1]
        e.journal.begin_group(spans_turns=True)
        in_group = [kstrings.put(e.keyspace, [("k", b"v")]),
                    e.write(TOPIC, [prepare_json({"data": "in-group"}, 0)])[1]]
        assert before is not None and all(t is not None for t in in_group)
        await before.wait()  # the writer wrote the batch open when the group's writes ran
        for sh in st.shards:
            await sh.drain()
        assert not any(t.commit.event.is_set() for t in in_group if t is not None)
        assert _group_frames(tmp_path, OTHER) == []
        e.journal.end_group()
        for t in in_group:
            if t is not None:
                await t.wait()
        assert [len(_group_frames(tmp_path, s)) for s in (0, OTHER)] == [1, 1]
