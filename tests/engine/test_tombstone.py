"""The Tombstone value (engine/log/tombstone.py): one shape on every wire, reasons from one table."""

from __future__ import annotations

import pytest

from topicsrv.engine.log import tombstone as tb
from topicsrv.engine.log.entries import parse_entry
from topicsrv.engine.log.tombstone import FIELDS, REASONS, Tombstone


def make(reason: str = "cap") -> Tombstone:
    return Tombstone(gap_from=4, gap_to=10, reason=reason, missed_estimate=7, earliest_seq=11,
                     head_seq=13, ts=1700000000123)


def test_json_and_resp_carry_the_same_fields_and_values() -> None:
    t = make()
    assert list(t.to_json()) == list(FIELDS)
    ts, seq, pairs = parse_entry(t.resp_entry())
    assert (ts, seq) == (t.ts, t.resume_after) == (1700000000123, 10)
    assert pairs[:2] == [b"$type", b"tombstone"]
    assert {pairs[i].decode(): pairs[i + 1].decode() for i in range(2, len(pairs), 2)} == {
        k: str(v) for k, v in t.to_json().items()}


def test_reasons_come_from_one_table() -> None:
    assert set(REASONS) == {"cap", "ttl", "mixed", "recreated", "lost", "source_trim", "failover"}
    with pytest.raises(ValueError, match="unknown tombstone reason"):
        make("bogus")


def test_adding_a_reason_is_one_row(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(REASONS, "another", tb.Reason("another", False, "test"))
    t = make("another")
    assert t.to_json()["reason"] == "another" and t.at_connect() is t


def test_source_trim_is_reported_as_itself_at_connect() -> None:
    t = make("source_trim")
    assert t.to_json()["reason"] == "source_trim" and t.at_connect() is t


def test_only_capacity_loss_gets_the_from_seq_too_old_variant_at_connect() -> None:
    """The reason stays the gap's own on every path; the connect-time variant is its own field."""
    for name, row in REASONS.items():
        t = make(name)
        extra = {"variant": tb.FROM_SEQ_TOO_OLD} if row.at_connect else {}
        assert t.at_connect().to_json() == {**t.to_json(), **extra}
        assert t.at_connect().to_json()["reason"] == name
