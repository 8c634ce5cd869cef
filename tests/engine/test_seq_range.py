"""The seq range: seq_base, the last possible seq, and gaps that cost nothing (issue 10)."""

from __future__ import annotations

import tracemalloc

import orjson
import pytest

from topicsrv.clock import FakeClock
from topicsrv.engine import Engine, restore
from topicsrv.engine.config import SEQ_MAX, TopicConfig
from topicsrv.engine.log import deletes
from topicsrv.engine.log.reads import FMT_RESP, read, scan_range
from topicsrv.engine.log.records import prepare_json
from topicsrv.engine.log.segments import DELETED, LOST
from topicsrv.engine.log.topic import Topic
from topicsrv.errors import TopicsError

U63 = (1 << 63) - 1


def put(eng: Engine, topic: str, *datas: object, **kw: object) -> dict:
    return eng.write(topic, [prepare_json({"data": d}) for d in datas], **kw)[0]  # type: ignore[arg-type]


def data(result) -> list[object]:
    return [orjson.loads(b)["data"] for b in result.records]


# ---- the last possible seq (item 2) ----------------------------------------------------------


def test_largest_seq_base_takes_writes_and_the_state_stays_json(eng: Engine) -> None:
    base = SEQ_MAX - 2
    r = put(eng, "boom", 1, 2, 3, config={"seq_base": base})
    assert r["seqs"] == [base, base + 1, base + 2]
    st = eng.state("boom")
    orjson.dumps(st)
    assert st["next_seq"] == U63  # every watermark fits a signed 64-bit RESP integer (issue 23)
    for bad in (SEQ_MAX + 1, U63 + 1):
        with pytest.raises(TopicsError) as err:
            eng.put_topic("big", {"seq_base": bad})
        assert err.value.code == "invalid_request" and "seq_base" in err.value.message
    with pytest.raises(TopicsError) as err:
        eng.put_topic("big", {"seq_base": U63 + 1})
    assert err.value.code == "invalid_request" and "seq_base" in err.value.message


def _near_the_end(eng: Engine, name: str, left: int) -> Topic:
    """A topic with `left` seqs to go (unreachable through config within a test's time)."""
    eng.put_topic(name, {})
    topic = eng.get(name)
    topic.seq_base = topic.next_seq = topic.front = topic._earliest = SEQ_MAX - left + 1
    return topic


def test_a_write_past_the_last_seq_is_refused_whole(eng: Engine) -> None:
    _near_the_end(eng, "end", 2)
    with pytest.raises(TopicsError) as err:
        put(eng, "end", 1, 2, 3)
    assert err.value.code == "seq_exhausted" and err.value.status == 409
    assert err.value.resp_line() == "ERR The stream has exhausted the last possible ID, unable to add more items"
    assert err.value.detail is not None and err.value.detail["seq_max"] == SEQ_MAX
    st = eng.state("end")
    assert (st["head_seq"], st["count"]) == (SEQ_MAX - 2, 0)  # nothing assigned
    assert put(eng, "end", "a", "b")["seqs"] == [SEQ_MAX - 1, SEQ_MAX]
    with pytest.raises(TopicsError):
        put(eng, "end", "c")
    st = eng.state("end")
    assert st["next_seq"] == U63 and st["head_seq"] == SEQ_MAX
    orjson.dumps(st)
    assert data(eng.diff("end", 0)) == ["a", "b"]


# ---- gaps are O(1): Runs (item 3) --------------------------------------------------------------


def _gapped(gap: int, flag: int = LOST) -> Topic:
    """Seqs 1..3 live, then `gap` seqs with no record (as recovery leaves them), then 2 more."""
    t = Topic("g", 1, "log", TopicConfig(), 1, 0)
    for seq in (1, 2, 3):
        restore.put_slot(t, seq, 10, b'{"$seq":%d,"$ts":10,"data":%d}' % (seq, seq), 5, None, None)
    restore.fill_lost(t, 4 + gap, 10, flag)
    for seq in (4 + gap, 5 + gap):
        restore.put_slot(t, seq, 20, b'{"$seq":%d,"$ts":20,"data":%d}' % (seq, seq), 5, None, None)
    restore.finish(t, next_seq=6 + gap, front=0, floors={}, delete_below=0, last_ts=20, now=20)
    return t


