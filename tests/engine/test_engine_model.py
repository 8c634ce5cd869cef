"""Model-based test: the engine against a plain reference model of seeds sections 4-7.

The model keeps every seq with its state (live / deleted / lost to cap / lost to ttl) and
derives earliest_seq, evict_floor and what a read must return straight from the seeds'
definitions. Hypothesis drives random appends, deletes, trims, clock jumps and reads.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from topicsrv.clock import FakeClock
from topicsrv.engine import Engine
from topicsrv.engine.log import segments
from topicsrv.engine.log import topic as topic_mod
from topicsrv.engine.log.deletes import parse_match
from topicsrv.engine.log.reads import scan_range
from topicsrv.engine.log.records import prepare_json

TAGS = ["a:1", "a:2", "b", None]
NODES = ["n1", "n2", None]


@dataclass
class Rec:
    ts: int
    tag: str | None
    node: str | None
    size: int
    state: str = "live"


@dataclass
class Model:
    cap: int
    ttl: int
    recs: dict[int, Rec] = field(default_factory=dict)
    next_seq: int = 1
    floors: dict[str, int] = field(default_factory=lambda: {"cap": 0, "ttl": 0})

    def live(self) -> list[int]:
        return [s for s, r in self.recs.items() if r.state == "live"]

    def lose(self, seq: int, cause: str) -> None:
        self.recs[seq].state = cause
        self.floors[cause] = max(self.floors[cause], seq)

    def expire(self, now: int) -> None:
        if self.ttl:
            for s in self.live():
                if now - self.recs[s].ts > self.ttl:
                    self.lose(s, "ttl")

    def cap_to(self, n: int) -> None:
        live = self.live()
        for s in live[: max(0, len(live) - n)]:
            self.lose(s, "cap")

    @property
    def head(self) -> int:
        return self.next_seq - 1

    @property
    def earliest(self) -> int:
        live = self.live()
        return live[0] if live else self.next_seq

    @property
    def evict_floor(self) -> int:
        return min(max(max(self.floors.values()) + 1, 1), self.next_seq)


ops = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(1, 6), st.sampled_from(TAGS), st.sampled_from(NODES)),
        st.tuples(st.just("advance"), st.integers(0, 800)),
        st.tuples(st.just("before"), st.integers(0, 40)),
        st.tuples(st.just("match"), st.sampled_from(["a:1", "a:*", "b", "*"]), st.one_of(st.none(), st.integers(0, 40))),
        st.tuples(st.just("xdel"), st.lists(st.integers(1, 40), max_size=4)),
        st.tuples(st.just("trim"), st.integers(0, 8)),
        st.tuples(st.just("read"), st.integers(0, 45), st.sampled_from([None, ["n1"], ["n1", "n2"]]), st.integers(1, 5)),
        st.tuples(st.just("range"), st.integers(0, 45), st.integers(0, 45), st.integers(0, 4), st.booleans()),
    ),
    max_size=40,
)


@contextmanager
def segment_size(n: int) -> Iterator[None]:
    """Tiny segments, so short scripts cross segment boundaries and reclaim whole ones."""
    old = segments.SEGMENT_RECORDS
    segments.SEGMENT_RECORDS = topic_mod.SEGMENT_RECORDS = n
    try:
        yield
    finally:
        segments.SEGMENT_RECORDS = topic_mod.SEGMENT_RECORDS = old


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cap=st.sampled_from([0, 3, 7]), ttl=st.sampled_from([0, 1000]), script=ops,
       seg=st.sampled_from([2, 3, 5, 4096]))
def test_engine_matches_model(cap: int, ttl: int, script: list[tuple], seg: int) -> None:
    with segment_size(seg):
        run_script(cap, ttl, script)


def run_script(cap: int, ttl: int, script: list[tuple]) -> None:
    clock = FakeClock()
    eng = Engine(clock=clock)
    eng.put_topic("t", {"cap_records": cap, "ttl_ms": ttl})
    m = Model(cap, ttl)
    for op in script:
        now = clock.now_ms()
        m.expire(now)
        kind = op[0]
        if kind == "append":
            _, n, tag, node = op
            recs = [prepare_json({"data": i, "tag": tag, "node": node}) for i in range(n)]
            eng.write("t", recs)
            for r in recs:
                m.recs[m.next_seq] = Rec(now, tag, node, r.size)
                m.next_seq += 1
            if cap:
                m.cap_to(cap)
        elif kind == "advance":
            clock.advance(op[1])
        elif kind == "before":
            eng.delete_records("t", op[1], None)
            for s in m.live():
                if s < op[1]:
                    m.recs[s].state = "deleted"
        elif kind == "match":
            _, pattern, before = op
            eng.delete_records("t", before, parse_match(pattern))
            prefix = pattern[:-1] if pattern.endswith("*") else None
            for s in m.live():
                tag = m.recs[s].tag
                hit = tag is not None and (tag.startswith(prefix) if prefix is not None else tag == pattern)
                if hit and (before is None or s < before):
                    m.recs[s].state = "deleted"
        elif kind == "xdel":
            eng.delete_seqs("t", op[1])
            for s in op[1]:
                if s in m.recs and m.recs[s].state == "live":
                    m.recs[s].state = "deleted"
        elif kind == "trim":
            eng.trim("t", maxlen=op[1])
            m.cap_to(op[1])
        elif kind == "range":
            _, lo, hi, count, reverse = op
            got = [s for s, _ in scan_range(eng.get("t"), lo, hi, count, now, reverse=reverse)]
            want = [s for s in m.live() if lo <= s <= hi]
            want = want[::-1] if reverse else want
            assert got == (want[:count] if count else want)
        elif kind == "read":
            _, from_seq, nodes, page = op
            check_read(eng, m, from_seq, nodes, page)
        m.expire(clock.now_ms())
        check_state(eng, m)


def check_state(eng: Engine, m: Model) -> None:
    st_ = eng.state("t", touch=False)
    live = m.live()
    assert st_["head_seq"] == m.head
    assert st_["count"] == len(live)
    assert st_["bytes"] == sum(m.recs[s].size for s in live)
    assert st_["earliest_seq"] == m.earliest
    assert st_["evict_floor"] == m.evict_floor
    assert st_["evict_floor"] <= st_["earliest_seq"]


def expected(m: Model, from_seq: int, nodes: list[str] | None) -> tuple[dict | None, list[int]]:
    tomb = None
    cursor = from_seq
    if from_seq > m.head:
        tomb = {"reason": "recreated", "gap_from": 1, "gap_to": m.head}
        cursor = m.earliest - 1
    elif from_seq + 1 < m.evict_floor:
        causes = [c for c, f in m.floors.items() if f >= from_seq + 1]
        reason = causes[0] if len(causes) == 1 else "mixed"
        tomb = {"reason": reason, "gap_from": from_seq + 1, "gap_to": m.earliest - 1}
        cursor = m.earliest - 1
    elif from_seq + 1 < m.earliest:
        cursor = m.earliest - 1
    seqs = [s for s in m.live() if s > cursor and (not nodes or m.recs[s].node not in nodes)]
    return tomb, seqs


def check_read(eng: Engine, m: Model, from_seq: int, nodes: list[str] | None, page: int) -> None:
    tomb, seqs = expected(m, from_seq, nodes)
    r = eng.diff("t", from_seq, limit=10_000, nodes=nodes)
    if tomb is None:
        assert r.tombstone is None
    else:
        assert r.tombstone is not None
        got = r.tombstone.to_json()
        assert {k: got[k] for k in tomb} == tomb
        assert r.tombstone.resume_after + 1 == r.tombstone.earliest_seq == m.earliest
        assert 0 <= got["missed_estimate"] <= max(0, tomb["gap_to"] - tomb["gap_from"] + 1)
    assert r.seqs == seqs
    assert [orjson.loads(b)["$seq"] for b in r.records] == seqs
    assert r.next_from_seq == m.head and r.caught_up
    # Paging with a small limit sees the same records, once each, and at most one tombstone.
    got: list[int] = []
    tombs = 0
    cursor = from_seq
    for _ in range(200):
        p = eng.diff("t", cursor, limit=page, nodes=nodes)
        tombs += p.tombstone is not None
        got += p.seqs
        assert p.next_from_seq >= min(cursor, m.head) or p.tombstone is not None
        cursor = p.next_from_seq
        if p.caught_up:
            break
    assert got == seqs
    assert tombs == (tomb is not None)
