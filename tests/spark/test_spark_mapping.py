"""The pure parts of the Spark connector: offsets, range splitting, the RESP<->data mapping.

These run without a JVM; the end-to-end behaviour is in test_spark_source.py.
"""

from __future__ import annotations

import json

import orjson
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from topicsrv.engine.log.records import data_to_fields, fields_to_data
from topicsrv.spark.client import Entry, Tombstone, parse_entry
from topicsrv.spark.options import (
    ReadOptions,
    limit_ranges,
    ordered,
    parse_offsets,
    split_ranges,
)
from topicsrv.spark.rows import data_text
from topicsrv.spark.writer import data_pairs

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)


@given(json_values)
def test_data_column_inverts_the_servers_http_to_resp_mapping(data: object) -> None:
    # {"data": "<JSON text>"} and the bare JSON value have the same RESP form (documented)
    assume(not (isinstance(data, dict) and list(data) == ["data"]))
    pairs = data_to_fields(data)  # how topicsrv shows an HTTP record over RESP
    assert json.loads(data_text(pairs)) == data


@given(json_values)
def test_sink_writes_what_the_source_reads_back(data: object) -> None:
    assume(not (isinstance(data, dict) and list(data) == ["data"]))
    text = json.dumps(data)
    pairs = [p.encode() if isinstance(p, str) else p for p in data_pairs(text)]
    assert json.loads(data_text(pairs)) == data


@given(st.lists(st.tuples(st.binary(max_size=6) | st.sampled_from([b"k", b"data"]),
                         st.binary(max_size=6)), min_size=1, max_size=4))
def test_xadd_pairs_read_as_the_http_api_shows_them(raw: list[tuple[bytes, bytes]]) -> None:
    pairs = [b for kv in raw for b in kv]
    assume(pairs[0] != b"data" or len(pairs) > 2)  # the documented single-`data` case
    assert json.loads(data_text(pairs)) == fields_to_data(pairs)


def test_xadd_fields_read_as_an_object_or_fields_list() -> None:
    assert json.loads(data_text([b"user", b"ann", b"n", b"3"])) == {"user": "ann", "n": "3"}
    assert json.loads(data_text([b"k", b"1", b"k", b"2"])) == {"$fields": [["k", "1"], ["k", "2"]]}
    assert json.loads(data_text([b"data", b"not json"])) == {"data": "not json"}
    assert json.loads(data_text([b"b", b"\xff"])) == {"$fields": [["b", {"$base64": "/w=="}]]}


def test_parse_entry_splits_extras_and_reads_tombstones() -> None:
    e = parse_entry([b"17-5", [b"a", b"1", b"$node", b"n1", b"$tag", b"t", b"$meta",
                               orjson.dumps({"k": "v"})]])
    assert isinstance(e, Entry)
    assert (e.seq, e.ts, e.pairs, e.node, e.tag) == (5, 17, [b"a", b"1"], "n1", "t")
    assert e.meta is not None and json.loads(e.meta) == {"k": "v"}
    t = parse_entry([b"18-250", [b"$type", b"tombstone", b"gap_from", b"101", b"gap_to", b"250",
                                 b"reason", b"cap", b"missed_estimate", b"150",
                                 b"earliest_seq", b"251", b"head_seq", b"300"]])
    assert isinstance(t, Tombstone)
    assert (t.gap_from, t.gap_to, t.reason, t.missed_estimate, t.seq) == (101, 250, "cap", 150, 250)
    assert t.clipped(120, 200).gap_from == 121 and t.clipped(120, 200).gap_to == 200


@given(st.dictionaries(st.sampled_from("abcde"), st.tuples(st.integers(0, 500), st.integers(0, 500)),
                       min_size=1),
       st.integers(1, 40))
def test_split_ranges_cover_every_seq_exactly_once(raw: dict, parts: int) -> None:
    ranges = {t: (min(a, b), max(a, b)) for t, (a, b) in raw.items()}
    pieces = split_ranges(ranges, parts)
    seen = [(t, s) for t, lo, hi in pieces for s in range(lo + 1, hi + 1)]
    want = [(t, s) for t, (lo, hi) in sorted(ranges.items()) for s in range(lo + 1, hi + 1)]
    assert sorted(seen) == sorted(want) and len(seen) == len(set(seen))
    nonempty = sum(1 for lo, hi in ranges.values() if hi > lo)
    total = sum(hi - lo for lo, hi in ranges.values())
    assert len(pieces) >= min(parts, total) or len(pieces) >= nonempty


@given(st.dictionaries(st.sampled_from("abc"), st.tuples(st.integers(0, 300), st.integers(0, 300)),
                       min_size=1),
       st.integers(1, 200))
def test_limit_ranges_admits_at_most_max_rows(raw: dict, max_rows: int) -> None:
    ranges = {t: (min(a, b), max(a, b)) for t, (a, b) in raw.items()}
    ends = limit_ranges(ranges, max_rows)
    assert list(ends) == sorted(ranges)
    taken = sum(ends[t] - lo for t, (lo, _) in ranges.items())
    available = sum(hi - lo for lo, hi in ranges.values())
    assert taken == min(max_rows, available)
    assert all(ranges[t][0] <= ends[t] <= ranges[t][1] for t in ranges)


def test_offsets_options() -> None:
    assert parse_offsets(None, "earliest", "startingOffsets", ("a",)) == "earliest"
    assert parse_offsets(' {"a": 7} ', "earliest", "x", ("a", "b")) == {"a": 7}
    with pytest.raises(ValueError, match="startingOffsets"):
        parse_offsets("soon", "earliest", "startingOffsets", ("a",))
    with pytest.raises(ValueError, match="not in option topic"):
        parse_offsets('{"zz": 1}', "earliest", "x", ("a",))
    with pytest.raises(ValueError, match="topic is required"):
        ReadOptions.parse({}, streaming=False)
    with pytest.raises(ValueError, match="maxOffsetsPerTrigger"):
        ReadOptions.parse({"topic": "a", "maxOffsetsPerTrigger": "0"}, streaming=True)
    opts = ReadOptions.parse({"TOPIC": "b, a,b", "failonDataLoss": "false"}, streaming=True)
    assert opts.topics == ("b", "a") and not opts.fail_on_data_loss and opts.starting == "latest"
    assert list(ordered({"b": 1, "a": 2})) == ["a", "b"]


_pair_bytes = st.binary(max_size=6) | st.sampled_from(
    [b"data", b"null", b"NaN", b"1e400", b"[1,2]", b'{"a":"b"}', b'{"a":1}', b" 3 ", b"\xff", b'"x"'])


@given(st.lists(st.tuples(_pair_bytes, _pair_bytes), max_size=3)
       | (json_values.map(data_to_fields).map(lambda p: list(zip(p[0::2], p[1::2], strict=True)))))
def test_the_servers_columns_render_data_as_the_connector_does(raw: list[tuple[bytes, bytes]]) -> None:
    """TOPIC.ROWS renders `data` on the server (resp/commands/topic_rows.py) by the connector's
    rule (spark/rows.py `data_text`): the same text for every record."""
    from topicsrv.resp.commands.topic_rows import data_text as server_data_text

    pairs = [x for pair in raw for x in pair]
    assert server_data_text(pairs).decode("utf-8") == data_text(pairs)
