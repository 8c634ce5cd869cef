"""SCAN's cursor (engine/keyspace/scanorder.py): an unsigned 64-bit integer, and a scan returns
every key present for its whole length while other keys of both kinds come and go."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st
from sortedcontainers import SortedKeyList

from topicsrv.clock import FakeClock
from topicsrv.engine import Engine
from topicsrv.engine.keyspace import strings as ks_ops
from topicsrv.engine.keyspace.scanorder import U64, ScanOrder, TopicMap, page, scan_hash


def _scan_with_churn(e: Engine, count: int, churn: random.Random) -> tuple[list[str], list[int]]:
    """A whole scan; between two pages some keys (strings and topics named `tmp...`) are added
    and deleted. The names returned and the cursors seen."""
    ks = e.keyspace
    seen: list[str] = []
    cursors: list[int] = []
    cursor = 0
    step = 0
    while True:
        cursor, names = ks.scan(cursor, count)
        seen += names
        cursors.append(cursor)
        if cursor == 0:
            return seen, cursors
        step += 1
        ks_ops.put(ks, [(f"tmp:s{step}", b"v")])
        e.put_topic(f"tmp.t{step}", {})
        victims = [n for n in ks.names() if n.startswith("tmp") and churn.random() < 0.5]
        ks_ops.delete(ks, victims)


def test_a_scan_returns_every_key_present_throughout_with_u64_cursors() -> None:
    e = Engine(FakeClock())
    long = "k" * 200  # a long name once made a 1,600-bit cursor
    steady = {f"{long}:{i}" for i in range(300)} | {f"t.{i}" for i in range(100)}
    ks_ops.put(e.keyspace, [(n, b"v") for n in steady if n.startswith("k")])
    for n in steady:
        if n.startswith("t."):
            e.put_topic(n, {})
    for count in (1, 7, 50):
        seen, cursors = _scan_with_churn(e, count, random.Random(count))
        assert steady <= set(seen)
        assert all(0 <= c <= U64 for c in cursors) and cursors[-1] == 0
        assert len(cursors) > 1 if count < len(steady) else True
    e.topics.check()
    assert set(e.keyspace.names()) >= steady and e.keyspace.names() == sorted(e.keyspace.names())


@given(st.lists(st.integers(0, 40), unique=True, max_size=40), st.integers(1, 5),
       st.lists(st.tuples(st.booleans(), st.integers(0, 80)), max_size=30))
def test_names_sharing_a_hash_are_never_split_between_pages(
        steady: list[int], count: int, churn: list[tuple[bool, int]]) -> None:
    """A hash of 3 values makes collisions the rule: a page still ends only where the hash
    changes, so no key present throughout is skipped."""
    def coarse(name: str) -> int:
        return int(name) % 3

    strings: SortedKeyList = SortedKeyList(map(str, steady), key=coarse)
    others: SortedKeyList = SortedKeyList(key=coarse)
    seen: list[str] = []
    cursor, moves = 0, iter(churn)
    while True:
        cursor, names = page((strings, others), cursor, count)
        seen += names
        if cursor == 0:
            break
        for add, n in [m for m in [next(moves, None)] if m is not None]:
            name = str(41 + n)  # never a steady name
            if add and name not in others:
                others.add(name)
            elif not add and name in others:
                others.remove(name)
    assert {str(n) for n in steady} <= set(seen)


def test_the_topic_map_keeps_scan_order_through_every_change() -> None:
    m = TopicMap()
    for i in range(50):
        m[f"t{i}"] = i
    del m["t3"]
    m.pop("t4")
    m.popitem(0)
    m.update({f"u{i}": i for i in range(100)})
    m.setdefault("v", 1)
    m.check()
    assert len(m.scan) == len(m) == 148
    m.clear()
    m.check()
    assert not m.scan


@settings(max_examples=200)
@given(st.lists(st.tuples(st.booleans(), st.integers(0, 120)), max_size=400),
       st.integers(2, 9), st.sampled_from([3, 50, 1 << 64]))
def test_a_scan_order_keeps_every_name_in_hash_order_through_splits_and_merges(
        moves: list[tuple[bool, int]], cap: int, spread: int) -> None:
    """ScanOrder (Rule 3) against a model: whatever is added and removed, with hashes that
    collide often (spread 3) or never, its walk from any cursor is the model's in hash order,
    its buckets hold their ranges, and RANDOMKEY's index reads each name exactly once."""
    def key(name: str) -> int:
        return scan_hash(name) % spread

    order = ScanOrder(key=key, cap=cap)
    model: set[str] = set()
    for add, n in moves:
        name = f"k{n}"
        if add and name not in model:
            order.add(name)
            model.add(name)
        elif not add and name in model:
            order.remove(name)
            model.discard(name)
        order.check()
    assert len(order) == len(model)
    assert sorted(order[i] for i in range(len(order))) == sorted(model)
    hashes = [h for h, _ in order.pairs_from(0)]
    assert hashes == sorted(map(key, model)) and set(order) == model
    for cursor in (0, 1, 2, spread // 2, spread - 1):
        assert {n for n in order.irange_key(min_key=cursor)} == {
            n for n in model if key(n) >= cursor}
    seen: list[str] = []
    cursor = 0
    while True:  # a whole scan in pages of 3: each name once, pages end where hashes change
        cursor, names = page((order,), cursor, 3)
        seen += names
        if cursor == 0:
            break
    assert sorted(seen) == sorted(model)


def test_a_random_name_is_drawn_uniformly_even_from_buckets_of_one_hash() -> None:
    """ScanOrder.choice (RANDOMKEY): every name about equally often, including names that
    share one hash and so overfill a bucket, and those of a bucket left nearly empty."""
    order = ScanOrder([f"k{i}" for i in range(40)], cap=8)
    for i in range(20):  # twenty names of one hash: a bucket that cannot split
        order.add(f"same{i}")
    order.key = lambda n: 7 if n.startswith("same") else scan_hash(n)
    order.clear()
    order.update([f"k{i}" for i in range(40)] + [f"same{i}" for i in range(20)])
    order.check()
    assert max(len(b) for b in order.buckets) >= 20
    rnd = random.Random(7)
    counts: dict[str, int] = {}
    draws = 30_000
    for _ in range(draws):
        name = order.choice(rnd)
        counts[name] = counts.get(name, 0) + 1
    assert set(counts) == set(order)
    expected = draws / len(order)
    assert all(0.75 * expected < c < 1.25 * expected for c in counts.values())
