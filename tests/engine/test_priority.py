"""Effective priority (seeds 3.1): the decay table, the clamp, aging, and what consumes a topic."""

from __future__ import annotations

import pytest

from topicsrv.clock import FakeClock
from topicsrv.engine import Engine
from topicsrv.engine.log.records import prepare_json
from topicsrv.engine.queues import priority
from topicsrv.engine.queues.priority import AGE_CAP_MS, AUTO_FLOOR_MS, effective_priority


@pytest.mark.parametrize(("idle_s", "bonus"), [
    (0, 500), (15, 354), (30, 250), (60, 125), (120, 31), (300, 0), (301, 0), (3600, 0),
])
def test_decay_table_of_seeds_3_1(idle_s: int, bonus: int) -> None:
    now = 1_700_000_000_000
    assert priority.auto_recency(now - idle_s * 1000, now) == bonus
    assert effective_priority(None, True, now - idle_s * 1000, now) == bonus


def test_decay_is_monotone_and_integer() -> None:
    now = 10**12
    values = [priority.auto_recency(now - ms, now) for ms in range(0, AUTO_FLOOR_MS + 1, 250)]
    assert all(type(v) is int for v in values)
    assert values == sorted(values, reverse=True)
    assert values[-1] == 0 and values[0] == 500


def test_manual_priority_is_clamped() -> None:
    assert effective_priority(5000, False, None, 0) == 1000
    assert effective_priority(-5000, False, None, 0) == -1000
    assert effective_priority(None, False, None, 0) == 0  # null: auto only


def test_auto_priority_false_turns_recency_off() -> None:
    assert effective_priority(100, False, 0, 0) == 100
    assert effective_priority(100, True, 0, 0) == 600
    assert effective_priority(100, True, None, 0) == 100  # never consumed


def test_aging_climbs_100_per_second_and_caps_at_1000() -> None:
    assert priority.age_boost(0, 0) == 0
    assert priority.age_boost(0, 2_500) == 250
    assert priority.age_boost(0, AGE_CAP_MS) == 1000
    assert priority.age_boost(0, AGE_CAP_MS * 10) == 1000
    assert effective_priority(-1000, False, None, 60_000, enqueued_at=0) == 0  # the cap: +1000


def test_get_shows_components_and_a_get_consumes(clock: FakeClock) -> None:
    eng = Engine(clock=clock)
    eng.put_topic("t", {"priority": 200})
    state = eng.state("t", touch=False)
    assert state["priority_components"] == {"manual": 200, "auto": 0, "age": 0}
    assert state["effective_priority"] == 200
    eng.state("t")  # a GET consumes: recency starts at AUTO_MAX
    clock.advance(30_000)
    state = eng.state("t", touch=False)
    assert state["priority_components"] == {"manual": 200, "auto": 250, "age": 0}
    assert state["effective_priority"] == 450


def test_reads_consume_and_auto_priority_false_ignores_them(clock: FakeClock) -> None:
    eng = Engine(clock=clock)
    eng.put_topic("a", {})
    eng.put_topic("b", {"auto_priority": False, "priority": -10})
    for name in ("a", "b"):
        eng.write(name, [prepare_json({"data": 1})])
        eng.diff(name, 0, 10)
    clock.advance(60_000)
    assert eng.state("a", touch=False)["effective_priority"] == 125
    assert eng.state("b", touch=False)["effective_priority"] == -10


def test_age_comes_from_the_scheduler_hook(clock: FakeClock) -> None:
    eng = Engine(clock=clock)
    eng.put_topic("t", {"priority": -1000, "auto_priority": False})
    since = clock.now_ms()
    eng.ready_since = lambda name: since if name == "t" else None
    clock.advance(4_000)
    state = eng.state("t", touch=False)
    assert state["priority_components"] == {"manual": -1000, "auto": 0, "age": 400}
