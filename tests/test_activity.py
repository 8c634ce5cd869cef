"""topicsrv/activity.py: sampled rates per topic, bounded rings, the top-N ranking."""

from __future__ import annotations

from typing import Any

from topicsrv import activity
from topicsrv.activity import KEY, Activity
from topicsrv.clock import FakeClock
from topicsrv.engine import Engine
from topicsrv.engine.log.records import prepare_json


def write(engine: Engine, name: str, n: int) -> None:
    engine.write(name, [prepare_json({"data": i}) for i in range(n)])


def test_rates_and_rings_follow_writes_and_reads() -> None:
    engine = Engine(clock=FakeClock())
    write(engine, "old", 5)  # before the first sweep: recovery's work, not a rate (Rule 3)
    act = Activity(slot_s=2.0, slots=4)
    act.sweep(engine, 0.0)
    assert act.rates(engine.get("old")).write_rate == 0
    write(engine, "old", 4)
    write(engine, "new", 6)  # created after the first sweep: counted from zero
    engine.diff("new", 0, 3)
    act.sweep(engine, 2.0)
    old, new = act.rates(engine.get("old")), act.rates(engine.get("new"))
    assert act.rate_slots == 4  # 10 s of 2 s slots, capped at the ring's length
    assert (old.write_rate, new.write_rate, new.read_rate) == (0.5, 0.75, 0.375)
    assert new.writes == [0, 0, 0, 6] and new.reads == [0, 0, 0, 3]
    server = act.server_rates()
    assert server.write_rate == 1.25 and server.writes[-1] == 10
    for t in (4.0, 6.0, 8.0, 10.0):  # a whole window without activity frees the rings
        act.sweep(engine, t)
    assert act.rates(engine.get("new")).writes == [] and act.rings == 0


def test_rings_are_bounded() -> None:
    engine = Engine(clock=FakeClock())
    act = Activity(slot_s=1.0, slots=4, max_rings=3)
    act.sweep(engine, 0.0)
    for i in range(10):
        write(engine, f"t{i}", 1)
    act.sweep(engine, 1.0)
    assert act.rings == 3
    with_ring = [t for t in engine.topics.values() if t.ext[KEY].ring_w is not None]
    assert len(with_ring) == 3
    # a topic past the bound still has its last slot's rate, without a sparkline
    rates = [act.rates(t) for t in engine.topics.values()]
    assert all(r.write_rate > 0 for r in rates)
    assert sorted(len(r.writes) for r in rates) == [0] * 7 + [4] * 3


def test_top_ranks_by_recent_activity_then_bytes() -> None:
    engine = Engine(clock=FakeClock())
    act = Activity(slot_s=1.0, slots=4)
    act.sweep(engine, 0.0)
    write(engine, "busy", 50)
    write(engine, "big", 1)
    engine.write("big", [prepare_json({"data": "x" * 1000})])
    write(engine, "quiet", 1)
    act.sweep(engine, 1.0)
    write(engine, "fresh", 100)  # since the last sweep: ranks at once (Rule 4)
    best, rest = act.top(engine, 2)
    assert [t.name for t in best] == ["fresh", "busy"]
    assert (rest.topics, rest.count) == (2, 3)
    assert rest.bytes == engine.get("big").bytes + engine.get("quiet").bytes
    best, rest = act.top(engine, 10)
    assert [t.name for t in best] == ["fresh", "busy", "big", "quiet"] and rest.topics == 0


def test_many_topics_rank_from_the_sweep_and_the_writes_since(monkeypatch: Any) -> None:
    monkeypatch.setattr(activity, "RANK_KEEP", 3)  # more topics than a sweep keeps ranked
    engine = Engine(clock=FakeClock())
    act = Activity(slot_s=1.0, slots=4)
    engine.listeners.append(act.changed)
    act.sweep(engine, 0.0)
    for i in range(10):
        write(engine, f"t{i}", i + 1)
    act.sweep(engine, 1.0)
    assert [t.name for t in act.ranked] == ["t9", "t8", "t7"]
    write(engine, "t0", 50)  # written since the sweep: a candidate at once
    best, rest = act.top(engine, 2)
    assert [t.name for t in best] == ["t0", "t9"]
    assert (rest.topics, rest.count) == (8, sum(t.count for t in engine.topics.values()) - 61)
    engine.delete_topic("t9")  # a ranked topic that is gone is not listed
    assert [t.name for t in act.top(engine, 2)[0]] == ["t0", "t8"]
