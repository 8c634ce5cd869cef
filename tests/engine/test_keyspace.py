"""The keyspace (topicsrv/engine/keyspace): strings beside topics, one expiry index, WRONGTYPE
both ways, one journaled operation per mutation, Redis's value rules; on a fake clock."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from topicsrv.clock import FakeClock
from topicsrv.engine import Engine
from topicsrv.engine.journal import NullJournal
from topicsrv.engine.keyspace import ops, values
from topicsrv.engine.keyspace import strings as ks_ops
from topicsrv.engine.keyspace.expiry import ExpiryIndex
from topicsrv.engine.log.records import prepare_json
from topicsrv.errors import TopicsError
from topicsrv.resp.commands.lcs import lcs_reply


class Recording(NullJournal):
    def __init__(self) -> None:
        self.ops: list[list[tuple[Any, ...]]] = []
        self.dropped: list[str] = []

    def keyspace_changed(self, op: list[tuple[Any, ...]]) -> None:  # type: ignore[override]
        self.ops.append(list(op))

    def topic_dropped(self, name: str, epoch: int) -> None:
        self.dropped.append(name)


def _engine() -> tuple[Engine, FakeClock, Recording]:
    clock = FakeClock()
    journal = Recording()
    return Engine(clock, journal), clock, journal


def test_set_get_and_one_operation_per_mutation() -> None:
    e, _, j = _engine()
    ks = e.keyspace
    ks_ops.put(ks, [("a", b"1"), ("b", b"x")])
    assert ks.get("a") == b"1" and ks.get("b") == b"x"
    assert len(j.ops) == 1 and [c[0] for c in j.ops[0]] == ["s", "s"]
    ks_ops.incr_by(ks, "a", 41)
    assert ks.get("a") == b"42" and j.ops[-1] == [("s", "a", b"42", 0, "")]
    assert ks_ops.delete(ks, ["a", "a", "nope"])[0] == 1
    assert j.ops[-1] == [("d", "a")] and len(j.ops) == 3


def test_lazy_expiry_on_the_fake_clock_journals_the_delete() -> None:
    e, clock, j = _engine()
    ks = e.keyspace
    ks_ops.put(ks, [("k", b"v")], clock.now_ms() + 1000)
    clock.advance(999)
    assert ks.get("k") == b"v"
    clock.advance(1)
    assert ks.get("k") is None and ks.kind("k") is None
    assert j.ops[-1] == [("d", "k")] and ks.stats["expired_keys"] == 1
    assert len(ks.expiry) == 0 and ks.size() == 0


def test_active_expiry_is_bounded_per_tick() -> None:
    e, clock, _ = _engine()
    ks = e.keyspace
    for i in range(500):
        ks_ops.put(ks, [(f"k{i}", b"v")], clock.now_ms() + 10)
    ks_ops.put(ks, [("later", b"v")], clock.now_ms() + 10_000)
    clock.advance(10)
    assert ks.active_expire() == 200  # ACTIVE_BUDGET heap pops
    assert len(ks.strings) == 301
    assert ks.active_expire() == 200 and ks.active_expire() == 100 and ks.active_expire() == 0
    assert list(ks.strings) == ["later"]


def test_expiry_index_skips_stale_heap_pairs() -> None:
    idx = ExpiryIndex()
    idx.set("a", 5)
    idx.set("a", 50)  # the (5, a) pair is stale now
    idx.set("b", 7)
    idx.clear("b")
    assert idx.due(10, 100) == [] and idx.due(50, 100) == ["a"]


def test_topic_expiry_deletes_it_as_del() -> None:
    e, clock, j = _engine()
    ks = e.keyspace
    e.write("t", [prepare_json({"data": 1})])
    epoch = e.topics["t"].epoch
    assert ks_ops.set_deadline(ks, "t", clock.now_ms() + 100, False, False, False, False)[0] == 1
    assert j.ops[-1] == [("x", "t", clock.now_ms() + 100, epoch)]
    clock.advance(100)
    assert ks.kind("t") is None and "t" not in e.topics and j.dropped == ["t"]
    e.write("t", [prepare_json({"data": 2})])  # a new incarnation: no TTL, a new epoch
    assert e.topics["t"].epoch == epoch + 1 and ks.deadline("t") is None


def test_a_snapshot_replays_values_ttls_encodings_and_topic_ttls() -> None:
    """The checkpoint's snapshot (Keyspace.snapshot) applied to an empty keyspace gives the
    same strings, string TTLs, encoding overrides and topic TTLs; without any TTL or override
    it is a flush and one plain put per key."""
    e, clock, _ = _engine()
    ks = e.keyspace
    ks_ops.put(ks, [("plain", b"v"), ("n", b"12")])
    assert ks.snapshot() == [("f",), ("s", "plain", b"v", 0, ""), ("s", "n", b"12", 0, "")]
    ks_ops.put(ks, [("ttl", b"t")], clock.now_ms() + 5000)
    ks.commit([("s", "n", b"12", 0, "raw")])  # an APPEND/SETRANGE-style override
    e.write("t", [prepare_json({"data": 1})])
    ks_ops.set_deadline(ks, "t", clock.now_ms() + 9000, False, False, False, False)
    snap = ks.snapshot()
    e2 = Engine(clock, NullJournal())
    e2.write("t", [prepare_json({"data": 1})])  # the topic itself comes from its own frames
    e2.keyspace.apply(ops.decode(ops.encode(snap)))
    k2 = e2.keyspace
    assert {n: k2.value(n) for n in k2.strings} == {"plain": b"v", "n": b"12", "ttl": b"t"}
    assert k2.encoding("n") == "raw" and k2.encoding("plain") == "embstr"
    assert k2.deadline("ttl") == clock.now_ms() + 5000 and k2.deadline("t") == clock.now_ms() + 9000
    assert k2.deadline("plain") is None


def test_del_of_a_topic_clears_its_ttl() -> None:
    e, clock, _ = _engine()
    e.write("t", [prepare_json({"data": 1})])
    ks_ops.set_deadline(e.keyspace, "t", clock.now_ms() + 100, False, False, False, False)
    assert ks_ops.delete(e.keyspace, ["t"])[0] == 1
    e.write("t", [prepare_json({"data": 1})])
    clock.advance(1000)
    assert e.keyspace.kind("t") == "stream"


def test_wrongtype_both_ways() -> None:
    e, _, _ = _engine()
    ks = e.keyspace
    ks_ops.put(ks, [("s", b"v")])
    e.write("t", [prepare_json({"data": 1})])
    with pytest.raises(TopicsError) as exc:
        e.write("s", [prepare_json({"data": 1})])
    assert exc.value.resp_line() == "WRONGTYPE Operation against a key holding the wrong kind of value"
    assert exc.value.status == 409 and exc.value.code == "key_type_conflict"
    with pytest.raises(TopicsError):
        e.put_topic("s", {})
    with pytest.raises(TopicsError) as exc:
        ks.get("t")
    assert exc.value.resp_prefix == "WRONGTYPE"
    with pytest.raises(TopicsError):
        ks_ops.incr_by(ks, "t", 1)


def test_set_over_a_topic_replaces_it() -> None:
    e, _, j = _engine()
    e.write("t", [prepare_json({"data": 1})])
    ks_ops.put(e.keyspace, [("t", b"now a string")])
    assert "t" not in e.topics and e.keyspace.get("t") == b"now a string" and j.dropped == ["t"]


def test_rename_and_copy_keep_ttl_and_refuse_topics() -> None:
    e, clock, _ = _engine()
    ks = e.keyspace
    ks_ops.put(ks, [("a", b"v")], clock.now_ms() + 500)
    assert ks_ops.rename(ks, "a", "b", False)[0] == 1
    assert ks.get("a") is None and ks.deadline("b") == clock.now_ms() + 500
    assert ks_ops.copy(ks, "b", "c", False)[0] == 1 and ks.deadline("c") == clock.now_ms() + 500
    e.write("t", [prepare_json({"data": 1})])
    with pytest.raises(TopicsError) as exc:
        ks_ops.rename(ks, "t", "u", False)
    assert "RENAME of a topic" in exc.value.message


@pytest.mark.parametrize(("value", "enc"), [
    (b"0", "int"), (b"-9223372036854775808", "int"), (b"9223372036854775808", "embstr"),
    (b"01", "embstr"), (b"-0", "embstr"), (b"+1", "embstr"), (b" 1", "embstr"),
    (b"x" * 44, "embstr"), (b"x" * 45, "raw"),
])
def test_encoding(value: bytes, enc: str) -> None:
    assert values.encoding(value) == enc


@pytest.mark.parametrize(("start", "incr", "out"), [
    (b"0", b"0.1", b"0.1"), (b"0.1", b"0.2", b"0.3"), (b"10.5", b"0.1", b"10.6"),
    (b"3.0e3", b"200", b"3200"), (b"5.0e3", b"2.0e2", b"5200"), (b"1", b"-1", b"0"),
    (b"0", b"1.5e10", b"15000000000"),
])
def test_incrbyfloat_formats_as_redis(start: bytes, incr: bytes, out: bytes) -> None:
    a, b = values.parse_ld(start), values.parse_ld(incr)
    assert a is not None and b is not None
    total = values.add_ld(a, b)
    assert total is not None and values.format_ld(total) == out


def test_floats_redis_refuses() -> None:
    for bad in (b"", b" 1", b"1 ", b"abc", b"nan", b"1e"):
        assert values.parse_ld(bad) is None
    big = values.parse_ld(b"1e4932")
    assert big is not None and values.add_ld(big, big) is None  # overflow to inf


def test_floats_out_of_long_double_range_are_not_valid_floats() -> None:
    """string2ld refuses what strtold answers ERANGE for: an overflow, or a nonzero input that
    rounds to zero (a subnormal is accepted); a zero with any exponent is zero. Answered from
    the exponent alone, so a huge one costs nothing (1e10000000 once took 10 s of CPU)."""
    import time

    t = time.perf_counter()
    for bad in (b"1e5000", b"-1e5000", b"1e-5000", b"1e-4952", b"1e999999999", b"1e-999999999",
                b"0x1p20000", b"0x1p-20000", b"0x1p16384", b"0x1p-16446", b"0x1p99999999999",
                b"0x", b"0x1 ", b"0x1p", b"1." + b"0" * 5118):  # 5120 chars: too long
        assert values.parse_ld(bad) is None, bad
    assert time.perf_counter() - t < 0.5
    for ok, text in ((b"0e99999", b"0"), (b"-0.0e-9999999", b"0"), (b"0x0p99999999999", b"0"),
                     (b"0x10", b"16"), (b"-0x1.8p1", b"-3"), (b"0x.8", b"0.5"),
                     (b"1e-4950", b"0"), (b"1." + b"0" * 5117, b"1")):
        v = values.parse_ld(ok)
        assert v is not None and not isinstance(v, float), ok
        assert values.format_ld(v) == text
    assert values.parse_ld(b"0x1p-16445") not in (None, 0)  # the smallest subnormal
    assert values.parse_ld(b"0x1.fffffffffffffffep16383") not in (None, 0)  # LDBL_MAX


def test_append_setrange_limits() -> None:
    e, _, _ = _engine()
    ks = e.keyspace
    assert ks_ops.append(ks, "a", b"123", 10)[0] == 3 and ks.encoding("a") == "int"
    assert ks_ops.append(ks, "a", b"4", 10)[0] == 4 and ks.encoding("a") == "raw"
    with pytest.raises(TopicsError) as exc:
        ks_ops.append(ks, "a", b"x" * 7, 10)
    assert exc.value.message == "string exceeds maximum allowed size (proto-max-bulk-len)"
    assert ks_ops.setrange(ks, "b", 3, b"hi", 10)[0] == 5 and ks.get("b") == b"\0\0\0hi"
    assert ks_ops.setrange(ks, "none", 0, b"", 10) == (0, None) and ks.kind("none") is None


def test_getrange_table() -> None:
    v = b"This is a string"
    assert ks_ops.getrange(v, 0, 3) == b"This"
    assert ks_ops.getrange(v, -3, -1) == b"ing"
    assert ks_ops.getrange(v, 0, -1) == v
    assert ks_ops.getrange(v, 10, 100) == b"string"
    assert ks_ops.getrange(v, -1, -5) == b"" and ks_ops.getrange(b"", 0, -1) == b""


def test_lcs_as_redis() -> None:
    assert lcs_reply(b"ohmytext", b"mynewtext", False, False, 0, False) == b"mytext"
    assert lcs_reply(b"ohmytext", b"mynewtext", True, False, 0, False) == 6
    assert lcs_reply(b"ohmytext", b"mynewtext", False, True, 4, True) == {
        b"matches": [[[4, 7], [5, 8], 4]], b"len": 6}


def test_ops_codec_round_trip_and_damage() -> None:
    op: ops.Op = [("f",), ("s", "k\xff", b"\x00bin", 123, "raw"), ("x", "t", 9, 2), ("d", "k\xff")]
    assert ops.decode(ops.encode(op)) == op
    with pytest.raises(ValueError):
        ops.decode(ops.encode(op)[:-1])


@pytest.mark.parametrize("n", [0, 1, 1023, 1024, 70_000])
def test_ops_put_layout_is_the_documented_one_across_the_length_table(n: int) -> None:
    """The on-disk layout of a put (ops.py Rule 2) does not depend on whether its lengths come
    from the small-length table or are packed: kind, u32 key length, key, u64 deadline, u8
    encoding, u32 value length, value."""
    import struct

    key, value = "k" * (n % 2000), b"v" * n
    for deadline, enc in ((0, ""), (1_700_000_000_123, "raw"), (5, "embstr")):
        want = (b"s" + struct.pack("<I", len(key)) + key.encode("latin-1")
                + struct.pack("<QBI", deadline, {"": 0, "raw": 1, "embstr": 2}[enc], n) + value)
        op: ops.Op = [("s", key, value, deadline, enc)]
        assert ops.encode(op) == want
        assert ops.decode(want) == op


def test_held_changes_reach_topic_listeners_only_for_topics() -> None:
    """engine/core.py Rules 3-4 at a release (a Lua script's writes): every held name is told
    to `listeners` once, in first-change order; `topic_listeners` (routers, the activity
    sampler) hear only the names a topic changed under, a string SET over a topic included."""
    e, _, _ = _engine()
    ks = e.keyspace
    heard: list[str] = []
    topics_heard: list[str] = []
    e.listen(heard.append)  # no interest: hears every name
    e.topic_listeners.append(topics_heard.append)
    e.write("t", [prepare_json({"data": 1})])
    e.write("r", [prepare_json({"data": 1})])
    heard.clear()
    topics_heard.clear()
    e.hold_changes()
    ks_ops.put(ks, [("s", b"1")])
    e.write("t", [prepare_json({"data": 2})])
    ks_ops.put(ks, [("s", b"2"), ("r", b"over the topic")])  # r: a topic replaced by a string
    ks_ops.put(ks, [("t", b"over t")])  # t changed as a topic first, then as a string
    assert heard == [] and topics_heard == []
    e.release_changes()
    assert heard == ["s", "t", "r"]
    assert topics_heard == ["t", "r"]


def _string2ll(raw: bytes) -> int | None:
    """Redis's string2ll, spelled out: an optional '-', then digits with no leading zero
    (or the single "0"), within a signed 64-bit integer."""
    text = raw.decode("latin-1")
    body = text[1:] if text.startswith("-") else text
    if not body or not all("0" <= c <= "9" for c in body) or (body[0] == "0" and text != "0"):
        return None
    v = int(text)
    return v if -(1 << 63) <= v < (1 << 63) else None


@given(st.one_of(st.binary(max_size=22),
                 st.integers(-(1 << 64), 1 << 64).map(lambda n: str(n).encode()),
                 st.from_regex(rb"\A-?[0-9]{1,21}\Z")))
@example(b"1:")
@example(b"9/")
@example(b"10 ")
@example(b"999999999999999999")
@example(b"9223372036854775808")
@example(b"-0")
@example(b"01")
def test_parse_i64_is_string2ll(raw: bytes) -> None:
    """Every integer argument (LIMIT, counts, INCRBY): the canonical decimal form only, as
    Redis (the short positive form is read byte by byte, the rest through int())."""
    assert values.parse_i64(raw) == _string2ll(raw)
