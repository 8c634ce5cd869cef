"""Lease queues across restarts (seeds 10.1, 10.6, 10.7) with real storage in-process: jobs
and acks are as durable as the queue, non-durable leases end with the process, durable
leases hold until their deadline, delivery counts and dead-letter moves survive."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import orjson
import pytest

from topicsrv.clock import FakeClock
from topicsrv.engine import Engine
from topicsrv.engine.log.records import prepare_json
from topicsrv.engine.log.segments import SEGMENT_RECORDS
from topicsrv.engine.queues import leases, queues
from topicsrv.engine.queues.queues import Claimer, Job, Move
from topicsrv.storage import frames, segfiles
from topicsrv.storage.walread import wal_files

from .harness import live, running


async def done(token: Any) -> None:
    if token is not None:
        await token.wait()


async def flush(e: Engine, *names: str) -> None:
    """Everything logged for `names` so far is on disk (what a crash keeps)."""
    for name in names:
        await done(e.journal.barrier(e.get(name)))


async def produce(e: Engine, n: int, name: str = "q") -> list[int]:
    res, token = e.write(name, [prepare_json({"data": i}, i) for i in range(n)])
    await done(token)
    seqs: list[int] = res["seqs"]
    return seqs


async def claim(e: Engine, node: str = "w", mx: int = 1, lease_ms: int | None = None,
                finish: bool = True) -> tuple[list[Job], list[Move]]:
    """One claim pass as the fronts make it (tasks/claims.py): the answer waits for the
    token; a dead-letter copy is durable before its job leaves the queue."""
    outs, token, moves = e.claim("q", [Claimer(node, mx, lease_ms)])
    await done(token)
    for m in moves:
        await m.token.wait()
    if finish:
        queues.finish_moves(e, moves)
    return outs[0], moves


def seqs(jobs: list[Job]) -> list[int]:
    return [j.seq for j in jobs]


def qs_of(e: Engine) -> leases.QueueState:
    return leases.state_of(e.get("q"))


def copies(e: Engine, name: str = "dlq") -> list[dict[str, Any]]:
    return [orjson.loads(b)["meta"] for b in e.diff(name, 0).records]


@pytest.mark.parametrize("crash", [True, False])
async def test_a_durable_queue_loses_no_job_and_resurrects_no_acked_job(tmp_path: Path, crash: bool) -> None:
    clock = FakeClock()
    async with running(tmp_path, clock=clock, crash=crash) as (e, _):
        e.put_topic("q", {"type": "queue", "durable": True})
        await produce(e, 30)
        got, _ = await claim(e, mx=10)
        acked = seqs(got)[:6]
        res, token = e.ack("q", "w", acked, [j.lease_id for j in got[:6]])
        assert res["acked"] == acked
        await done(token)
        res, token = e.nack("q", "w", [7], delay_ms=1000)
        assert res["released"] == [7]
        await flush(e, "q")
    async with running(tmp_path, clock=clock) as (e, _):
        remaining = set(range(1, 31)) - set(acked)
        assert set(live(e, "q")) == remaining
        got, _ = await claim(e, "x", 100)
        # in flight before the restart: claimable at once, first; 7 waits for its delay
        assert seqs(got) == [8, 9, 10, *range(11, 31)]
        assert [j.delivery for j in got[:4]] == [2, 2, 2, 1]
        clock.advance(1000)
        got, _ = await claim(e, "x", 100)
        assert [(j.seq, j.delivery) for j in got] == [(7, 2)]


@pytest.mark.parametrize("flushed", [True, False])
async def test_non_durable_leases_end_with_the_process(tmp_path: Path, flushed: bool) -> None:
    clock = FakeClock()
    async with running(tmp_path, clock=clock, crash=True) as (e, _):
        e.put_topic("q", {"type": "queue", "durable": True, "lease_ms": 60_000})
        await produce(e, 3)
        old, _ = await claim(e, mx=2)
        if flushed:
            await flush(e, "q")
    async with running(tmp_path, clock=clock) as (e, _):
        assert e.state("q")["queue"]["in_flight"] == 0 and e.state("q")["queue"]["ready"] == 3
        got, _ = await claim(e, "x", 3)
        assert seqs(got) == [1, 2, 3]
        # the delivery count survives when the claim's events reached the disk
        assert [j.delivery for j in got] == ([2, 2, 1] if flushed else [1, 1, 1])
        res, _ = e.ack("q", "w", [1, 2], [j.lease_id for j in old])
        assert res["acked"] == [] and {s["reason"] for s in res["skipped"]} == {"not_holder"}
        res, _ = e.ack("q", "x", [1], [old[0].lease_id])  # an id of the old process is stale
        assert res["skipped"] == [{"seq": 1, "reason": "stale_lease"}]


@pytest.mark.parametrize("crash", [True, False])
async def test_durable_leases_hold_until_their_deadline(tmp_path: Path, crash: bool) -> None:
    clock = FakeClock()
    async with running(tmp_path, clock=clock, crash=crash) as (e, _):
        e.put_topic("q", {"type": "queue", "durable": True, "leases_durable": True, "lease_ms": 5000})
        await produce(e, 3)
        old, _ = await claim(e, mx=2)  # its token waited for the claim events' fsync
    clock.advance(1000)
    async with running(tmp_path, clock=clock) as (e, _):
        assert e.state("q")["queue"] == {"ready": 1, "in_flight": 2, "delayed": 0, "dead_lettered": 0,
                                         "oldest_ready_age_ms": 1000}
        got, _ = await claim(e, "x", 3)
        assert seqs(got) == [3]
        res, token = e.ack("q", "w", [1], [old[0].lease_id])  # the holder's lease is still good
        assert res["acked"] == [1]
        await done(token)
        clock.advance(4000)  # at the deadline: still held
        assert (await claim(e, "x", 3))[0] == []
        clock.advance(1)
        got, _ = await claim(e, "x", 3)
        assert [(j.seq, j.delivery) for j in got] == [(2, 2)]
        await flush(e, "q")
    async with running(tmp_path, clock=clock) as (e, _):
        assert set(live(e, "q")) == {2, 3}
        assert {s: x.node for s, x in qs_of(e).leases.items()} == {2: "x", 3: "x"}


@pytest.mark.parametrize("leases_durable", [False, True])
async def test_delivery_counts_survive_restarts_up_to_the_dead_letter(tmp_path: Path, leases_durable: bool) -> None:
    clock = FakeClock()
    cfg = {"type": "queue", "durable": True, "max_deliveries": 2, "dead_letter": "dlq",
           "leases_durable": leases_durable, "lease_ms": 10}
    for delivery in (1, 2):
        async with running(tmp_path, clock=clock, crash=True) as (e, _):
            if delivery == 1:
                e.put_topic("q", cfg)
                await produce(e, 1)
            got, _ = await claim(e)
            assert [(j.seq, j.delivery) for j in got] == [(1, delivery)]
            await flush(e, "q")
        clock.advance(11)
    async with running(tmp_path, clock=clock, crash=True) as (e, _):
        assert (await claim(e))[0] == []  # a third delivery is a move
        assert [(m["$dead_letter_seq"], m["$dead_letter_deliveries"]) for m in copies(e)] == [("1", "2")]
        await flush(e, "q")
    async with running(tmp_path, clock=clock) as (e, _):
        assert live(e, "q") == {} and len(copies(e)) == 1
        assert e.state("q")["queue"]["dead_lettered"] == 1


async def _interrupted_move(e: Engine, clock: FakeClock) -> None:
    """Job 1 is copied to the dead-letter topic (durably) but not yet deleted from the queue."""
    await produce(e, 2)
    for _ in range(2):
        assert seqs((await claim(e, lease_ms=10))[0]) == [1]
        clock.advance(11)
    got, moves = await claim(e, finish=False)
    assert seqs(got) == [2] and [m.seq for m in moves] == [1] and qs_of(e).moving
    await flush(e, "q", "dlq")


QCFG = {"type": "queue", "durable": True, "max_deliveries": 2, "dead_letter": "dlq"}


@pytest.mark.parametrize("crash", [True, False])
async def test_an_interrupted_move_whose_copy_exists_is_finished_at_open(tmp_path: Path, crash: bool) -> None:
    clock = FakeClock()
    async with running(tmp_path, clock=clock, crash=crash) as (e, _):
        e.put_topic("q", QCFG)
        await _interrupted_move(e, clock)
    async with running(tmp_path, clock=clock) as (e, _):
        assert set(live(e, "q")) == {2} and not qs_of(e).moving
        assert [m["$dead_letter_seq"] for m in copies(e)] == ["1"]
        assert e.state("q")["queue"]["dead_lettered"] == 1
        got, _ = await claim(e, "x", 5)
        assert [(j.seq, j.delivery) for j in got] == [(2, 2)] and len(copies(e)) == 1


async def test_an_interrupted_move_whose_copy_is_gone_returns_the_job(tmp_path: Path) -> None:
    clock = FakeClock()
    async with running(tmp_path, clock=clock, crash=True) as (e, _):
        e.put_topic("q", QCFG)
        await _interrupted_move(e, clock)
        _, token = e.delete_seqs("dlq", [1])  # as if the copy had not reached the disk
        await done(token)
    async with running(tmp_path, clock=clock) as (e, _):
        assert set(live(e, "q")) == {1, 2} and not qs_of(e).moving
        assert e.state("q")["queue"] == {"ready": 2, "in_flight": 0, "delayed": 0, "dead_lettered": 0,
                                         "oldest_ready_age_ms": 22}
        assert qs_of(e).deliveries == {1: 2, 2: 1}
        got, _ = await claim(e, "x", 5)  # moved again (its delivery count was kept), once
        assert seqs(got) == [2] and set(live(e, "q")) == {2}
        assert [m["$dead_letter_seq"] for m in copies(e)] == ["1"]
        assert e.state("q")["queue"]["dead_lettered"] == 1


async def test_checkpoint_plus_wal_tail_rebuild_the_same_projection(tmp_path: Path) -> None:
    clock = FakeClock()

    def projection(e: Engine) -> dict[str, Any]:
        snap = leases.snapshot(qs_of(e))
        return {k: sorted(v) if isinstance(v, list) else v for k, v in snap.items()}

    async with running(tmp_path, clock=clock, crash=True) as (e, st):
        e.put_topic("q", {"type": "queue", "durable": True, "leases_durable": True, "lease_ms": 100,
                          "max_deliveries": 3, "dead_letter": "dlq"})
        await produce(e, 20)
        a, _ = await claim(e, "a", 6)
        await done(e.ack("q", "a", [1, 2])[1])
        e.nack("q", "a", [3], delay_ms=500)
        e.extend("q", "a", [4], lease_ms=1000)
        await st.checkpoint()  # the projection so far goes into checkpoint.json ...
        clock.advance(101)
        b, _ = await claim(e, "b", 4)  # ... and what follows only into the WAL
        assert seqs(b) == [5, 6, 7, 8]
        await done(e.ack("q", "b", [7])[1])
        e.nack("q", "b", [5, 6], [b[0].lease_id, "stale.1"], delay_ms=50)
        clock.advance(60)
        await claim(e, "c", 2, lease_ms=5000)
        await produce(e, 2)
        await flush(e, "q")
        before, state = projection(e), e.state("q")["queue"]
    async with running(tmp_path, clock=clock) as (e, _):
        assert projection(e) == before
        assert e.state("q")["queue"] == state


async def test_a_memory_class_queue_finishes_an_interrupted_move(tmp_path: Path) -> None:
    """A memory-class queue comes back after readiness (recovery Rule 4): its interrupted
    moves are resolved then, not left pending (the job would be neither claimable nor gone)."""
    clock = FakeClock()
    async with running(tmp_path, clock=clock, crash=True) as (e, _):
        e.put_topic("q", {**QCFG, "durability": "memory"})
        await _interrupted_move(e, clock)
    async with running(tmp_path, clock=clock) as (e, _):
        assert set(live(e, "q")) == {2} and not qs_of(e).moving
        assert [m["$dead_letter_seq"] for m in copies(e)] == ["1"]
        assert e.state("q")["queue"]["ready"] == 1


async def test_an_interrupted_move_into_a_memory_class_dead_letter_topic(tmp_path: Path) -> None:
    """The copy in a memory-class dead-letter topic is only back after readiness: the move is
    judged then, so the job is neither returned nor copied a second time."""
    clock = FakeClock()
    async with running(tmp_path, clock=clock, crash=True) as (e, _):
        e.put_topic("dlq", {"durability": "memory"})
        e.put_topic("q", QCFG)
        await _interrupted_move(e, clock)
    async with running(tmp_path, clock=clock) as (e, _):
        assert set(live(e, "q")) == {2} and not qs_of(e).moving
        got, _ = await claim(e, "x", 5)
        assert [(j.seq, j.delivery) for j in got] == [(2, 2)]
        assert [m["$dead_letter_seq"] for m in copies(e)] == ["1"]
        assert e.state("q")["queue"]["dead_lettered"] == 1


def _wal_frames(path: Path) -> list[tuple[Path, frames.Frame]]:
    """Every frame of every WAL file, in order."""
    out = []
    for _, _, p in wal_files(path / "wal"):
        buf = memoryview(p.read_bytes())
        offset = frames.FILE_HEADER_SIZE
        while isinstance(fr := frames.read_at(buf, offset), frames.Frame):
            out.append((p, fr))
            offset = fr.end
    return out


@pytest.mark.parametrize("torn", [False, True])
async def test_an_ack_is_one_wal_frame_kept_whole_or_not_at_all(tmp_path: Path, torn: bool) -> None:
    """An ack's delete and its acked events are one frame: a crash keeps both (the job is
    gone, its lease too) or, with the frame torn, neither (the job is still live and, with
    durable leases, still leased to its worker); never a deleted job with a live lease."""
    clock = FakeClock()
    async with running(tmp_path, clock=clock, crash=True) as (e, _):
        e.put_topic("q", {"type": "queue", "durable": True, "leases_durable": True})
        await produce(e, 5)
        got, _ = await claim(e, mx=3)
        await flush(e, "q")
        before = len(_wal_frames(tmp_path))
        res, token = e.ack("q", "w", [1, 2], [got[0].lease_id, got[1].lease_id])
        assert res["acked"] == [1, 2]
        await done(token)
        await flush(e, "q")
    written = _wal_frames(tmp_path)[before:]
    assert [fr.ftype for _, fr in written] == [frames.T_LEASES]
    if torn:
        path, fr = written[0]
        os.truncate(path, fr.offset + frames.HEADER_SIZE + len(fr.body) // 2)
    async with running(tmp_path, clock=clock) as (e, _):
        held = leases.state_of(e.get("q")).leases
        if torn:
            assert set(live(e, "q")) == {1, 2, 3, 4, 5} and set(held) == {1, 2, 3}
        else:
            assert set(live(e, "q")) == {3, 4, 5} and set(held) == {3}


async def test_an_ack_flips_the_disk_flag_of_a_sealed_job_and_leaves_wal_jobs_alone(
        tmp_path: Path) -> None:
    """An ack of a job already in a segment file wakes the flag flipper (its slot is
    flipped on disk before any checkpoint); an ack of jobs only in the WAL has nothing to
    flip and does not wake it (no flipper round, a thread hop, per ack)."""
    async with running(tmp_path, crash=True) as (e, st):
        e.put_topic("q", {"type": "queue", "durable": True})
        await produce(e, SEGMENT_RECORDS + 10)
        await st.checkpoint()  # seqs 1 .. 4106 are on disk (the second segment in part)
        await produce(e, 10)  # 4107 .. 4116: in the WAL only
        jobs, _ = await claim(e, mx=SEGMENT_RECORDS + 20)
        st.flip_topics.clear()
        _, token = e.ack("q", "w", [SEGMENT_RECORDS + 15, SEGMENT_RECORDS + 16])
        assert st.flip_topics == {}  # (the flipper runs only once this task awaits)
        await done(token)
        _, token = e.ack("q", "w", [3])
        assert list(st.flip_topics.values()) == [e.get("q")]
        await done(token)
        await st.flip_deleted(e.get("q"))
        data = next((tmp_path / "topics").glob("q@1/*.data"))
    sf = segfiles.load(data, data.with_suffix(".idx"), 1).sf
    raw = data.read_bytes()
    assert raw[sf.offsets[2] + frames.FLAG_OFFSET] == frames.DELETED_FLAG  # seq 3 = slot 2
    assert raw[sf.offsets[3] + frames.FLAG_OFFSET] == 0
    async with running(tmp_path) as (e, _):
        got = live(e, "q")
        assert 3 not in got and SEGMENT_RECORDS + 15 not in got and 4 in got
        assert len(jobs) == SEGMENT_RECORDS + 20
