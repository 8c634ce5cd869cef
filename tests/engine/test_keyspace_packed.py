"""The packed runs and the list value (engine/keyspace/packed.py, quicklist.py, hashvalue.py) against a Python
list, for every operation, across node splits and element sizes on both sides of each
length-prefix boundary."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from topicsrv.engine.keyspace import packed
from topicsrv.engine.keyspace.quicklist import TUPLE_NODES, ListValue, node_limits

SIZES = [0, 1, 125, 126, 127, 128, 300, 70_000]
element = st.one_of(st.binary(max_size=20), st.sampled_from(SIZES).map(lambda n: b"x" * n))


@given(st.lists(element, max_size=40))
def test_a_run_reads_the_same_forward_and_back(items: list[bytes]) -> None:
    run = bytearray(packed.encode_many(items))
    assert list(packed.values(run)) == items
    assert list(packed.values_back(run)) == items[::-1]
    assert len(run) == sum(packed.size(v) for v in items)
    for i in range(len(items) + 1):
        pos = packed.offset(run, len(items), i)
        assert list(packed.values(run, pos)) == items[i:]


def test_an_element_costs_two_bytes_under_127() -> None:
    assert packed.size(b"abc") == 5
    assert packed.size(b"x" * 126) == 128 and packed.size(b"x" * 127) == 133


ops = st.one_of(
    st.tuples(st.just("lpush"), element),
    st.tuples(st.just("rpush"), element),
    st.tuples(st.just("lpop"), st.integers(0, 3)),
    st.tuples(st.just("rpop"), st.integers(0, 3)),
    st.tuples(st.just("splice"), st.integers(0, 60), st.integers(0, 5), st.lists(element, max_size=4)),
)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from([-1, -2, 1, 2, 5]), st.lists(ops, max_size=60))
def test_the_list_value_is_a_list(fill: int, steps: list[tuple]) -> None:  # type: ignore[type-arg]
    lv, model = ListValue(fill), []  # type: ignore[var-annotated]
    max_count, max_bytes = node_limits(fill)
    for step in steps:
        kind = step[0]
        if kind == "lpush":
            lv.push_head(step[1])
            model.insert(0, step[1])
        elif kind == "rpush":
            lv.push_tail(step[1])
            model.append(step[1])
        elif kind == "lpop":
            for _ in range(min(step[1], len(model))):
                assert lv.pop_head() == model.pop(0)
        elif kind == "rpop":
            for _ in range(min(step[1], len(model))):
                assert lv.pop_tail() == model.pop()
        else:
            pos = min(step[1], len(model))
            removed = lv.splice(pos, step[2], step[3])
            assert removed == model[pos:pos + step[2]]
            model[pos:pos + step[2]] = step[3]
        assert len(lv) == len(model)
        assert list(lv) == model and list(lv.reversed()) == model[::-1]
        assert lv.nbytes == sum(len(n.run) for n in lv.nodes)
        assert all(n.count > 0 for n in lv.nodes)
        assert all(n.count <= max_count for n in lv.nodes)
        assert all(n.count == 1 or len(n.run) <= max_bytes for n in lv.nodes)
        nodes = len(lv.nodes)  # quicklist.py Rule 4's shapes
        assert (lv.one is not None) == (nodes == 1)
        assert type(lv.many) is (type(None) if nodes < 2 else tuple if nodes <= TUPLE_NODES else list)
        if model:
            assert list(lv.iter_from(len(model) // 2)) == model[len(model) // 2:]
    for i in range(-len(model) - 1, len(model) + 1):
        want = model[i] if -len(model) <= i < len(model) else None
        assert lv.get(i) == want
    if model:
        assert lv.range(1, len(model) - 2) == model[1:len(model) - 1]


hash_ops = st.one_of(
    st.tuples(st.just("set"), st.binary(max_size=3), element),
    st.tuples(st.just("del"), st.binary(max_size=3)),
)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from([(128, 64), (2, 64), (128, 1)]), st.lists(hash_ops, max_size=60))
def test_the_hash_value_is_a_dict(limits: tuple[int, int], steps: list[tuple]) -> None:  # type: ignore[type-arg]
    from topicsrv.engine.keyspace.hashvalue import HashValue

    hv, model = HashValue(), {}  # type: ignore[var-annotated]
    for step in steps:
        if step[0] == "set":
            assert hv.set(step[1], step[2], limits) == (step[1] not in model)
            model[step[1]] = step[2]
        else:
            assert hv.delete(step[1]) == (step[1] in model)
            model.pop(step[1], None)
        assert len(hv) == len(model) and dict(hv.items()) == model
        assert list(hv.items()) == list(model.items())  # insertion order, both encodings
        for f in model:
            assert hv.get(f) == model[f]
        small = len(model) <= limits[0] and all(len(f) <= limits[1] and len(v) <= limits[1]
                                                for f, v in model.items())
        if hv.encoding == "listpack":
            assert small
            assert hv.nbytes == len(hv.data)


def test_field_deadline_changes_round_trip_the_codec() -> None:
    """The "h" change and a whole hash with field deadlines ("c", code "e") decode as
    encoded (hash field expiry, hashexpiry.py Rule 2)."""
    from topicsrv.engine.keyspace import ops

    op = [("h", "k", [(b"a", 1 << 40), (b"\x00", 0)]),
          ("c", "k", "hash", [(b"a", b"1"), (b"b", b"")], 5, (7, 8), [(b"a", 123)]),
          ("c", "j", "hash", [(b"a", b"1")], 0, (0, 0))]
    assert ops.decode(ops.encode(op)) == op
