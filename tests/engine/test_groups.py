"""Consumer groups in the engine (Redis 7 semantics), driven with a fake clock."""

from __future__ import annotations

import pytest

from topicsrv.clock import FakeClock
from topicsrv.engine import Engine, groups
from topicsrv.engine.log.entries import parse_entry
from topicsrv.engine.log.records import prepare_fields
from topicsrv.engine.log.topic import Topic
from topicsrv.errors import TopicsError


def add(eng: Engine, name: str, n: int, node: str | None = None) -> list[int]:
    res, _ = eng.write(name, [prepare_fields([b"i", str(i).encode()], node=node) for i in range(n)])
    return list(res["seqs"])


def mk(eng: Engine, name: str, n: int, at: int = 0) -> tuple[Topic, groups.Group]:
    add(eng, name, n)
    topic = eng.get(name)
    g = groups.create(topic, "g", at, 0, None, eng.now())
    assert g is not None
    return topic, g


def test_create_busy_destroy(eng: Engine) -> None:
    topic, _ = mk(eng, "t", 1)
    assert groups.create(topic, "g", 0, 0, None, eng.now()) is None
    assert groups.find(topic, "g") is not None
    assert groups.destroy(topic, "g") is True
    assert groups.destroy(topic, "g") is False
    assert groups.find(topic, "g") is None


def test_read_new_fills_pel_and_history(eng: Engine, clock: FakeClock) -> None:
    topic, g = mk(eng, "t", 5)
    res = groups.read_new(topic, g, "c1", 2, eng.now())
    assert res.seqs == [1, 2]
    assert list(g.pel) == [1, 2] and list(g.consumers["c1"].pel) == [1, 2]
    assert g.last_seq == 2 and g.entries_read == 2 and groups.lag(topic, g) == 3
    clock.advance(100)
    hist = groups.read_history(topic, g, "c1", 0, 0, eng.now())
    assert [d.seq for d, _ in hist] == [1, 2]
    assert all(d.count == 2 and d.time == eng.now() for d, _ in hist)
    assert [parse_entry(b)[2] for _, b in hist if b] == [[b"i", b"0"], [b"i", b"1"]]
    # history strictly after the given id, and the other consumer sees nothing of c1's
    assert [d.seq for d, _ in groups.read_history(topic, g, "c1", 1, 0, eng.now())] == [2]
    assert groups.read_history(topic, g, "c2", 0, 0, eng.now()) == []


def test_noack_and_ack(eng: Engine) -> None:
    topic, g = mk(eng, "t", 3)
    groups.read_new(topic, g, "c", 1, eng.now(), noack=True)
    assert not g.pel and g.last_seq == 1
    groups.read_new(topic, g, "c", 0, eng.now())
    assert list(g.pel) == [2, 3]
    assert groups.ack(g, [2, 2, 9]) == 1
    assert list(g.pel) == [3] and list(g.consumers["c"].pel) == [3]
    assert groups.lag(topic, g) == 0


def test_deleted_pending_entry_reads_as_nil_and_breaks_lag(eng: Engine) -> None:
    topic, g = mk(eng, "t", 3)
    groups.read_new(topic, g, "c", 2, eng.now())
    eng.delete_seqs("t", [2])
    hist = groups.read_history(topic, g, "c", 0, 0, eng.now())
    assert [(d.seq, b is None) for d, b in hist] == [(1, False), (2, True)]
    assert hist[1][0].count == 1  # a missing entry is not redelivered
    # a hole after the group's last id makes Redis's lag unknown
    assert groups.lag(topic, g) is None
    assert groups.read_new(topic, g, "c", 0, eng.now()).seqs == [3]
    assert groups.lag(topic, g) == 0


def test_deleted_tail_skipped_but_last_id_is_last_delivered(eng: Engine) -> None:
    topic, g = mk(eng, "t", 3)
    eng.delete_seqs("t", [3])
    res = groups.read_new(topic, g, "c", 0, eng.now())
    assert res.seqs == [1, 2] and g.last_seq == 2 and g.cursor == 3
    assert groups.read_new(topic, g, "c", 0, eng.now()).seqs == []


def test_trim_past_group_cursor_delivers_tombstone_not_in_pel(eng: Engine) -> None:
    topic, g = mk(eng, "t", 10)
    groups.read_new(topic, g, "c", 2, eng.now())
    eng.trim("t", maxlen=3)
    res = groups.read_new(topic, g, "c", 0, eng.now())
    assert res.tombstone is not None and res.tombstone.reason == "cap"
    assert res.tombstone.gap_from == 3 and res.tombstone.gap_to == 7
    assert res.seqs == [8, 9, 10]
    assert list(g.pel) == [1, 2, 8, 9, 10]
    assert groups.lag(topic, g) == 0
    # the trimmed pending entries are gone from the log: claiming drops them
    nxt, claimed, deleted = groups.autoclaim(topic, g, "d", 0, 0, 10, eng.now())
    assert [d.seq for d in deleted] == [1, 2]
    assert [c.delivery.seq for c in claimed] == [8, 9, 10] and nxt is None


