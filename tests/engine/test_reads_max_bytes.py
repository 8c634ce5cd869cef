"""A byte-capped read (`max_bytes`, the HTTP diff default) delivers exactly what the per-record
rule says, and is read as an uncapped one is (one slice per segment, not one step per record)."""

from __future__ import annotations

import random

from topicsrv.clock import FakeClock
from topicsrv.engine import Engine
from topicsrv.engine.log.blobs import Blobs
from topicsrv.engine.log.deletes import parse_match
from topicsrv.engine.log.records import prepare_fields, prepare_json


def expected(eng: Engine, topic: str, from_seq: int, limit: int, max_bytes: int,
             nodes: list[str] | None) -> tuple[list[int], int]:
    """The per-record rule: records in order while the running total stays within max_bytes,
    always at least one; when the cap cuts the read, next_from_seq stops right before the
    first record left out (filtered records before it count as read)."""
    full = eng.diff(topic, from_seq, limit, nodes=nodes)
    seqs: list[int] = []
    total = 0
    for seq, blob in zip(full.seqs, full.records, strict=True):
        if seqs and total + len(blob) > max_bytes:
            return seqs, seq - 1
        total += len(blob)
        seqs.append(seq)
    return seqs, full.next_from_seq


def test_capped_reads_match_the_per_record_rule() -> None:
    rng = random.Random(7)
    eng = Engine(clock=FakeClock())
    for _ in range(30):
        recs = [prepare_json({"data": "x" * rng.randrange(0, 3000), "node": rng.choice("ab"),
                              "tag": rng.choice(["k", "j"])})
                for _ in range(rng.randrange(1, 200))]
        eng.write("t", recs)
        if rng.random() < 0.2:  # a few field/value records: a mixed segment
            eng.write("t", [prepare_fields([b"f", b"v" * rng.randrange(1, 500)])])
    eng.delete_records("t", None, parse_match("j"))  # holes in the runs
    head = eng.get("t").head_seq
    for _ in range(300):
        from_seq = rng.randrange(0, head + 1)
        limit = rng.choice([1, 7, 100, 1000, 10_000])
        max_bytes = rng.choice([1, 500, 5000, 50_000, 1 << 20, 16 << 20])
        nodes = rng.choice([None, ["a"]])
        got = eng.diff("t", from_seq, limit, max_bytes=max_bytes, nodes=nodes)
        seqs, next_from_seq = expected(eng, "t", from_seq, limit, max_bytes, nodes)
        assert (got.seqs, got.next_from_seq) == (seqs, next_from_seq), (from_seq, limit,
                                                                        max_bytes, nodes)


def test_a_cap_that_cuts_late_is_one_slice_per_segment_like_an_uncapped_read() -> None:
    """Counted, not timed: a capped read takes each segment's records as one slice (a run),
    as an uncapped one does, never one step per record (the path every capped read used to
    take, ~30x slower: a machine-independent count says which path ran)."""
    eng = Engine(clock=FakeClock())
    for _ in range(2):
        eng.write("big", [prepare_json({"data": "x" * 2000}) for _ in range(10_000)])
    segments = len(eng.get("big").segs)
    for max_bytes in (16_100_000, 0):
        res = eng.diff("big", 0, 10_000, max_bytes=max_bytes)
        # 16 MB of 2 KB records: the cap cuts near record 7900 of 10000
        assert (len(res.records) == 10_000) is (not max_bytes) and len(res.records) > 7000
        assert isinstance(res.records, Blobs)
        parts = res.records.parts
        assert len(parts) == len(res.records.runs) <= segments, (len(parts), segments)
