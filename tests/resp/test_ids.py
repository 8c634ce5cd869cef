"""Stream IDs as positions: seq authoritative, seq 0 / bare ms = time, Redis's `(` rules."""

from __future__ import annotations

import pytest

from topicsrv.clock import FakeClock
from topicsrv.engine import Engine
from topicsrv.engine.log.records import prepare_fields
from topicsrv.resp import ids
from topicsrv.resp.commands.base import Err


@pytest.fixture
def topic():  # type: ignore[no-untyped-def]
    clock = FakeClock(1000)
    e = Engine(clock=clock)
    for ts in (1000, 1000, 2000, 3000):  # seqs 1..4
        clock.set(ts)
        e.write("s", [prepare_fields([b"f", b"v"])])
    return e.get("s")


def test_seq_part_is_authoritative(topic) -> None:  # type: ignore[no-untyped-def]
    assert ids.range_bounds(topic, b"999-2", b"1-3") == (2, 3)
    assert ids.read_position(topic, b"5-2") == 2


def test_time_positions(topic) -> None:  # type: ignore[no-untyped-def]
    assert ids.range_bounds(topic, b"2000", b"2000") == (3, 3)
    assert ids.range_bounds(topic, b"2000-0", b"3000-0") == (3, 3)  # end ms-0: ts < 3000
    assert ids.range_bounds(topic, b"1000", b"+") == (1, ids.U64)
    assert ids.read_position(topic, b"2000") == 2
    assert ids.read_position(topic, b"2000-0") == 2


def test_specials(topic) -> None:  # type: ignore[no-untyped-def]
    assert ids.range_bounds(topic, b"-", b"+") == (0, ids.U64)
    assert ids.read_position(topic, b"$") == 4
    assert ids.read_position(None, b"$") == 0
    assert ids.read_position(topic, b"0") == 0
    assert ids.read_position(topic, b"0-0") == 0
    with pytest.raises(Err, match="The > ID can be specified only"):
        ids.read_position(topic, b">")


def test_exclusive_ranges(topic) -> None:  # type: ignore[no-untyped-def]
    assert ids.range_bounds(topic, b"(1000-1", b"(3000-4") == (2, 3)
    assert ids.range_bounds(topic, b"(2000", b"+")[0] == 3
    with pytest.raises(Err, match="invalid start ID for the interval"):
        ids.range_bounds(topic, b"(18446744073709551615-18446744073709551615", b"+")
    with pytest.raises(Err, match="invalid end ID for the interval"):
        ids.range_bounds(topic, b"-", b"(0-0")
    for bad in (b"(-", b"(+", b"abc", b"1-x", b"-1", b"18446744073709551616"):
        with pytest.raises(Err, match="Invalid stream ID"):
            ids.range_bounds(topic, bad, b"+")


def test_record_seq() -> None:
    assert ids.record_seq(b"17-5") == 5
    assert ids.record_seq(b"17") == 0
