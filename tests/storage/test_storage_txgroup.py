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
import trio
import trio.testing

from topicsrv.engine.keyspace import strings as kstrings
from topicsrv.engine.log.records import prepare_json
from topicsrv.errors import TopicsError
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
    return [f for f in _scan(_last_file(d, shard)) if f.ftype == frames.T_GROUP_CHUNK]


def _cut_before_group(d: Path, shard: int) -> None:
    """The shard's writer stopped just before the batch holding its copy."""
    path = _last_file(d, shard)
    g = [f for f in _scan(path) if f.ftype == frames.T_GROUP_CHUNK][0]
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
        parts = txgroup.parts_of(g.ftype, g.body)
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
        assert sorted(t for _, t, _ in txgroup.parts_of(g.ftype, g.body)) == [frames.T_DROP, frames.T_KEYSPACE]
    for shard in cut:
        _cut_before_group(tmp_path, shard)
    async with running(tmp_path, shards=SHARDS, keyspace_class="fsync") as (e, _st):
        kind = e.keyspace.kind(TOPIC)
        value = e.keyspace.value(TOPIC) if TOPIC in e.keyspace.strings else None
    assert (kind, value) == (("stream", None) if len(cut) == 2 else ("string", b"now a string"))


# A T_GROUP frame's body exactly as versions before T_GROUP_CHUNK wrote it (group 7: shard 0's
# KEYSPACE b"ks", shard 2's DROP b"drop"); such frames stay in a WAL until its next checkpoint.
V1_BODY = bytes.fromhex("07000000000000000200000013020000006b730200020400000064726f70")


def _chunk_body(gid: int, parts: list[tuple[int, bytes]]) -> memoryview:
    """The body of the one T_GROUP_CHUNK frame a small group's copy is (txgroup.py Rule 8)."""
    captured: list[txgroup.Captured] = [(s, f[4], f, None) for s, f in parts]
    (chunk,) = txgroup.encode_chunks(gid, captured)
    return memoryview(chunk)[frames.HEADER_SIZE:]


@pytest.mark.parametrize("ftype", [frames.T_GROUP, frames.T_GROUP_CHUNK])
def test_splicer_places_a_missing_copy_at_the_end_of_its_shard_generation(ftype: int) -> None:
    body = memoryview(V1_BODY) if ftype == frames.T_GROUP else _chunk_body(
        7, [(0, frames.encode(frames.T_KEYSPACE, b"ks")), (2, frames.encode(frames.T_DROP, b"drop"))])
    sp = txgroup.Splicer()
    sp.add(5, 0, frames.T_KEYSPACE, memoryview(b"a"))
    sp.add(5, 0, ftype, body)
    sp.add(5, 2, frames.T_APPEND, memoryview(b"x"))  # shard 2 stopped before its copy
    sp.add(6, 1, frames.T_APPEND, memoryview(b"y"))
    got = [(g, t, bytes(b)) for g, t, b in sp.finish(set())]
    assert got == [(5, frames.T_KEYSPACE, b"a"), (5, frames.T_KEYSPACE, b"ks"),
                   (5, frames.T_APPEND, b"x"), (5, frames.T_DROP, b"drop"), (6, frames.T_APPEND, b"y")]
    sp2 = txgroup.Splicer()
    sp2.add(5, 0, ftype, body)
    assert [t for _, t, _ in sp2.finish({2})] == [frames.T_KEYSPACE]  # damaged: not spliced
    assert "shard 2" in sp2.notes[0]


def test_group_codecs_round_trip_and_refuse_malformed_bodies() -> None:
    want = [(3, frames.T_TOPIC, b'{"a":1}'), (0, frames.T_KEYSPACE, b"")]
    body = _chunk_body(2**64 - 1, [(s, frames.encode(t, b)) for s, t, b in want])
    gid, index, count, got = txgroup.decode_chunk(body)
    assert (gid, index, count) == (2**64 - 1, 0, 1)
    assert [(s, t, bytes(b)) for s, t, b in got] == want
    assert [(s, t, bytes(b)) for s, t, b in txgroup.parts_of(frames.T_GROUP, memoryview(V1_BODY))] == \
        [(0, frames.T_KEYSPACE, b"ks"), (2, frames.T_DROP, b"drop")]
    for bad in (bytes(body)[:-1], bytes(body)[:5], bytes(body)[:8] + b"\x01\0\0\0\x01\0\0\0"):
        with pytest.raises(ValueError):
            txgroup.decode_chunk(memoryview(bad))
    for bad in (V1_BODY[:-1], V1_BODY + b"\x00", V1_BODY[:5]):
        with pytest.raises(ValueError):
            txgroup.decode(memoryview(bad))