def test_node_filter_skips_own_records_and_progresses(eng: Engine) -> None:
    eng.put_topic("t", {"dedupe_node": True})
    add(eng, "t", 3, node="me")
    add(eng, "t", 1, node="other")
    topic = eng.get("t")
    g = groups.create(topic, "g", 0, 0, None, eng.now())
    assert g is not None
    res = groups.read_new(topic, g, "c", 2, eng.now(), nodes=["me"])
    assert res.seqs == []
    assert groups.read_new(topic, g, "c", 2, eng.now(), nodes=["me"]).seqs == [4]


def test_setid_backwards_redelivers_and_reassigns(eng: Engine) -> None:
    topic, g = mk(eng, "t", 2)
    groups.read_new(topic, g, "a", 0, eng.now())
    groups.setid(g, 0, 0, None)
    groups.read_new(topic, g, "b", 1, eng.now())
    assert g.pel[1].consumer == "b" and g.pel[1].count == 1
    assert list(g.consumers["a"].pel) == [2] and list(g.consumers["b"].pel) == [1]


def test_pending_summary_range_idle(eng: Engine, clock: FakeClock) -> None:
    topic, g = mk(eng, "t", 4)
    groups.read_new(topic, g, "a", 2, eng.now())
    clock.advance(1000)
    groups.read_new(topic, g, "b", 2, eng.now())
    n, first, last, per = groups.pending_summary(g)
    assert (n, first and first.seq, last and last.seq, per) == (4, 1, 4, [("a", 2), ("b", 2)])
    assert [d.seq for d in groups.pending_range(g, 0, 99, 10, eng.now(), min_idle=500)] == [1, 2]
    assert [d.seq for d in groups.pending_range(g, 2, 3, 10, eng.now())] == [2, 3]
    assert [d.seq for d in groups.pending_range(g, 0, 99, 10, eng.now(), consumer="b")] == [3, 4]
    assert groups.pending_range(g, 0, 99, 10, eng.now(), consumer="zz") == []


def test_claim_options(eng: Engine, clock: FakeClock) -> None:
    topic, g = mk(eng, "t", 4)
    groups.read_new(topic, g, "a", 3, eng.now())
    clock.advance(50)
    assert groups.claim(topic, g, "b", 100, [1], eng.now()) == []  # not idle enough
    assert g.consumer("b") is None  # a consumer is only created by a successful claim
    got = groups.claim(topic, g, "b", 10, [1, 2], eng.now())
    assert [(c.delivery.seq, c.delivery.count, c.delivery.consumer) for c in got] == [(1, 2, "b"), (2, 2, "b")]
    got = groups.claim(topic, g, "b", 0, [3], eng.now(), justid=True, delivery_time=eng.now() - 30)
    assert got[0].entry is None and got[0].delivery.count == 1
    assert got[0].delivery.idle(eng.now()) == 30
    got = groups.claim(topic, g, "b", 0, [3], eng.now(), retrycount=9, delivery_time=1)
    assert got[0].delivery.count == 9 and got[0].delivery.time == 1
    # FORCE creates a PEL entry for an existing, never-delivered record
    assert groups.claim(topic, g, "b", 0, [4], eng.now()) == []
    assert [c.delivery.seq for c in groups.claim(topic, g, "b", 0, [4], eng.now(), force=True)] == [4]
    # a deleted record is dropped from the PEL, not claimed
    eng.delete_seqs("t", [1])
    assert groups.claim(topic, g, "c", 0, [1], eng.now()) == [] and 1 not in g.pel
    groups.claim(topic, g, "b", 0, [], eng.now(), last=(0, 4))
    assert g.last_seq == 4


def test_autoclaim_cursor_and_attempts(eng: Engine, clock: FakeClock) -> None:
    topic, g = mk(eng, "t", 30)
    groups.read_new(topic, g, "a", 0, eng.now())
    clock.advance(10)
    nxt, claimed, deleted = groups.autoclaim(topic, g, "b", 5, 0, 2, eng.now())
    assert [c.delivery.seq for c in claimed] == [1, 2] and nxt is not None and nxt.seq == 3
    # not idle: scans count*10 entries at most, then returns where it stopped
    nxt, claimed, deleted = groups.autoclaim(topic, g, "b", 10_000, 3, 1, eng.now())
    assert claimed == [] and nxt is not None and nxt.seq == 13


