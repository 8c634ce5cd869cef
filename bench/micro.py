"""In-process micro-benchmarks of the engine: tag index lookups/deletes and the read pipeline.

Rule 1: each figure is the best of several timed repetitions (min is the least noisy
estimator of a pure-CPU cost on a shared machine), reported per operation or per record.
Rule 2: the engine runs with a FakeClock and the NullJournal: this measures the engine's
CPU cost alone, no I/O.
Targets (issue 6, seeds permanent-deletion.txt): Eq lookup <= 2 us, Glob over 100 tags
<= 100 us (seeds measured 267 ns and 67.8 us in Rust).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from topicsrv.clock import FakeClock
from topicsrv.engine import Engine
from topicsrv.engine.log.blobs import joined
from topicsrv.engine.log.deletes import Match
from topicsrv.engine.log.reads import FMT_JSON, FMT_RESP, scan_blobs
from topicsrv.engine.log.records import prepare_fields, prepare_json

DATA = "x" * 100


def best_per_op(fn: Callable[[], object], ops: int, repeat: int = 5) -> float:
    """Seconds per call of `fn`: best of `repeat` runs of `ops` calls."""
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(ops):
            fn()
        best = min(best, (time.perf_counter() - t0) / ops)
    return best


def tag_engine(groups: int, per_group: int) -> Engine:
    """A topic with groups*per_group records, tags `g{group:04d}-{i:03d}` (one record each)."""
    engine = Engine(clock=FakeClock())
    engine.put_topic("tags", {})
    batch = []
    for g in range(groups):
        for i in range(per_group):
            batch.append(prepare_json({"data": DATA, "tag": f"g{g:04d}-{i:03d}"}))
            if len(batch) == 1000:
                engine.write("tags", batch)
                batch = []
    if batch:
        engine.write("tags", batch)
    return engine


def tag_benchmarks(groups: int = 100) -> dict[str, float]:
    """Per-op seconds: Eq lookup, Glob lookup over 100 tags, and the full engine deletes."""
    per_group = 100
    engine = tag_engine(groups, per_group)
    index = engine.get("tags").tags
    eq_lookup = best_per_op(lambda: index.matching("Eq", "g0001-042"), 20_000)
    glob_lookup = best_per_op(lambda: index.matching("Glob", "g0001-"), 2_000)

    # Full deletes through the engine: each call removes what it matches, so time a
    # sequence of distinct targets once each.
    tags = [f"g{g:04d}-{i:03d}" for g in range(0, groups, 2) for i in range(per_group)]
    t0 = time.perf_counter()
    for tag in tags:
        engine.delete_records("tags", None, Match("Eq", tag))
    eq_delete = (time.perf_counter() - t0) / len(tags)
    prefixes = [f"g{g:04d}-" for g in range(1, groups, 2)]
    t0 = time.perf_counter()
    deleted = 0
    for prefix in prefixes:
        res, _ = engine.delete_records("tags", None, Match("Glob", prefix))
        deleted += res["deleted"]
    glob_delete = (time.perf_counter() - t0) / len(prefixes)
    if deleted != len(prefixes) * per_group:
        raise RuntimeError(f"Glob deletes removed {deleted}, expected {len(prefixes) * per_group}")
    return {"eq_lookup_s": eq_lookup, "glob100_lookup_s": glob_lookup,
            "eq_delete_s": eq_delete, "glob100_delete_s": glob_delete}


def read_benchmarks(records: int = 100_000, limit: int = 1000) -> dict[str, float]:
    """Per-record seconds of diff (JSON and RESP forms) and XRANGE's scan (`scan_blobs` + the
    joined reply body) over RESP records."""
    engine = Engine(clock=FakeClock())
    engine.put_topic("json", {})
    engine.put_topic("resp", {})
    jrecs = [prepare_json({"data": DATA}) for _ in range(1000)]
    frecs = [prepare_fields([b"f", DATA.encode()]) for _ in range(1000)]
    for _ in range(records // 1000):
        engine.write("json", jrecs)
        engine.write("resp", frecs)
    out: dict[str, float] = {}

    def page_all(name: str, fmt: int) -> None:
        seq = 0
        while True:
            res = engine.diff(name, seq, limit, fmt=fmt)
            seq = res.next_from_seq
            if res.caught_up:
                return

    out["diff_json_per_record_s"] = best_per_op(lambda: page_all("json", FMT_JSON), 1, 3) / records
    out["diff_resp_per_record_s"] = best_per_op(lambda: page_all("resp", FMT_RESP), 1, 3) / records
    topic = engine.get("resp")
    mid = topic.earliest_seq + records // 2
    out["xrange100_per_call_s"] = best_per_op(
        lambda: joined(scan_blobs(topic, mid, topic.head_seq, 100, engine.now())[1]), 2_000)
    return out
