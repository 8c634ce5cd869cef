"""Stream entries as the engine stores them (engine/log/entries.py): `<ts>-<seq>` IDs and RESP
entry blobs, written and read without a protocol library."""

from __future__ import annotations

import ast
from pathlib import Path

import hiredis
from hypothesis import given
from hypothesis import strategies as st

from topicsrv.engine.log import entries
from topicsrv.engine.log.entries import encode_entry, format_id, parse_entry, split_id

ENGINE = Path(__file__).resolve().parents[2] / "topicsrv" / "engine"


def test_the_engine_imports_no_protocol_library() -> None:
    for path in sorted(ENGINE.rglob("*.py")):
        tree = ast.parse(path.read_text())
        names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        names |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
        assert not {m for m in names if m.split(".")[0] in ("hiredis", "h11", "redis")}, path


@given(st.integers(0, 2**64 - 1), st.integers(0, 2**64 - 1),
       st.lists(st.binary(max_size=40), max_size=12))
def test_entry_codec_round_trips_and_is_canonical_resp(ts: int, seq: int, items: list[bytes]) -> None:
    blob = encode_entry(ts, seq, items)
    assert parse_entry(blob) == (ts, seq, items)
    reader = hiredis.Reader()
    reader.feed(blob)
    assert reader.gets() == [format_id(ts, seq), items]  # what any RESP client reads
    assert split_id(format_id(ts, seq)) == (ts, seq)


def test_bulks_in_slices_is_bulks_with_a_pause_per_slice() -> None:
    items = [b"x" * (i % 7) for i in range(10_000)]
    pauses: list[int] = []
    assert entries.bulks_in_slices(items, lambda: pauses.append(1), every=4096) == entries.bulks(items)
    assert len(pauses) == 3
