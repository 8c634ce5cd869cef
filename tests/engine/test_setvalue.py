"""The set value's packed run (engine/keyspace/setvalue.py): a member whose packed bytes
appear inside another member is found only where it really is."""

from __future__ import annotations

import random

from topicsrv.engine.keyspace import packed
from topicsrv.engine.keyspace.setvalue import SetValue


def test_members_hidden_inside_other_members_are_not_members() -> None:
    inner = [b"m", b"", b"ab", b"x" * 130]
    outer = [b"z" + packed.encode(m) + b"z" for m in inner] + [packed.encode(m) for m in inner]
    rnd = random.Random(3)
    for _ in range(50):
        sv, model = SetValue(), set()
        for m in rnd.sample(outer, len(outer)):
            sv.add(m, (512, 128, 1000))
            model.add(m)
        for m in inner:
            assert (m in sv) is False
        assert sv.encoding == "hashtable" and sv.table is None  # a packed run
        for m in rnd.sample(inner + outer, 5):
            if rnd.random() < 0.5:
                assert sv.add(m, (512, 128, 1000)) == (m not in model)
                model.add(m)
            else:
                assert sv.remove(m) == (m in model)
                model.discard(m)
            assert sorted(sv) == sorted(model)
            assert all((m in sv) == (m in model) for m in inner + outer)


def test_intsets_widen_as_redis_and_answer_like_a_sorted_model() -> None:
    rnd = random.Random(5)
    edges = [0, 1, -1, 0x7FFF, 0x8000, -0x8000, -0x8001, 0x7FFFFFFF, 0x80000000,
             -0x80000000, -0x80000001, (1 << 63) - 1, -(1 << 63)]
    for _ in range(40):
        sv, model = SetValue(), set()
        for _ in range(60):
            n = rnd.choice(edges) if rnd.random() < 0.3 else rnd.randrange(-40, 40)
            m = b"%d" % n
            if rnd.random() < 0.7:
                assert sv.add(m) == (n not in model)
                model.add(n)
            else:
                assert sv.remove(m) == (n in model)
                model.discard(n)
            assert sv.encoding == "intset"
            assert list(sv) == [b"%d" % k for k in sorted(model)] and len(sv) == len(model)
            widest = max((2 if -0x8000 <= k <= 0x7FFF else 4 if -(1 << 31) <= k < (1 << 31)
                          else 8) for k in model) if model else 2
            assert sv.nbytes >= widest * len(model)  # never narrower than its widest member
            assert all((b"%d" % k in sv) for k in model) and b"07" not in sv
    sv = SetValue.of([b"1", b"2", b"70000"])
    assert sv.nbytes == 12 and sv.add(b"x") and sv.encoding == "hashtable"
    assert sorted(sv) == sorted([b"1", b"2", b"70000", b"x"])


def test_a_big_sets_random_pool_keeps_one_entry_per_member_and_is_rarely_rebuilt() -> None:
    rnd = random.Random(11)
    limits = (4, 4, 64)
    sv = SetValue.of([b"m%d" % i for i in range(1000)], limits)
    table = sv.table
    assert table is not None
    sv.pick()
    builds = 0
    pool = table.pool
    for _ in range(3000):  # a work queue on a set: adds and pops interleaved
        if rnd.random() < 0.5:
            sv.add(b"m%d" % rnd.randrange(1500), limits)
        else:
            sv.remove(sv.pick())
        builds += table.pool is not pool
        pool = table.pool
        assert pool is not None
        live = [m for m in pool if m in table]
        assert sorted(live) == sorted(table)  # every member once: draws stay uniform
    assert builds <= 3  # about once per set-size of removals (O(1) amortized), not per add


def test_the_access_stamp_rides_in_the_run_through_every_change_and_encoding() -> None:
    """Rule 4: a small set's one slot holds its run, whose header carries the access stamp;
    the stamp survives adds, removes, widening, conversion to a packed run and to a Table,
    and a copy; a stamp in the same second leaves the run as it is."""
    sv = SetValue()
    assert sv.second == 0 and len(sv) == 0 and sv.encoding == "intset"
    sv.second = 1_700_000_000
    run = sv.data
    sv.second = 1_700_000_000
    assert sv.data is run  # the same second: nothing written
    for members, encoding in (([b"1", b"-5"], "intset"), ([b"70000"], "intset"),
                              ([b"x"], "hashtable"), ([b"y" * 100], "hashtable")):
        sv.add_many(members)
        assert sv.second == 1_700_000_000 and sv.encoding == encoding
        assert sv.copy().second == 1_700_000_000
    assert sv.table is not None and sorted(sv) == sorted(
        [b"-5", b"1", b"70000", b"x", b"y" * 100])
    small = SetValue.of([b"a", b"b", b"c"])
    small.second = 42
    assert small.remove(b"b") and small.second == 42 and sorted(small) == [b"a", b"c"]
    assert len(small) == 2 and small.nbytes == packed.size(b"a") + packed.size(b"c")
    ints = SetValue.of([b"3", b"1", b"2"])
    ints.second = 1 << 40  # past 2106: clamped, never an error
    assert ints.second == 0xFFFFFFFF and ints.remove(b"2") and list(ints) == [b"1", b"3"]
    assert ints.nbytes == 4 and b"3" in ints and b"2" not in ints
