"""The sorted-set value (engine/keyspace/zsetvalue.py) against a dict and `sorted`: every
operation of both encodings, with chunks of 4 members so the big form splits and drops chunks
(its Fenwick tree rebuilt) within a few hundred steps; and the whole-value builds."""

from __future__ import annotations

import bisect
import math
import random
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from topicsrv.engine.keyspace import packed, zsetorder, zsetvalue
from topicsrv.engine.keyspace.zsetvalue import ZsetValue


@pytest.mark.parametrize("entries", [0, 3, 128])
@pytest.mark.parametrize("seed", range(6))
def test_value_matches_a_sorted_model(monkeypatch: pytest.MonkeyPatch, entries: int,
                                      seed: int) -> None:
    monkeypatch.setattr(zsetvalue, "LOAD", 4)
    monkeypatch.setattr(zsetorder, "LOAD", 4)
    rnd = random.Random(seed)
    zv, model = ZsetValue(), {}
    for _ in range(500):
        member = b"m%d" % rnd.randrange(60)
        score = float(rnd.randrange(-5, 5))
        roll = rnd.random()
        if roll < 0.6:
            assert zv.set(member, score, (entries, 64)) == (member not in model)
            model[member] = score
        elif roll < 0.7 and model:  # ZPOPMIN / ZPOPMAX of one (runs.zpop)
            top = rnd.random() < 0.5
            ordered = sorted(model.items(), key=lambda p: (p[1], p[0]))
            want = ordered[-1] if top else ordered[0]
            assert zv.end(top) == want
            zv.drop_end(top, want[0])
            del model[want[0]]
        else:
            assert zv.delete(member) == (member in model)
            model.pop(member, None)
        order = sorted(model.items(), key=lambda p: (p[1], p[0]))
        assert zv.pairs() == order and len(zv) == len(model)
        assert zv.encoding == ("listpack" if len(model) <= entries and zv.table is None
                               else zv.encoding)
        if not order:
            continue
        k = rnd.randrange(len(order))
        assert zv.rank(order[k][0]) == k and zv.score(order[k][0]) == order[k][1]
        lo, hi = sorted((rnd.randrange(len(order) + 1), rnd.randrange(len(order) + 1)))
        assert zv.span(lo, hi) == order[lo:hi]
        assert zv.span(lo, hi, True) == order[lo:hi][::-1]
        assert zv.members_at(lo, hi) == [m for m, _ in order[lo:hi]]
        assert zv.members_at(lo, hi, True) == [m for m, _ in order[lo:hi][::-1]]
        value = float(rnd.randrange(-6, 6))
        scores = [s for _, s in order]
        assert zv.bound(value, False, False) == bisect.bisect_left(scores, value)
        assert zv.bound(value, True, False) == bisect.bisect_right(scores, value)
    assert zv.score(b"nope") is None and zv.rank(b"nope") is None


def _near(base: float, steps: int) -> float:
    """`base` moved by `steps` ulps: scores equal in their high bytes, apart in the low ones."""
    for _ in range(abs(steps)):
        base = math.nextafter(base, math.inf if steps > 0 else -math.inf)
    return base


_SCORES = st.one_of(st.floats(allow_nan=False),
                    st.builds(_near, st.sampled_from([-1.0, 1.0, -1e300, 3.5, 0.0, -2.5e-310]),
                              st.integers(-3, 3)))


@given(st.lists(st.tuples(st.binary(max_size=3), _SCORES), max_size=40))
def test_packed_inserts_order_every_double_as_floats_do(pairs: list[tuple[bytes, float]]) -> None:
    """The packed run places a pair by its score's order key (zsetvalue._place), read from the
    raw bytes: negative and positive, -0.0 and 0.0, subnormals, the infinities, ties of equal
    scores by member, as `sorted` orders the floats."""
    zv, model = ZsetValue(), {}
    for member, score in pairs:
        zv.set(member, score, (128, 64))
        model[member] = score
    assert zv.table is None
    assert zv.pairs() == sorted(((m, s + 0.0) for m, s in model.items()), key=lambda p: (p[1], p[0]))


