"""The keyspace's values, and a consumer group's pending entries, stay outside CPython's cyclic
GC in the compiled build (docs/decisions.md, "The keyspace's values outside the cyclic GC"): a
full collection walks every tracked object, so with 100,000 keys of each kind tracked it stalled
the loop for ~300 ms (docs/performance.md). A value holds data only (bytes, ints, floats and
containers of them), never a reference back, so `@mypyc_attr(acyclic=True)` classes are freed by
their reference count alone, as before."""

from __future__ import annotations

import gc

import pytest

from topicsrv import buildinfo
from topicsrv.clock import FakeClock
from topicsrv.engine import Engine
from topicsrv.engine.groups.delivery import Delivery
from topicsrv.engine.journal import NullJournal
from topicsrv.engine.keyspace import hashes, lists, sets, zsets
from topicsrv.engine.keyspace import strings as ks_strings

pytestmark = pytest.mark.skipif(
    buildinfo.mode() != "compiled",
    reason="pure-Python build: CPython tracks every instance of a class with __slots__ "
           "(the compiled build runs this test; `make test` runs both)")

KEYS = 2000


def _fill(e: Engine, n: int, tag: str) -> None:
    ks = e.keyspace
    for i in range(n):
        ks_strings.put(ks, [(f"s:{tag}:{i}", b"v" * 20)])
        lists.push(ks, f"l:{tag}:{i}", [b"a" * 30, b"b"], True, False)
        hashes.hset(ks, f"h:{tag}:{i}", [(b"f", b"v"), (b"g", b"w")])
        sets.sadd(ks, f"t:{tag}:{i}", [b"m1", b"m2"])
        sets.sadd(ks, f"i:{tag}:{i}", [b"1", b"2"])  # an intset
        zsets.zadd(ks, f"z:{tag}:{i}", [(1.0, b"a"), (2.5, b"b")])


def test_small_values_of_every_kind_are_not_tracked_by_the_gc() -> None:
    e = Engine(FakeClock(), NullJournal())
    _fill(e, 1, "x")
    ks = e.keyspace
    values = [ks.strings["s:x:0"], *(ks.colls[k] for k in ("l:x:0", "h:x:0", "t:x:0", "i:x:0", "z:x:0"))]
    assert [gc.is_tracked(v) for v in values] == [False] * 6
    lv = ks.colls["l:x:0"]
    assert lv.many is None and lv.one is not None and not gc.is_tracked(lv.one)


def test_a_big_hash_and_a_long_list_add_no_tracked_object_per_element() -> None:
    """A hash past hash-max-listpack-value is a plain dict of bytes (never tracked); a list of
    many nodes keeps one tracked list of them, the nodes themselves untracked."""
    e = Engine(FakeClock(), NullJournal())
    ks = e.keyspace
    hashes.hset(ks, "big", [(b"f%d" % i, b"v" * 100) for i in range(1000)])
    hv = ks.colls["big"]
    assert hv.encoding == "hashtable" and len(hv) == 1000
    assert not gc.is_tracked(hv) and not gc.is_tracked(hv.data)
    lists.push(ks, "long", [b"x" * 100] * 1000, False, False)
    lv = ks.colls["long"]
    assert lv.many is not None and len(lv.many) > 1 and sum(n.count for n in lv.many) == 1000
    assert not any(gc.is_tracked(n) for n in lv.many)
    gc.collect()  # a tuple of untracked nodes (quicklist.py Rule 4) is untracked once collected
    assert type(lv.many) is tuple and not gc.is_tracked(lv.many)


def test_the_tracked_objects_do_not_grow_with_the_keys() -> None:
    """Small keys of six kinds add no tracked object (the scan order's buckets are plain dicts
    of names too: scanorder.py Rule 5); with every value tracked it was 7 objects for the six
    keys, and a Python list for each list's nodes, and a bucket list per ~100 names."""
    e = Engine(FakeClock(), NullJournal())
    _fill(e, 10, "warm")  # the keyspace's own first allocations
    gc.collect()
    before = len(gc.get_objects())
    _fill(e, KEYS, "k")
    gc.collect()
    grown = len(gc.get_objects()) - before
    assert len(e.keyspace.strings) + len(e.keyspace.colls) == 6 * (KEYS + 10)
    assert grown <= KEYS // 100, f"{grown} tracked objects for {6 * KEYS} keys"


def test_a_pending_entry_is_not_tracked_by_the_gc() -> None:
    """A consumer group's PEL holds one Delivery per pending entry (groups/delivery.py)."""
    d = Delivery(7, 1700000000000, "alice", 5, 1)
    assert not gc.is_tracked(d) and d.idle(12) == 7 and "alice" in repr(d)
