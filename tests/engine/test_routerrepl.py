"""A replica runs its primary's forwarding steps again (engine/routing/routerrepl.py): the
copies land at the primary's seqs, IDs and timestamps; a step that cannot land there is
`Diverged`; a step already run changes nothing."""

from __future__ import annotations

from typing import Any

import pytest

from topicsrv.clock import FakeClock
from topicsrv.engine import Engine
from topicsrv.engine.journal import NullJournal
from topicsrv.engine.log.records import prepare_json
from topicsrv.engine.log.topic import Topic
from topicsrv.engine.routing import routerfwd, routerrepl


class Feed(NullJournal):
    """What a primary's storage would send a replica about routers."""

    def __init__(self) -> None:
        self.ops: list[tuple[str, dict[str, Any]]] = []
        self.steps: list[tuple[str, int, int, int, int | None]] = []

    def router_logged(self, dest: Topic, op: dict[str, Any]) -> None:
        self.ops.append((dest.name, op))

    def forwarded(self, router: Any, dest: Topic, now: int, gone: int | None) -> None:
        self.steps.append((router.name, int(router.cursor), now, dest.next_seq, gone))


def _rows(eng: Engine, name: str) -> Any:
    """What a reader of `name` gets: every record (seq, ts, ID, data) and any tombstone."""
    got = eng.diff(name, 0, 10_000)
    return got.records, got.tombstone, eng.topics[name].next_seq


class Ticking:
    """A clock that moves 1 ms at every reading: a step must read it once (its copies all
    carry the ts its T_FORWARD frame names). Not a FakeClock subclass: that one is compiled."""

    def __init__(self) -> None:
        self.now = 1_700_000_000_000

    def now_ms(self) -> int:
        self.now += 1
        return self.now

    def advance(self, ms: int) -> None:
        self.now += ms


def _pair() -> tuple[Engine, Engine, Feed, Any, FakeClock]:
    feed = Feed()
    pc, rc = Ticking(), FakeClock(1_800_000_000_000)  # the replica's clock is elsewhere
    return Engine(clock=pc, journal=feed), Engine(clock=rc), feed, pc, rc


def _both(p: Engine, r: Engine, pc: Any, rc: FakeClock, name: str, recs: list[Any]) -> None:
    """A source write replicated as its records (the replica's appends keep the primary's ts)."""
    p.write(name, [prepare_json(x) for x in recs])
    rc.set(pc.now_ms())
    r.write(name, [prepare_json(x) for x in recs])


def test_steps_land_where_the_primary_put_them() -> None:
    p, r, feed, pc, rc = _pair()
    p.router_put("sel", {"source": "a", "dest": "b", "filter": ["tag", "Eq", "t"]})
    r.put_topic("a", {})
    r.put_topic("b", {})
    for dest, op in feed.ops:
        routerrepl.apply_op(r, r.topics[dest], op)
    for i in range(3):
        _both(p, r, pc, rc, "a", [{"data": {"n": i, "k": k}, **({"tag": "t"} if k % 2 else {})}
                                  for k in range(5)])
        pc.advance(7)
        routerfwd.forward(p, p.routers["sel"], limit=4)  # steps that stop mid-way
        routerfwd.forward(p, p.routers["sel"])
    rc.set(1_900_000_000_000)  # the replica's own clock never stamps a copy
    for name, to, ts, nxt, gone in feed.steps:
        routerrepl.follow(r, name, r.topics["b"], to, ts, nxt, gone)
    assert _rows(r, "b") == _rows(p, "b") and len(_rows(p, "b")[0]) == 6
    assert r.routers["sel"].cursor == p.routers["sel"].cursor == 15
    # a resumed stream repeats steps already run: nothing moves, nothing is raised
    for name, to, ts, nxt, gone in feed.steps:
        routerrepl.follow(r, name, r.topics["b"], to, ts, nxt, gone)
    assert _rows(r, "b") == _rows(p, "b")


def test_a_changed_spec_and_a_delete_apply_as_on_the_primary() -> None:
    p, r, feed, pc, rc = _pair()
    p.router_put("sel", {"source": "a", "dest": "b", "filter": ["tag", "Eq", "t"]})
    p.router_put("sel", {"source": "a", "dest": "b", "filter": ["tag", "Glob", "t*"]})
    r.put_topic("a", {})
    r.put_topic("b", {})
    for dest, op in feed.ops:
        routerrepl.apply_op(r, r.topics[dest], op)
    assert r.routers["sel"].spec == p.routers["sel"].spec
    p.router_delete("sel")
    routerrepl.apply_op(r, r.topics["b"], feed.ops[-1][1])
    assert "sel" not in r.routers and "router_in" not in r.topics["b"].ext
    routerrepl.apply_op(r, r.topics["b"], feed.ops[-1][1])  # again: nothing to do


def test_a_dest_that_moved_on_its_own_has_diverged() -> None:
    p, r, feed, pc, rc = _pair()
    p.router_put("all", {"source": "a", "dest": "b"})
    r.put_topic("a", {})
    r.put_topic("b", {})
    for dest, op in feed.ops:
        routerrepl.apply_op(r, r.topics[dest], op)
    _both(p, r, pc, rc, "a", [{"data": 1}, {"data": 2}])
    routerfwd.forward(p, p.routers["all"])
    r.write("b", [prepare_json({"data": "not on the primary"})])
    name, to, ts, nxt, gone = feed.steps[-1]
    with pytest.raises(routerrepl.Diverged):
        routerrepl.follow(r, name, r.topics["b"], to, ts, nxt, gone)
    with pytest.raises(routerrepl.Diverged):
        routerrepl.follow(r, "missing", r.topics["b"], to, ts, nxt, gone)


def test_evicted_unforwarded_seqs_count_as_on_the_primary() -> None:
    """The source evicts seqs its router had not forwarded yet: the gap the dest gets is the
    primary's count (routerfwd.py Rule 6), even on a replica whose router came from a
    checkpoint and so does not know that count."""
    p, r, feed, pc, rc = _pair()
    p.put_topic("a", {"cap_records": 4})
    r.put_topic("a", {"cap_records": 4})
    p.router_put("sel", {"source": "a", "dest": "b", "filter": ["tag", "Eq", "t"]})
    r.put_topic("b", {})
    for dest, op in feed.ops:
        routerrepl.apply_op(r, r.topics[dest], op)
    r.routers["sel"].gone = None  # as a router restored from a checkpoint
    for i in range(3):  # 18 records through a 4-record source before the router looks
        _both(p, r, pc, rc, "a", [{"data": {"n": i, "k": k}, **({"tag": "t"} if k % 3 else {})}
                                  for k in range(6)])
    routerfwd.forward(p, p.routers["sel"])
    rc.set(1_900_000_000_000)
    for name, to, ts, nxt, gone in feed.steps:
        routerrepl.follow(r, name, r.topics["b"], to, ts, nxt, gone)
    assert _rows(r, "b") == _rows(p, "b")
    records, tomb, next_seq = _rows(p, "b")
    # 14 seqs evicted unforwarded, 9 of them tagged: a 9-seq gap, not 14, then 3 copies
    assert tomb is not None and tomb.reason == "source_trim" and (tomb.gap_from, tomb.gap_to) == (1, 9)
    assert len(records) == 3 and next_seq == 13