def test_conversion_happens_on_an_insert_only_and_never_back() -> None:
    zv = ZsetValue()
    for j in range(3):
        zv.set(b"m%d" % j, float(j), (3, 8))
    assert zv.encoding == "listpack"
    zv.set(b"m0", 9.0, (2, 8))  # an update never converts (Redis's zsetAdd)
    assert zv.encoding == "listpack"
    zv.set(b"x" * 9, 1.0, (3, 8))
    assert zv.encoding == "skiplist"
    for m, _ in zv.pairs():
        zv.delete(m)
    zv.set(b"a", 1.0, (3, 8))
    assert zv.encoding == "skiplist" and zv.pairs() == [(b"a", 1.0)]


def test_whole_builds_keep_the_limits_and_the_lex_order_of_ties() -> None:
    pairs = [(b"m%04d" % j, float(j % 7)) for j in range(2000)]
    big = ZsetValue.of(pairs, (128, 64))
    assert big.encoding == "skiplist"
    assert big.pairs() == sorted(pairs, key=lambda p: (p[1], p[0]))
    small = ZsetValue.of(pairs[:5], (128, 64))
    assert small.encoding == "listpack" and len(small) == 5
    assert ZsetValue.of([(b"-", -0.0)]).score(b"-") == 0.0  # a listpack keeps 0, as Redis
    assert big.bound(b"m0003", False, True) >= 0  # lex bounds answer (meaningful on ties)


@pytest.mark.parametrize("entries", [0, 128])
def test_infinite_bounds_and_members_at_infinity(entries: int) -> None:
    inf = float("inf")
    pairs = [(b"a", -inf), (b"b", -inf), (b"c", 0.0), (b"d", inf), (b"e", inf)]
    zv = ZsetValue()
    for m, s in pairs:
        zv.set(m, s, (entries, 64))
    scores = [s for _, s in pairs]
    for value in (-inf, inf, 0.0):
        for right in (False, True):
            want = (bisect.bisect_right if right else bisect.bisect_left)(scores, value)
            assert zv.bound(value, right, False) == want
    assert zv.span(0, 5) == pairs and zv.span(1, 4, True) == pairs[1:4][::-1]
    assert zv.rank(b"e") == 4 and zv.score(b"a") == -inf


def test_packed_run_with_long_and_empty_members() -> None:
    rnd = random.Random(7)
    sizes = [0, 1, 125, 126, 127, 128, 300]
    members = [bytes([97 + k]) * n for k, n in enumerate(sizes)]
    zv, model = ZsetValue(), {}
    for _ in range(300):
        m = rnd.choice(members)
        if rnd.random() < 0.6:
            s = float(rnd.randrange(3))
            assert zv.set(m, s, (128, 1000)) == (m not in model)
            model[m] = s
        else:
            assert zv.delete(m) == (m in model)
            model.pop(m, None)
        assert zv.encoding == "listpack"
        assert zv.pairs() == sorted(model.items(), key=lambda p: (p[1], p[0]))
        for m in members:
            assert zv.score(m) == model.get(m)
        assert zv.members_at(0, len(model)) == [m for m, _ in zv.pairs()]


def test_members_hidden_inside_other_members_or_scores_are_not_members() -> None:
    inner = [b"m", b"", b"ab"]
    outer = [b"z" + packed.encode(m) + b"z" for m in inner]
    tricky = struct.unpack("<d", b"\x00" + packed.encode(b"ab") + b"\x00\x01\x40")[0]
    zv = ZsetValue()
    for k, m in enumerate(outer):
        zv.set(m, float(k), (128, 64))
    zv.set(b"s", tricky, (128, 64))
    for m in inner:
        assert zv.score(m) is None and zv.rank(m) is None and zv.delete(m) is False
    zv.set(b"ab", 5.0, (128, 64))
    assert zv.score(b"ab") == 5.0 and zv.delete(b"ab") and zv.score(b"ab") is None
    assert [m for m, _ in zv.pairs()] == sorted(outer + [b"s"], key=lambda m: (zv.score(m), m))
