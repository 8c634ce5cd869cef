"""Client-chosen stream IDs in the engine (engine/log/xids.py): planning as Redis, the parallel
ID arrays, positions by binary search across segments, the tombstone's resuming ID, and the
seq/HTTP contract left unchanged."""

from __future__ import annotations

import orjson
import pytest

from topicsrv.clock import FakeClock
from topicsrv.engine import Engine
from topicsrv.engine.log import xids
from topicsrv.engine.log.reads import FMT_JSON, FMT_RESP, read, scan_range
from topicsrv.engine.log.records import prepare_fields, prepare_json
from topicsrv.engine.log.segments import SEGMENT_RECORDS
from topicsrv.errors import TopicsError
from topicsrv.resp import ids

U64 = xids.U64


def add(eng: Engine, name: str, xid: tuple[int, int | None] | None, n: int = 1) -> dict:
    result, _ = eng.write(name, [prepare_fields([b"f", b"%d" % i]) for i in range(n)], xid=xid)
    return result


def test_a_topic_that_never_took_an_explicit_id_has_no_id_arrays(eng: Engine) -> None:
    add(eng, "t", None, 10)
    t = eng.get("t")
    assert t.xid_since is None and all(seg.xids is None for seg in t.segs)
    assert "xids" not in add(eng, "t", None)


def test_star_after_explicit_ids_follows_redis(eng: Engine, clock: FakeClock) -> None:
    now = eng.now()
    assert add(eng, "t", (now + 50, 3))["xids"] == [(now + 50, 3)]
    assert add(eng, "t", None, 2)["xids"] == [(now + 50, 4), (now + 50, 5)]  # same ms: seq + 1
    clock.advance(100)  # now > last ms: (now, 0)
    assert add(eng, "t", None)["xids"] == [(eng.now(), 0)]
    assert add(eng, "t", (eng.now(), None))["xids"] == [(eng.now(), 1)]
    assert add(eng, "t", (eng.now() + 1, None))["xids"] == [(eng.now() + 1, 0)]


def test_explicit_ids_keep_the_gap_free_seq_and_the_json_form(eng: Engine) -> None:
    first = add(eng, "t", None, 3)["first_seq"]  # implicit era: <ts>-<seq>
    got = add(eng, "t", (U64 - 1, 7))
    assert got["first_seq"] == first + 3 and got["xids"] == [(U64 - 1, 7)]
    eng.write("t", [prepare_json({"data": {"a": "b"}})])  # an HTTP write: the next `*` ID
    t = eng.get("t")
    js = read(t, 0, 100, eng.now(), fmt=FMT_JSON)
    assert [orjson.loads(b)["$seq"] for b in js.records] == [first, first + 1, first + 2, first + 3, first + 4]
    resp = read(t, 0, 100, eng.now(), fmt=FMT_RESP)
    heads = [b.split(b"\r\n")[2] for b in resp.records]
    assert heads[3:] == [b"%d-7" % (U64 - 1), b"%d-8" % (U64 - 1)]
    assert heads[0] == b"%d-%d" % (t.ts_of(first), first)


def test_redis_errors_change_nothing(eng: Engine) -> None:
    add(eng, "t", (5, 5))
    for spec in [(5, 5), (5, 4), (4, None)]:
        with pytest.raises(TopicsError, match="equal or smaller than the target stream top item"):
            add(eng, "t", spec)
    add(eng, "t", (5, U64))
    with pytest.raises(TopicsError, match="Elements are too large"):
        add(eng, "t", (5, None))
    add(eng, "t", (U64, U64))
    with pytest.raises(TopicsError, match="exhausted the last possible ID"):
        add(eng, "t", None)
    t = eng.get("t")
    assert t.count == 3 and t.next_seq == t.seq_base + 3


def test_positions_bisect_across_segments_and_deletes(eng: Engine) -> None:
    n = 2 * SEGMENT_RECORDS + 100
    add(eng, "t", None, 50)  # an implicit era first: those IDs are computed, not stored
    t = eng.get("t")
    base = t.next_seq
    for i in range(n):
        add(eng, "t", (10**13 + i // 3, i % 3))
    first = t.segs[0]  # the segment of the switch: its implicit-era slots at (ts, seq)
    assert first.xids is not None and xids.seg_xid(first, 0) == (int(first.ts[0]), first.base)
    for i in (0, 1, 2, 3, SEGMENT_RECORDS - 1, SEGMENT_RECORDS, n - 1):
        x = (10**13 + i // 3, i % 3)
        assert xids.exact(t, x) == base + i
        assert xids.lower_bound(t, x) == base + i
        assert xids.upper_bound(t, x) == base + i + 1
    assert xids.lower_bound(t, (10**13, 5)) == base + 3  # between IDs
    deleted = base + SEGMENT_RECORDS
    eng.delete_seqs("t", [deleted])
    assert ids.record_seq(b"%d-%d" % xids.xid_of(t, deleted), t) == deleted  # deleted slots keep their ID
    lo, hi = ids.range_bounds(t, b"%d" % (10**13 + 1), b"%d" % (10**13 + 1))
    assert (lo, hi) == (base + 3, base + 5)
    assert ids.read_position(t, b"%d-2" % (10**13 + 1)) == base + 5
    assert ids.read_position(t, b"99999999999999999-0") == t.head_seq


def test_tombstone_on_an_id_mapped_topic_resumes_exactly(eng: Engine) -> None:
    eng.write("t", [prepare_fields([b"f", b"0"])], config={"cap_records": 3}, xid=(100, 0))
    t = eng.get("t")
    for x in [(100, 5), (200, 0), (200, 1), (300, 0)]:
        add(eng, "t", x)  # the cap evicts (100, 0) and (100, 5)
    assert t.count == 3
    cursor = ids.read_position(t, b"100-0")  # a reader that had read only the first record
    res = read(t, cursor, 10, eng.now(), fmt=FMT_RESP)
    assert res.tombstone is not None
    entry = res.tombstone.resp_entry()
    assert entry.split(b"\r\n")[2] == b"199-%d" % U64  # (200, 0) minus one
    assert [b.split(b"\r\n")[2] for b in res.records] == [b"200-0", b"200-1", b"300-0"]
    again = read(t, ids.read_position(t, b"199-%d" % U64), 10, eng.now(), fmt=FMT_RESP)
    assert again.tombstone is None and len(again.records) == 3  # resuming after it is exact
    add(eng, "t", (300, 1))
    eng.trim("t", minid_seq=xids.lower_bound(t, (300, 1)))
    tomb = read(t, ids.read_position(t, b"200-1"), 10, eng.now(), fmt=FMT_RESP).tombstone
    assert tomb is not None and tomb.resp_entry().split(b"\r\n")[2] == b"300-0"


def test_set_last_id_lowers_the_ids_of_dead_slots_above_it(eng: Engine) -> None:
    add(eng, "t", (1, 1))
    add(eng, "t", (9, 9))
    t = eng.get("t")
    eng.delete_seqs("t", [t.head_seq])
    eng.set_stream_id(t, (2, 0))
    add(eng, "t", (3, 0))
    assert [s for s, _ in scan_range(t, 0, t.head_seq, 0, eng.now())] == [t.seq_base, t.head_seq]
    assert xids.exact(t, (3, 0)) == t.head_seq and xids.exact(t, (1, 1)) == t.seq_base
    lo, hi = ids.range_bounds(t, b"2", b"+")
    assert [s for s, _ in scan_range(t, lo, hi, 0, eng.now())] == [t.head_seq]

