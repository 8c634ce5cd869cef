"""Sealed segments (segments Rules 5-6, engine/log/columns.py, engine/log/blobs.py): a full segment is
packed, reads and deletes behave exactly as on an unsealed one."""

from __future__ import annotations

from array import array
from collections.abc import Sequence

import orjson

from topicsrv.clock import FakeClock
from topicsrv.engine import Engine, restore
from topicsrv.engine.log.blobs import Blobs, joined, nbytes, pieces
from topicsrv.engine.log.columns import Const, Deltas, Packed, Tails, pack
from topicsrv.engine.log.reads import FMT_RESP, read, scan_blobs, scan_range
from topicsrv.engine.log.records import prepare_fields, prepare_json
from topicsrv.engine.log.segments import DELETED, LIVE, LOST, SEGMENT_RECORDS, Run, Segment

N = SEGMENT_RECORDS


def fields(i: int) -> bytes:
    return b"v%d" % i


def filled(n: int = N, base: int = N, size: int | None = None) -> tuple[Segment, list[bytes]]:
    """A segment of n entry blobs (value sizes vary unless `size` is given)."""
    seg = Segment(base)
    blobs = []
    for i in range(n):
        value = b"x" * size if size is not None else fields(i)
        rec = prepare_fields([b"f", value])
        blob = rec.encode(base + i, 1_700_000_000_000 + i // 7)
        seg.append(blob, 1_700_000_000_000 + i // 7, rec.size, None, None)
        blobs.append(blob)
    return seg, blobs


def write_entries(eng: Engine, name: str, n: int, start: int = 0) -> None:
    recs = [prepare_fields([b"f", fields(start + i)]) for i in range(n)]
    for k in range(0, n, 1000):
        eng.write(name, recs[k:k + 1000])


def values(blobs: Sequence[bytes]) -> list[bytes]:
    return [b.rsplit(b"\r\n", 2)[-2] for b in blobs]


# ---- the segment itself ------------------------------------------------------------------


def test_seal_keeps_every_slot_and_narrows_the_columns() -> None:
    seg, blobs = filled()
    ts, sizes, flags = list(seg.ts), list(seg.sizes), bytes(seg.flags)
    seg.seal()
    assert seg.sealed and isinstance(seg.blobs, Packed) and isinstance(seg.ts, Deltas)
    assert seg.ts.d.typecode == "H"  # 4096 / 7 ms fits 16 bits
    assert seg.sizes.typecode == "B"  # type: ignore[union-attr]
    assert len(seg) == N and seg.full and seg.next_seq == 2 * N
    assert [seg.blobs[i] for i in range(N)] == blobs
    assert seg.blobs[10:20] == blobs[10:20] and seg.blobs[-1] == blobs[-1]
    assert list(seg.ts) == ts and [seg.ts[i] for i in (0, 99, N - 1)] == [ts[0], ts[99], ts[-1]]
    assert list(seg.sizes) == sizes and bytes(seg.flags) == flags
    assert seg.live_in(0, N) == (N, sum(sizes))
    seg.seal()  # a no-op once sealed
    assert seg.blobs[5] == blobs[5]


def test_equal_sizes_become_one_constant() -> None:
    seg, _ = filled(size=100)
    seg.seal()
    assert isinstance(seg.sizes, Const) and seg.sizes.value == 101
    assert seg.live_in(3, 13) == (10, 1010)


def test_a_run_of_slots_is_one_slice_of_the_buffer() -> None:
    seg, blobs = filled()
    seg.seal()
    packed = seg.blobs
    assert isinstance(packed, Packed)
    assert packed.joined(100, 200) == b"".join(blobs[100:200])
    assert packed.fit(100, 200, 10**9) == (100, len(b"".join(blobs[100:200])))
    room = len(b"".join(blobs[100:150])) + 5
    assert packed.fit(100, 200, room) == (50, room - 5)
    assert packed.fit(100, 200, 3) == (0, 0)


def test_json_blobs_are_comma_separated_in_the_buffer() -> None:
    recs = [prepare_json({"data": i}) for i in range(5)]
    blobs = [r.encode(i, 7) for i, r in enumerate(recs)]
    packed = pack(blobs, b",")
    assert [packed[i] for i in range(5)] == blobs
    assert packed.joined(1, 4) == b",".join(blobs[1:4])
    assert packed.fit(0, 5, len(b"".join(blobs[:2]))) == (2, len(b"".join(blobs[:2])))


def test_kill_on_a_sealed_segment_flags_then_repacks_past_half() -> None:
    seg, blobs = filled(size=100)
    seg.seal()
    packed = seg.blobs
    assert isinstance(packed, Packed)
    full = len(packed.buf)
    assert seg.kill(0, 10, DELETED) == (10, 1010)
    assert seg.blobs is packed and packed.dead > 0  # flags only: no O(segment) work
    assert seg.live == N - 10 and seg.flags.count(DELETED) == 10
    for k in range(10, N // 2 + 1):  # one by one, like XDEL
        seg.kill(k, k + 1, DELETED)
    assert seg.blobs is not packed  # more than half dead: repacked
    now = seg.blobs
    assert isinstance(now, Packed) and len(now.buf) < full // 2 and now.dead == 0
    assert all(now[k] is None for k in range(N // 2 + 1))
    assert [now[k] for k in range(N // 2 + 1, N)] == blobs[N // 2 + 1:]
    assert seg.live_in(0, N) == (N - N // 2 - 1, (N - N // 2 - 1) * 101)
    seg.kill(0, N, DELETED)  # nothing live left: the buffer goes at once
    assert seg.live == 0 and isinstance(seg.blobs, Packed) and seg.blobs.buf == b""
    assert len(seg) == N


def test_repack_keeps_scattered_live_slots() -> None:
    seg, blobs = filled(200, base=0)
    seg.append_lost(N - 200, 5)  # the rest of the range: LOST, no payload
    seg.seal()
    for k in range(0, 200, 3):
        seg.kill(k, k + 1, DELETED)
    seg.repack()
    for k in range(200):
        assert seg.blobs[k] == (None if k % 3 == 0 else blobs[k])
    assert seg.blobs[300] is None and seg.next_visible(200) == 200 and seg.lost_end(200) == N


def test_find_semantics_across_the_flags_of_a_sealed_segment() -> None:
    seg, _ = filled(10, base=0)
    seg.append_lost(3, 9)
    seg.append(prepare_fields([b"f", b"z"]).encode(13, 9), 9, 2, None, None)
    seg.append_lost(N - 14, 9)
    seg.seal()
    seg.kill(2, 10, DELETED)
    assert seg.next_visible(2) == 10 and seg.flags[10] == LOST
    assert seg.lost_end(10) == 13 and seg.next_visible(13) == 13 and seg.has_gap()
    assert seg.flags[13] == LIVE and seg.blobs[13] is not None


def test_deltas_fall_back_to_the_minimum_when_ts_go_down() -> None:
    values = [1_700_000_000_300, 1_700_000_000_100, 1 << 40, 1_700_000_000_500]
    d = Deltas(array("Q", values))
    assert list(d) == values and d[1:3] == values[1:3]


# ---- reads through Topic ---------------------------------------------------------------


def test_reads_across_sealed_segments_match_the_written_records(eng: Engine) -> None:
    eng.put_topic("t", {})
    write_entries(eng, "t", 3 * N + 50)
    topic = eng.get("t")
    assert [s.sealed for s in topic.segs] == [True, True, True, False]  # type: ignore[union-attr]
    res = read(topic, N - 30, 100, eng.now(), fmt=FMT_RESP)
    assert values(res.records) == [fields(i) for i in range(N - 30, N + 70)]
    assert len(res.records) == 100 and res.seqs == list(range(N - 29, N + 71))
    assert isinstance(res.records, Blobs) and len(res.records.parts) == 2  # one slice per segment
    assert joined(res.records) == b"".join(list(res.records))
    assert nbytes(res.records) == sum(map(len, list(res.records)))
    seqs, blobs = scan_blobs(topic, 2 * N - 5, 3 * N + 49, 0, eng.now())
    assert seqs == list(range(2 * N - 5, 3 * N + 50)) and len(blobs) == N + 55
    assert values(blobs) == [fields(i - 1) for i in seqs]
    rev = scan_range(topic, 1, 3 * N + 50, 5, eng.now(), reverse=True)
    assert [s for s, _ in rev] == list(range(3 * N + 50, 3 * N + 45, -1))
    across = [(q, topic.record_at(q)[0]) for q in (N - 1, N, N + 1)]  # type: ignore[index]
    assert scan_range(topic, N - 1, N + 1, 0, eng.now()) == across


def test_deleted_records_in_a_sealed_segment_are_skipped(eng: Engine) -> None:
    eng.put_topic("t", {})
    write_entries(eng, "t", 2 * N)
    eng.delete_seqs("t", list(range(10, 20)) + [N - 1, N])
    res = read(eng.get("t"), 0, 30, eng.now(), fmt=FMT_RESP)
    assert res.seqs == list(range(1, 10)) + list(range(20, 41))
    assert values(res.records) == [fields(s - 1) for s in res.seqs]
    res = read(eng.get("t"), N - 3, 5, eng.now(), fmt=FMT_RESP)
    assert res.seqs == [N - 2, N + 1, N + 2, N + 3, N + 4]  # seqs N-1 and N deleted


def test_json_reads_of_sealed_segments_join_with_commas(eng: Engine) -> None:
    eng.put_topic("j", {})
    recs = [prepare_json({"data": i}) for i in range(1000)]
    for _ in range(5):
        eng.write("j", recs)
    res = eng.diff("j", N - 10, 50, max_bytes=16 << 20)
    body = b"[" + b",".join(pieces(res.records, b",")) + b"]"
    assert [r["$seq"] for r in orjson.loads(body)] == list(range(N - 9, N + 41))
    assert body == b"[" + b",".join(list(res.records)) + b"]"


def test_max_bytes_cuts_a_packed_run_where_the_cap_is_reached(eng: Engine) -> None:
    eng.put_topic("j", {})
    recs = [prepare_json({"data": "x" * 10}) for _ in range(1000)]
    for _ in range(5):
        eng.write("j", recs)
    every = list(eng.diff("j", N - 100, 1000).records)
    room = sum(map(len, every[:130]))  # 100 of the sealed segment, 30 of the next
    res = eng.diff("j", N - 100, 1000, max_bytes=room + 3)
    assert list(res.records) == every[:130] and res.next_from_seq == N + 30
    assert nbytes(res.records) == room
    res = eng.diff("j", 0, 1000, max_bytes=1)  # at least one record
    assert len(res.records) == 1 and res.records[0] == eng.diff("j", 0, 1).records[0]


def test_a_read_result_outlives_a_repack_of_its_segment(eng: Engine) -> None:
    eng.put_topic("t", {})
    write_entries(eng, "t", N + 10)
    res = read(eng.get("t"), 0, 100, eng.now(), fmt=FMT_RESP)
    eng.delete_records("t", N - 10, None)  # kills most of segment 0: repacked
    assert values(res.records) == [fields(i) for i in range(100)]


def test_ttl_and_time_lookups_on_sealed_segments() -> None:
    clock = FakeClock()
    eng = Engine(clock=clock)
    eng.put_topic("t", {"ttl_ms": 10_000})
    for _ in range(3):
        write_entries(eng, "t", N)
        clock.advance(3000)
    topic = eng.get("t")
    t0 = topic.ts_of(1)
    assert topic.seq_at_ts(t0 + 3000) == N + 1 and topic.ts_of(N + 1) == t0 + 3000
    clock.advance(1500)  # the first batch (seqs 1..N) is older than the TTL now
    assert read(topic, 0, 1, eng.now(), fmt=FMT_RESP).tombstone is not None
    assert topic.front == N + 1 and topic.earliest_seq == N + 1


def test_a_run_next_to_a_sealed_segment() -> None:
    eng = Engine(clock=FakeClock())
    topic, _, _ = eng.put_topic("r", {})
    recs = [prepare_fields([b"f", fields(i)]) for i in range(5)]
    for i, rec in enumerate(recs):
        restore.put_slot(topic, N - 5 + i, 100 + i, rec.encode(N - 5 + i, 100 + i), rec.size, None, None)
    restore.fill_lost(topic, 10 * N, 200, DELETED)  # seqs [N, 10N): one Run
    rec = prepare_fields([b"f", b"after"])
    restore.put_slot(topic, 10 * N, 300, rec.encode(10 * N, 300), rec.size, None, None)
    first, run, last = topic.segs
    assert isinstance(first, Segment) and first.sealed and isinstance(run, Run) and not last.sealed  # type: ignore[union-attr]
    res = read(topic, 0, 100, 1000, fmt=FMT_RESP)
    assert res.seqs == [N - 5 + i for i in range(5)] + [10 * N]
    assert values(res.records) == [fields(i) for i in range(5)] + [b"after"]
    assert restore.mark_lost(topic, N - 2, 1) == 1 and first.flags[N - 2 - first.base] == LOST


# ---- bare segments (segments Rule 7, Topic Rule 8) --------------------------------------


def test_to_bare_strips_the_ids_and_to_whole_puts_them_back() -> None:
    seg, blobs = filled()
    seg.seal()
    whole = len(seg.blobs.buf)  # type: ignore[union-attr]
    seg.to_bare()
    assert seg.bare and isinstance(seg.blobs, Tails)
    assert len(seg.blobs.buf) == whole - N * len(b"*2\r\n$19\r\n1700000000000-4096\r\n")
    assert [seg.blobs[k] for k in (0, 1, N - 1, -1)] == [blobs[0], blobs[1], blobs[-1], blobs[-1]]
    assert seg.blobs[100:200] == blobs[100:200] and list(seg.blobs) == blobs
    seg.to_whole()
    assert not seg.bare and isinstance(seg.blobs, Packed) and seg.blobs[:] == blobs


def test_a_bare_segment_drops_dead_slots_and_kills_like_any_other() -> None:
    seg, blobs = filled()
    seg.seal()
    seg.kill(5, 10, DELETED)
    seg.to_bare()
    assert all(seg.blobs[k] is None for k in range(5, 10)) and seg.blobs[10] == blobs[10]
    seg.kill(10, N // 2 + 100, DELETED)  # past half: repacked, still bare
    assert seg.bare and seg.blobs.dead == 0  # type: ignore[union-attr]
    assert [seg.blobs[k] for k in range(N // 2 + 100, N)] == blobs[N // 2 + 100:]
    seg.to_whole()
    assert seg.blobs[N - 1] == blobs[-1] and seg.blobs[11] is None


def test_ids_of_changing_width_are_stripped_one_by_one() -> None:
    seg, blobs = filled(base=2 * N)  # seqs 8192..12287 cross 10000: 4 and 5 digits
    seg.seal()
    seg.to_bare()
    assert seg.bare and list(seg.blobs) == blobs


def test_a_blob_whose_id_is_not_its_column_is_never_stripped() -> None:
    seg = Segment(N)
    rec = prepare_fields([b"f", b"v"])
    for i in range(N):
        seg.append(rec.encode(N + i, 1000), 2000, rec.size, None, None)  # ID ts != column ts
    seg.seal()
    seg.to_bare()
    assert not seg.bare and not seg.ids_exact and seg.blobs[0] == rec.encode(N, 1000)
    topic = Engine(clock=FakeClock()).put_topic("x", {})[0]
    restore.put_slot(topic, 5, 100, rec.encode(5, 100), rec.size, None, None)
    restore.put_slot(topic, 6, 90, rec.encode(6, 90), rec.size, None, None)  # ts clamped to 100
    assert not topic.segs[0].ids_exact  # type: ignore[union-attr]


def test_only_the_newest_sealed_and_recently_read_segments_stay_whole(eng: Engine) -> None:
    eng.put_topic("t", {})
    write_entries(eng, "t", 8 * N - 1)  # seqs 1..8N-1: eight full segments, the last the tail
    topic = eng.get("t")
    segs = [s for s in topic.segs if isinstance(s, Segment)]
    assert [s.bare for s in segs] == [True] * 6 + [False, False]  # newest sealed, then the tail
    res = read(topic, 0, 10, eng.now(), fmt=FMT_RESP)
    assert values(res.records) == [fields(i) for i in range(10)] and not segs[0].bare
    assert topic.recent == [segs[0]]
    for k in (1, 2, 3, 4):  # four more segments read: the first goes bare again
        seqs, blobs = scan_blobs(topic, k * N + 5, k * N + 9, 0, eng.now())
        assert values(blobs) == [fields(q - 1) for q in seqs]
    assert segs[0].bare and topic.recent == [segs[4], segs[3], segs[2], segs[1]]
    write_entries(eng, "t", N, 8 * N - 1)  # the next seal: segs[6] goes bare, segs[7] stays whole
    assert segs[6].bare and not segs[7].bare and not segs[4].bare


def test_json_segments_are_never_bare(eng: Engine) -> None:
    eng.put_topic("j", {})
    recs = [prepare_json({"data": i}) for i in range(1000)]
    for _ in range(13):
        eng.write("j", recs)
    assert not any(s.bare for s in eng.get("j").segs if isinstance(s, Segment))


def test_a_queue_keeps_its_segments_whole(eng: Engine) -> None:
    eng.put_topic("q", {"type": "queue"})
    write_entries(eng, "q", 4 * N)
    segs = [s for s in eng.get("q").segs if isinstance(s, Segment)]
    assert all(s.sealed for s in segs[:-1]) and not any(s.bare for s in segs)


def test_going_bare_again_reuses_the_bare_blobs_and_keeps_later_kills() -> None:
    seg, blobs = filled()
    seg.seal()
    seg.to_bare()
    bare = seg.blobs
    seg.to_whole()
    assert seg.spare is bare and seg.blobs[7] == blobs[7]
    seg.kill(7, 9, DELETED)  # while whole
    seg.to_bare()
    assert seg.blobs is bare and seg.spare is None and bare.dead > 0  # type: ignore[union-attr]
    assert seg.flags[7] == DELETED and seg.blobs[9] == blobs[9]
    seg.to_whole()
    assert seg.blobs[7] is None and seg.blobs[10] == blobs[10]
    seg.kill(0, N, DELETED)  # nothing live: both emptied
    assert seg.blobs.buf == b"" and seg.spare is not None and seg.spare.buf == b""  # type: ignore[union-attr]
