"""The keyspace read in parts while it changes (engine/keyspace/snapshot.py): whatever changes
come between the parts, replaying the parts in order gives the keyspace of the instant the
snapshot was made, never a later state and never a mix."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from topicsrv.clock import FakeClock
from topicsrv.engine import Engine
from topicsrv.engine.keyspace import hashes, lists, ops, zsets
from topicsrv.engine.keyspace import strings as kstrings
from topicsrv.engine.keyspace.scanorder import scan_hash
from topicsrv.engine.keyspace.snapshot import Snapshot

FUTURE = 4_102_444_800_000


def _engine() -> Engine:
    return Engine(FakeClock())


def _state(e: Engine) -> dict[str, Any]:
    ks = e.keyspace
    out: dict[str, Any] = {}
    for name, entry in ks.strings.items():
        out[name] = ("string", entry.value, ks.expiry.deadlines.get(name, 0), ks.enc.get(name, ""))
    for name, value in ks.colls.items():
        d = ks.expiry.deadlines.get(name, 0)
        if value.KIND == "list":
            out[name] = ("list", list(value), d)
        elif value.KIND == "zset":
            out[name] = ("zset", value.pairs(), d, value.encoding)
        else:
            out[name] = ("hash", dict(value.items()), d, sorted(value.ttl_pairs()))
    return out


def _replay(parts: list[ops.Op]) -> dict[str, Any]:
    fresh = _engine()
    for part in parts:
        fresh.keyspace.apply(ops.decode(ops.encode(part)))  # through the codec, as the file
    return _state(fresh)


def _fill(e: Engine, strings: int, big: int) -> None:
    ks = e.keyspace
    kstrings.put(ks, [(f"s{i}", b"v%d" % i) for i in range(strings)])
    kstrings.set_deadline(ks, "s1", FUTURE, False, False, False, False)
    lists.push(ks, "biglist", [b"e%d" % i for i in range(big)], left=False, only_existing=False)
    lists.push(ks, "small", [b"a", b"b"], left=False, only_existing=False)
    hashes.hset(ks, "bighash", [(b"f%d" % i, b"x%d" % i) for i in range(big)])
    hashes.hset(ks, "h", [(b"a", b"1")])
    zsets.zadd(ks, "bigzset", [(float(i % 9), b"m%d" % i) for i in range(big + 150)])


# a change of the keyspace: (what, key index, value)
_CHANGE = st.tuples(st.sampled_from(["set", "del", "rpush", "lpop", "hset", "hdel", "expire", "flush",
                                     "newlist", "zadd", "zpop"]),
                    st.integers(0, 40), st.binary(max_size=4))
_KEYS = ["biglist", "bighash", "small", "h", "bigzset"]


def _do(e: Engine, what: str, i: int, v: bytes) -> None:
    ks = e.keyspace
    name = _KEYS[i % len(_KEYS)] if i % 3 == 0 else f"s{i}"
    kind = ks.kind(name)
    if what == "set":
        kstrings.put(ks, [(name, v)])
    elif what == "del":
        kstrings.delete(ks, [name])
    elif what == "expire" and kind is not None:
        kstrings.set_deadline(ks, name, FUTURE + i, False, False, False, False)
    elif what == "flush" and i == 7:
        ks.commit([("f",)])
    elif what in ("rpush", "newlist") and kind in (None, "list"):
        lists.push(ks, name if what == "rpush" else f"n{i}", [v, v], left=False, only_existing=False)
    elif what == "lpop" and kind == "list":
        lists.pop(ks, name, 3, True)
    elif what == "hset" and kind in (None, "hash"):
        hashes.hset(ks, name, [(b"f%d" % i, v), (b"new", v)])
    elif what == "hdel" and kind == "hash":
        hashes.hdel(ks, name, [b"f%d" % j for j in range(i, i + 5)])
    elif what == "zadd" and kind in (None, "zset"):
        zsets.zadd(ks, name, [(float(i), v), (-1.0, b"m%d" % i)])
    elif what == "zpop" and kind == "zset":
        zsets.pop(ks, name, 3, i % 2 == 0)


@settings(max_examples=60, deadline=None)
@given(units=st.integers(1, 40), steps=st.lists(st.tuples(st.integers(0, 3), _CHANGE), max_size=40))
def test_the_parts_replay_to_the_keyspace_of_the_instant(units: int, steps: list[Any]) -> None:
    e = _engine()
    _fill(e, strings=60, big=100)
    instant = _state(e)
    snap = Snapshot(e.keyspace)
    e.keyspace.saving = snap
    parts: list[ops.Op] = []
    for reads, (what, i, v) in steps:
        for _ in range(reads):
            part = snap.next_part(units)
            if part is not None:
                parts.append(part)
        _do(e, what, i, v)
    while (part := snap.next_part(units)) is not None:
        parts.append(part)
        _do(e, "hset", 3, b"late")  # changes between the last parts too
    e.keyspace.saving = None
    assert _replay(parts) == instant


def test_a_part_never_holds_more_than_its_units() -> None:
    e = _engine()
    _fill(e, strings=5000, big=20_000)
    snap = Snapshot(e.keyspace)
    e.keyspace.saving = snap
    sizes = []
    while (part := snap.next_part(256)) is not None:
        n = 0
        for ch in part:
            n += len(ch[3]) if ch[0] == "c" else len(ch[4]) if ch[0] == "L" else \
                len(ch[2]) if ch[0] == "H" else 1
        sizes.append(n)
    assert max(sizes) <= 256 + 2  # the flush and the topics' TTLs ride along
    assert sum(sizes) >= 5000 + 2 * 20_000


def test_keys_kept_before_the_walk_reaches_them_cost_one_image_each() -> None:
    """A key changed many times before the walk reaches it keeps one image; a key read already
    keeps none."""
    e = _engine()
    _fill(e, strings=3000, big=10)
    snap = Snapshot(e.keyspace)
    e.keyspace.saving = snap
    snap.next_part(1000)
    for _ in range(5):
        kstrings.put(e.keyspace, [(f"s{i}", b"new") for i in range(3000)])
    unread = {f"s{i}" for i in range(3000) if scan_hash(f"s{i}") >= snap.cursor}
    assert set(snap.kept) == unread and 1500 < len(unread) < 2500
    assert all(img[2] != b"new" for img in snap.kept.values())


def test_a_list_resumes_from_any_element() -> None:
    """The piece of a big list written after a freeze starts at the right element."""
    e = _engine()
    lists.push(e.keyspace, "l", [b"%d" % i for i in range(3000)], left=False, only_existing=False)
    lv = e.keyspace.colls["l"]
    for start in (0, 1, 127, 128, 1500, 2999, 3000):
        assert list(lv.iter_from(start)) == [b"%d" % i for i in range(start, 3000)]