def test_delconsumer_and_consumers(eng: Engine) -> None:
    topic, g = mk(eng, "t", 3)
    assert groups.create_consumer(g, "x", eng.now()) is True
    assert groups.create_consumer(g, "x", eng.now()) is False
    groups.read_new(topic, g, "x", 2, eng.now())
    assert groups.delete_consumer(g, "x") == 2
    assert not g.pel and groups.delete_consumer(g, "x") == 0


def test_lag_and_estimates_like_redis(eng: Engine) -> None:
    topic, g = mk(eng, "t", 5)
    assert g.entries_read is None and groups.lag(topic, g) == 5  # at 0: before first entry
    head = groups.create(topic, "h", topic.head_seq, 0, None, eng.now())
    assert head is not None and groups.lag(topic, head) == 0
    eng.trim("t", maxlen=2)
    assert groups.lag(topic, g) == 2  # estimated: everything before earliest counts as read
    empty = eng.put_topic("e", {})[0]
    e = groups.create(empty, "g", 0, 0, None, eng.now())
    assert e is not None and groups.lag(empty, e) == 0


def test_snapshot_roundtrip(eng: Engine, clock: FakeClock) -> None:
    topic, g = mk(eng, "t", 4)
    groups.read_new(topic, g, "a", 2, eng.now())
    groups.create_consumer(g, "idle", eng.now())
    snap = groups.snapshot(topic)
    assert snap is not None
    fresh = eng.put_topic("u", {})[0]
    groups.restore(fresh, snap)
    g2 = groups.find(fresh, "g")
    assert g2 is not None
    assert groups.group_to_dict(g2) == groups.group_to_dict(g)
    assert list(g2.consumers["a"].pel) == [1, 2] and g2.pel[1] is g2.consumers["a"].pel[1]
    groups.restore(fresh, None)
    assert groups.find(fresh, "g") is None


class _Recorder:
    """A journal that records group changes and can refuse writes (a full disk)."""

    def __init__(self) -> None:
        self.changes: list[dict[str, object]] = []
        self.full = False

    def check_writable(self, topic: object) -> None:
        if self.full:
            raise TopicsError("insufficient_storage", "disk full")

    def topic_upserted(self, topic: object) -> None:
        return None

    def appended(self, *args: object) -> None:
        return None

    def groups_changed(self, topic: object, change: dict[str, object]) -> None:
        self.changes.append(change)


def test_engine_group_operations_change_and_log_in_one_step(eng: Engine) -> None:
    rec = _Recorder()
    eng.journal = rec  # type: ignore[assignment]
    add(eng, "s", 3)
    topic = eng.get("s")
    g, _ = eng.group_create(topic, "g", 0, 0, None)
    assert g is not None and groups.find(topic, "g") is g
    assert eng.group_create(topic, "g", 0, 0, None) == (None, None)  # BUSYGROUP logs nothing
    eng.group_setid(topic, g, 2, 0, 2)
    assert (g.last_seq, g.entries_read) == (2, 2)
    assert eng.group_create_consumer(topic, g, "c")[0] is True
    assert eng.group_create_consumer(topic, g, "c")[0] is False
    groups.read_new(topic, g, "c", 0, eng.now())
    assert eng.group_delete_consumer(topic, g, "c")[0] == 1
    assert eng.group_destroy(topic, "g")[0] is True
    assert eng.group_destroy(topic, "g") == (False, None)
    assert [c["op"] for c in rec.changes] == ["create", "setid", "createconsumer", "delconsumer", "destroy"]
    # a journal that cannot write refuses the change before anything moves (Journal Rule 2)
    rec.full = True
    with pytest.raises(TopicsError):
        eng.group_create(topic, "h", 0, 0, None)
    assert groups.find(topic, "h") is None and len(rec.changes) == 5


def test_restore_watermarks_never_lowers_and_recomputes_earliest(eng: Engine) -> None:
    add(eng, "s", 5)
    topic = eng.get("s")
    topic.restore_watermarks(front=3, floors={"cap": 2, "lost": 1}, delete_below=0, last_ts=0, lost_total=7)
    assert topic.front == 3 and topic.earliest_seq == 3 and topic.count == 3
    assert topic.floors["lost"] == 1 and topic.lost_total >= 7
    topic.restore_watermarks(front=1, floors={"lost": 0}, delete_below=0, last_ts=0)
    assert topic.front == 3 and topic.floors["lost"] == 1 and topic.lost_total >= 7