def test_a_group_has_no_frame_count_limit_and_a_copy_counts_only_whole(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Rule 8 (issue 34): 70,000 frames (past the 16 bits T_GROUP counted them in) in copies of
    several chunks; a copy cut after some of its chunks (a torn tail) is a missing copy."""
    monkeypatch.setattr(txgroup, "CHUNK_BYTES", 64 << 10)
    n = 70_000
    g = txgroup.Group()
    for i in range(n):
        shard = 0 if i % 2 else 2
        ftype = frames.T_KEYSPACE if shard == 0 else frames.T_APPEND
        g.add(shard, frames.encode(ftype, str(i).encode()), None)
    chunks = txgroup.encode_chunks(99, g.parts)
    assert len(chunks) > 10
    bodies = [memoryview(c)[frames.HEADER_SIZE:] for c in chunks]
    assert [txgroup.decode_chunk(b)[1:3] for b in bodies] == [(i, len(chunks)) for i in range(len(chunks))]

    def replay(copy0: int, copy2: int) -> list[tuple[int, bytes]]:
        """Shard 0 kept the first `copy0` chunks of its copy, shard 2 `copy2`."""
        sp = txgroup.Splicer()
        for shard, kept in ((0, copy0), (2, copy2)):
            for b in bodies[:kept]:
                sp.add(1, shard, frames.T_GROUP_CHUNK, b)
        return [(t, bytes(b)) for _, t, b in sp.finish(set())]

    whole = [(frames.T_KEYSPACE, str(i).encode()) for i in range(1, n, 2)] + \
        [(frames.T_APPEND, str(i).encode()) for i in range(0, n, 2)]
    assert replay(len(chunks), len(chunks)) == whole
    assert replay(len(chunks), len(chunks) - 1) == whole  # shard 2's copy torn: spliced
    assert replay(3, len(chunks)) == whole
    assert replay(len(chunks) - 1, 3) == []  # no whole copy: nothing of the group
    sp = txgroup.Splicer()
    sp.add(1, 0, frames.T_GROUP_CHUNK, bodies[0])
    with pytest.raises(ValueError, match="chunk 2 of"):  # a chunk after a gap
        sp.add(1, 0, frames.T_GROUP_CHUNK, bodies[2])


def test_keyspace_bodies_in_a_group_share_frames() -> None:
    """Rule 9: a million SETs are not a million frames of the group."""
    g = txgroup.Group()
    for i in range(100_000):
        g.add_body(0, frames.T_KEYSPACE, b"s%08d" % i)
    g.add(2, frames.encode(frames.T_APPEND, b"x"), None)
    g.add_body(0, frames.T_KEYSPACE, b"after")
    sizes = [txgroup._body_size(p[2]) for p in g.parts]
    assert len(g.parts) == 6 and max(sizes) <= txgroup.BODIES_MAX + 9
    assert [p[1] for p in g.parts] == [frames.T_KEYSPACE] * 4 + [frames.T_APPEND, frames.T_KEYSPACE]
    sp = txgroup.Splicer()
    for c in txgroup.encode_chunks(1, g.parts):
        sp.add(1, 0, frames.T_GROUP_CHUNK, memoryview(c)[frames.HEADER_SIZE:])
    assert b"".join(bytes(b) for _, t, b in sp.finish(set()) if t == frames.T_KEYSPACE) == \
        b"".join(b"s%08d" % i for i in range(100_000)) + b"after"


async def test_70000_strings_in_one_group_come_back_after_a_crash(tmp_path: Path) -> None:
    """Issue 34: a group of more than 65,535 writes is journaled, and replayed whole."""
    async with running(tmp_path, crash=True, shards=SHARDS, keyspace_class="fsync") as (e, st):
        e.put_topic(TOPIC, {"durability": "fsync"})
        e.journal.begin_group()
        tokens = [kstrings.put(e.keyspace, [(f"k:{i}", b"%d" % i)]) for i in range(70_000)]
        tokens.append(e.write(TOPIC, [prepare_json({"data": "in-tx"}, 0)])[1])
        e.journal.end_group()
        for t in {id(t): t for t in tokens if t is not None}.values():
            await t.wait()
        for sh in st.shards:
            await sh.drain()
    _cut_before_group(tmp_path, OTHER)
    async with running(tmp_path, shards=SHARDS, keyspace_class="fsync") as (e, _st):
        assert len(e.keyspace.strings) == 70_000
        assert e.keyspace.value("k:69999") == b"69999"
        assert [orjson.loads(b)["data"] for b in live(e, TOPIC).values()] == ["in-tx"]


async def test_a_group_that_cannot_be_journaled_stops_the_process(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Rule 10: its writes are in memory already; the process must stop before anyone reads
    them (os._exit, faked here), and nothing of the group reaches the WAL."""
    class Exited(Exception):
        pass

    def fake_exit(code: int) -> None:
        raise Exited(code)

    def broken(gid: int, parts: list[txgroup.Captured]) -> list[bytes]:
        raise MemoryError

    monkeypatch.setattr(txgroup.os, "_exit", fake_exit)
    monkeypatch.setattr(txgroup.logging, "shutdown", lambda: None)
    monkeypatch.setattr(txgroup, "encode_chunks", broken)
    async with running(tmp_path, crash=True, shards=SHARDS, keyspace_class="fsync") as (e, st):
        e.put_topic(TOPIC, {"durability": "fsync"})
        e.journal.begin_group()
        kstrings.put(e.keyspace, [("k", b"v")])
        e.write(TOPIC, [prepare_json({"data": "in-tx"}, 0)])
        with pytest.raises(Exited, match="70"):
            e.journal.end_group()
        for sh in st.shards:
            await sh.drain()
        assert _group_frames(tmp_path, 0) == _group_frames(tmp_path, OTHER) == []


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


async def test_a_group_told_late_that_it_spans_turns_holds_its_earlier_writes_too(
        tmp_path: Path) -> None:
    """Rule 7, `span_turns` (a script that goes past busy-reply-threshold after it wrote): the
    writes captured before it hold their shards' open batches, which the writers may write
    before the group; the tokens span_turns returns (one per shard the group owns so far)
    and the later writes' own tokens are released only with the group's copies."""
    async with running(tmp_path, shards=SHARDS, keyspace_class="fsync") as (e, st):
        e.put_topic(TOPIC, {"durability": "fsync"})
        kstrings.put(e.keyspace, [("before", b"v")])  # shard 0's open batch has a frame
        e.journal.begin_group()
        early = kstrings.put(e.keyspace, [("k", b"v")])  # given shard 0's open batch
        held = e.journal.span_turns()
        assert len(held) == 1  # shard 0 only: the group owns nothing else yet
        late = e.write(TOPIC, [prepare_json({"data": "in-group"}, 0)])[1]
        assert early is not None and late is not None
        await early.wait()  # the batch open at the first write went out without the group
        for sh in st.shards:
            await sh.drain()
        assert not any(t.commit.event.is_set() for t in [*held, late])
        assert _group_frames(tmp_path, 0) == _group_frames(tmp_path, OTHER) == []
        e.journal.end_group()
        for t in [*held, late]:
            await t.wait()
        assert [len(_group_frames(tmp_path, s)) for s in (0, OTHER)] == [1, 1]
        assert e.journal.span_turns() == []  # no group open


async def test_a_checkpoint_waits_while_a_group_spans_turns(tmp_path: Path) -> None:
    """Rule 12: a checkpoint snapshots memory; with a script's group open it would keep part
    of the script (its first SET) past a crash that loses the rest."""
    async with running(tmp_path, crash=True, shards=SHARDS, keyspace_class="fsync") as (e, st):
        before = st.checkpoints
        e.journal.begin_group(spans_turns=True)
        kstrings.put(e.keyspace, [("k", b"v")])
        async with trio.open_nursery() as nursery:
            nursery.start_soon(st.checkpoint)
            await trio.testing.wait_all_tasks_blocked()
            assert st.checkpoints == before  # waiting for the group
            e.journal.end_group()
        assert st.checkpoints == before + 1


async def test_a_discarded_group_leaves_nothing_and_the_journal_refuses_writes(tmp_path: Path) -> None:
    """Rule 11 (the server stops under a running script): the group is never written, its
    own commits fail, every later mutation is refused, no checkpoint is written, and after
    the restart only what came before the group is back."""
    async with running(tmp_path, shards=SHARDS, keyspace_class="fsync") as (e, st):
        token = kstrings.put(e.keyspace, [("before", b"1")])
        assert token is not None
        await token.wait()
        e.journal.begin_group(spans_turns=True)
        in_group = kstrings.put(e.keyspace, [("k", b"v")])
        assert in_group is not None
        assert st.discard_group() is True and st.discard_group() is False
        with pytest.raises(TopicsError, match="none of its writes were kept"):
            await in_group.wait()
        with pytest.raises(TopicsError, match="shutting down"):
            kstrings.put(e.keyspace, [("later", b"1")])
        with pytest.raises(OSError, match="discarded"):
            await st.checkpoint()
        checkpoints = st.checkpoints
    assert st.checkpoints == checkpoints  # close() wrote no final checkpoint
    async with running(tmp_path, shards=SHARDS, keyspace_class="fsync") as (e, _st):
        assert sorted(e.keyspace.strings) == ["before"]
