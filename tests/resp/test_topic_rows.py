"""TOPIC.ROWS (resp/commands/topic_rows.py): the read of TOPIC.DIFF, as columns."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
import redis
from hypothesis import given, settings
from hypothesis import strategies as st

from topicsrv.clock import FakeClock
from topicsrv.engine.log.entries import encode_entry, parse_entry
from topicsrv.resp.commands.topic_rows import columns, data_text

from .conftest import InProc


def _rows(c: redis.Redis, *args: Any) -> list[Any]:
    reply: list[Any] = c.execute_command("TOPIC.ROWS", *args)
    return reply


def test_columns_of_a_page(srv: tuple[InProc, FakeClock]) -> None:
    s, _ = srv
    c = redis.Redis(port=s.port, socket_timeout=10)
    c.execute_command("XADD", "rows", "*", "d", "1")
    c.execute_command("XADD", "rows", "NODE", "n1", "TAG", "t1", "*", "a", "x", "b", "y")
    c.execute_command("XADD", "rows", "*", "data", "[1,2]")
    c.execute_command("XADD", "rows", "*", "f", b"\xff")
    seqs, tss, nodes, tags, metas, datas, tomb, nxt, head = _rows(c, "rows", 0)
    assert seqs == [1, 2, 3, 4] and nxt == head == 4 and tomb is None
    assert all(isinstance(t, int) and t > 0 for t in tss)
    assert nodes == [None, b"n1", None, None] and tags == [None, b"t1", None, None]
    assert metas == [None] * 4
    assert [orjson.loads(d) for d in datas] == [
        {"d": "1"}, {"a": "x", "b": "y"}, [1, 2], {"$fields": [["f", {"$base64": "/w=="}]]}]
    seqs, *_rest, nxt, _head = _rows(c, "rows", 1, "LIMIT", 2)
    assert seqs == [2, 3] and nxt == 3


def test_a_loss_comes_first_as_the_diff_reports_it(srv: tuple[InProc, FakeClock]) -> None:
    s, _ = srv
    c = redis.Redis(port=s.port, socket_timeout=10)
    c.execute_command("TOPIC.CREATE", "rowscap", "CAP_RECORDS", "3")
    for i in range(6):
        c.execute_command("XADD", "rowscap", "*", "i", str(i))
    seqs, *_cols, tomb, nxt, head = _rows(c, "rowscap", 0)
    diff = c.execute_command("TOPIC.DIFF", "rowscap", 0)
    if not isinstance(diff, dict):
        diff = dict(zip(diff[0::2], diff[1::2], strict=True))
    assert tomb is not None and tomb[1:4] == [1, 3, b"cap"]
    assert seqs == [int(x) for x in diff[b"seqs"]] == [4, 5, 6] and nxt == head == 6


@pytest.mark.parametrize("args", [("rows",), ("rows", "x"), ("rows", "-1"), ("rows", "0", "LIMIT", "0"),
                                  ("rows", "0", "FOO")])
def test_bad_arguments_are_clear_errors(srv: tuple[InProc, FakeClock], args: tuple[str, ...]) -> None:
    s, _ = srv
    c = redis.Redis(port=s.port, socket_timeout=10)
    with pytest.raises(redis.ResponseError):
        _rows(c, *args)
    assert c.ping()


def test_a_missing_topic(srv: tuple[InProc, FakeClock]) -> None:
    s, _ = srv
    c = redis.Redis(port=s.port, socket_timeout=10)
    with pytest.raises(redis.ResponseError, match="does not exist|not found|no such"):
        _rows(c, "nosuch", 0)


def _slow_columns(blobs: list[bytes]) -> tuple[list[Any], ...]:
    """Rule 2 by parse_entry alone (what columns() did before Rule 3's split)."""
    out: tuple[list[Any], ...] = ([], [], [], [], [], [])
    for blob in blobs:
        ts, seq, pairs = parse_entry(blob)
        extra: dict[bytes, bytes] = {}
        for key in (b"$meta", b"$tag", b"$node"):
            if len(pairs) >= 2 and pairs[-2] == key:
                extra[key] = pairs[-1]
                pairs = pairs[:-2]
        for col, value in zip(out, (seq, ts, extra.get(b"$node"), extra.get(b"$tag"),
                                    extra.get(b"$meta"), data_text(pairs)), strict=True):
            col.append(value)
    return out


_ITEM = st.one_of(st.binary(max_size=12), st.sampled_from([b"\r\n", b"a\r\nb", b"data", b"$tag",
                                                             b"$node", b"$meta", b"*2", b"$3"]))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2**47), st.integers(1, 2**40),
                          st.lists(_ITEM, min_size=1, max_size=6).map(lambda xs: xs[:len(xs) // 2 * 2] or [b"f", b"v"])),
                min_size=1, max_size=8))
def test_the_split_reads_what_the_parse_reads(records: list[tuple[int, int, list[bytes]]]) -> None:
    """Rule 3: the one-split read of a one-field record and parse_entry agree on every record,
    CR LF inside a field or value and label-named fields included."""
    blobs = [encode_entry(ts, seq, items) for ts, seq, items in records]
    assert tuple(columns(blobs)) == _slow_columns(blobs)
