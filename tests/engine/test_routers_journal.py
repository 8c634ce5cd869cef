"""What the journal hears from routers (storage builds on it), `until`, hidden source records."""

from __future__ import annotations

from typing import Any

import orjson

from topicsrv.clock import FakeClock
from topicsrv.engine import Engine
from topicsrv.engine.journal import NullJournal
from topicsrv.engine.log.records import prepare_json
from topicsrv.engine.log.segments import TRIMMED
from topicsrv.engine.log.topic import Topic
from topicsrv.engine.routing import routers


class Recording(NullJournal):
    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def appended(self, topic: Topic, first_seq: int, ts: int, blobs: list[bytes], records: Any) -> None:
        self.calls.append(("appended", topic.name, first_seq, len(blobs)))

    def derived(self, topic: Topic, first_seq: int, n: int) -> None:
        self.calls.append(("derived", topic.name, first_seq, n))

    def derived_gap(self, topic: Topic, first_seq: int, n: int, flag: int) -> None:
        self.calls.append(("derived_gap", topic.name, first_seq, n, flag))

    def router_logged(self, dest: Topic, op: dict[str, Any]) -> None:
        self.calls.append(("router", dest.name, op))


def write(eng: Engine, name: str, n: int) -> None:
    eng.write(name, [prepare_json({"data": i}, i) for i in range(n)])


def test_journal_hears_derived_appends_and_router_ops() -> None:
    journal = Recording()
    eng = Engine(clock=FakeClock(), journal=journal)
    eng.put_topic("a", {"cap_records": 3})
    eng.router_put("r", {"source": "a", "dest": "b", "filter": ["tag", "Glob", "x*"]})
    put = [c for c in journal.calls if c[0] == "router"]
    assert put == [("router", "b", {"op": "put", "cursor": 0, "source_epoch": 1, "spec": {
        "name": "r", "source": "a", "dest": "b", "preserve_node": True, "preserve_tag": True,
        "filter": ["tag", "Glob", "x*"], "allow_cycle": False, "max_hops": None,
        "guarantee": "at_least_once", "create_dest": True, "created_ts": eng.now()}})]
    assert routers.spec_from_json(put[0][2]["spec"]) == eng.routers["r"].spec
    journal.calls.clear()
    eng.write("a", [prepare_json({"data": 1, "tag": "x1"}), prepare_json({"data": 2, "tag": "x2"})])
    routers.forward(eng, eng.routers["r"])
    write(eng, "a", 4)  # untagged 3-6; the cap evicts 3 and 4 unforwarded, but the filter
    # would have dropped them: no gap
    eng.write("a", [prepare_json({"data": 3, "tag": "x3"})])
    routers.forward(eng, eng.routers["r"])
    assert journal.calls == [
        ("appended", "a", 1, 2), ("derived", "b", 1, 2),
        ("appended", "a", 3, 4), ("appended", "a", 7, 1), ("derived", "b", 3, 1)]
    journal.calls.clear()
    eng.router_put("r", {"source": "a", "dest": "b"})
    assert journal.calls[0][2]["cursor"] == 7 and journal.calls[0][2]["spec"]["filter"] is None
    eng.router_delete("r")
    assert journal.calls[-1] == ("router", "b", {"op": "del", "name": "r"})
    journal.calls.clear()
    eng.router_put("r2", {"source": "a", "dest": "c"})
    eng.delete_topic("c")
    assert [c[0] for c in journal.calls] == ["router"]  # the cascade logs nothing (storage infers it)


def test_gap_is_journaled_as_derived_gap() -> None:
    journal = Recording()
    eng = Engine(clock=FakeClock(), journal=journal)
    eng.put_topic("a", {"cap_records": 1})
    eng.router_put("r", {"source": "a", "dest": "b"})
    write(eng, "a", 3)
    journal.calls.clear()
    routers.forward(eng, eng.routers["r"])
    assert journal.calls == [("derived_gap", "b", 1, 2, TRIMMED), ("derived", "b", 3, 1)]


def test_until_bounds_the_cursor(eng: Engine) -> None:
    eng.router_put("r", {"source": "a", "dest": "b"})
    write(eng, "a", 10)
    step = routers.forward(eng, eng.routers["r"], until=4)
    assert step.forwarded == 4 and eng.routers["r"].cursor == 4 and not step.caught_up
    assert routers.forward(eng, eng.routers["r"], until=4).forwarded == 0
    assert routers.forward(eng, eng.routers["r"]).forwarded == 6


def test_hidden_source_records_wait_until_revealed(eng: Engine) -> None:
    eng.router_put("r", {"source": "a", "dest": "b"})
    write(eng, "a", 2)
    topic = eng.find("a")
    topic.hide_from(topic.next_seq)  # as storage does for an fsync-class write in flight
    write(eng, "a", 3)
    assert routers.forward(eng, eng.routers["r"]).forwarded == 2
    topic.reveal(topic.next_seq)
    assert routers.forward(eng, eng.routers["r"]).forwarded == 3


def test_restored_router_without_a_count_reports_the_whole_span(eng: Engine) -> None:
    eng.put_topic("a", {"cap_records": 2})
    eng.router_put("r", {"source": "a", "dest": "b", "filter": "keep"})
    router = eng.routers["r"]
    router.gone = None  # as a router storage restored: evictions before it are unknown
    write(eng, "a", 5)  # 1-3 evicted, none would have passed the filter
    routers.forward(eng, router)
    res = eng.diff("b", 0, 10)
    assert res.tombstone is not None and (res.tombstone.gap_from, res.tombstone.gap_to) == (1, 3)
    assert router.gone == 0 and router.cursor == 5


def test_option_update_applies_from_the_cursor(eng: Engine) -> None:
    eng.router_put("r", {"source": "a", "dest": "b"})
    eng.write("a", [prepare_json({"data": 1, "tag": "t"})])
    routers.forward(eng, eng.routers["r"])
    eng.router_put("r", {"source": "a", "dest": "b", "preserve_tag": False})
    eng.write("a", [prepare_json({"data": 2, "tag": "t"})])
    routers.forward(eng, eng.routers["r"])
    got = [orjson.loads(b) for b in eng.diff("b", 0, 10).records]
    assert [r.get("$tag") for r in got] == ["t", None]