def test_a_gap_of_a_billion_seqs_costs_no_memory() -> None:
    tracemalloc.start()
    try:
        t = _gapped(10**9)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 2 << 20  # bytes, for 5 records and a billion seqs
    assert len(t.segs) <= 3


def test_reads_across_a_huge_lost_gap() -> None:
    gap = 10**9
    t = _gapped(gap)
    first = t.locate(2)[0]
    assert first.base == 1
    res = read(t, 0, 100, 30)
    assert data(res) == [1, 2, 3]  # stops in front of the gap
    res = read(t, res.next_from_seq, 100, 30)
    assert res.tombstone is not None and res.tombstone.reason == "lost"
    assert (res.tombstone.gap_from, res.tombstone.gap_to) == (4, 3 + gap)
    assert data(res) == [4 + gap, 5 + gap] and res.caught_up
    got = scan_range(t, 0, SEQ_MAX, 0, 30, fmt=FMT_RESP)
    assert [s for s, _ in got] == [1, 2, 3, 4 + gap, 5 + gap]
    rev = scan_range(t, 0, SEQ_MAX, 0, 30, reverse=True, fmt=FMT_RESP)
    assert [s for s, _ in rev] == [5 + gap, 4 + gap, 3, 2, 1]
    assert t.record_at(4 + gap) is not None and t.record_at(10) is None


def test_a_silent_gap_reads_silently_and_deletes_and_caps_cross_it() -> None:
    gap = 10**8
    t = _gapped(gap, DELETED)
    res = read(t, 3, 100, 30)
    assert res.tombstone is None and data(res) == [4 + gap, 5 + gap]
    assert deletes.delete(t, 30, 5 + gap, None) == 4  # before_seq across the gap
    assert data(read(t, 0, 100, 30)) == [5 + gap]
    t2 = _gapped(gap, LOST)
    assert t2.evict_for_cap(max_records=1) == 4
    assert t2.earliest_seq == 5 + gap
    res = read(t2, 0, 100, 30)
    assert res.tombstone is not None and res.tombstone.gap_to == 4 + gap
    assert data(res) == [5 + gap]


def test_ttl_expiry_crosses_a_gap(clock: FakeClock) -> None:
    t = _gapped(10**7)
    t.config = TopicConfig(ttl_ms=5)
    t.expire(24)  # ts 10 (seqs 1..3 and the gap) expired, ts 20 kept
    assert t.earliest_seq == 4 + 10**7 and t.count == 2


# ---- seq_base and tombstones (item 17) ---------------------------------------------------------


def test_reading_below_seq_base_of_a_fresh_topic_is_not_a_loss(eng: Engine) -> None:
    eng.put_topic("sb", {"seq_base": 100})
    res = eng.diff("sb", 0)
    assert res.tombstone is None and res.records == [] and res.caught_up
    put(eng, "sb", "x", "y")
    res = eng.diff("sb", 0)
    assert res.tombstone is None and data(res) == ["x", "y"]
    assert res.seqs == [100, 101]


def test_a_loss_on_a_seq_base_topic_starts_at_seq_base(eng: Engine) -> None:
    eng.put_topic("sbc", {"seq_base": 100, "cap_records": 1})
    put(eng, "sbc", 1, 2, 3)
    res = eng.diff("sbc", 0)
    tomb = res.tombstone
    assert tomb is not None and tomb.reason == "cap"
    assert (tomb.gap_from, tomb.gap_to, tomb.earliest_seq) == (100, 101, 102)
    assert tomb.earliest_seq <= tomb.head_seq
    assert data(res) == [3]


def test_a_tombstone_on_a_wholly_evicted_topic_resumes_at_the_next_seq(eng: Engine, clock: FakeClock) -> None:
    """earliest_seq = head_seq + 1 when nothing is live (seeds 5.1): the tombstone's resume
    point is the next seq to be written, never beyond it."""
    eng.put_topic("ttl", {"seq_base": 100, "ttl_ms": 10})
    put(eng, "ttl", 1, 2)
    clock.advance(50)
    res = eng.diff("ttl", 0)
    tomb = res.tombstone
    assert tomb is not None and tomb.reason == "ttl"
    assert (tomb.gap_from, tomb.gap_to) == (100, 101)
    assert tomb.earliest_seq == tomb.head_seq + 1 == 102
