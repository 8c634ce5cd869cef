"""Memory per record: load N 100-byte XADD records into a fresh server, measure what it holds.

Rule 1: each server is fresh (started by the caller for this measurement only), its RSS is
read from /proc/<pid>/status before and after the load, and the per-record figure is the
RSS growth divided by N (the empty-process baseline is not charged to the records).
Rule 2: both servers are loaded with the same client (redis-benchmark, -c 50 -P 16) and the
same command, `XADD mem * f <100 bytes>`; redis-server's own accounting (INFO memory
used_memory) is reported next to its RSS.
"""

from __future__ import annotations

import time
from typing import Any

from bench.procs import Proc
from bench.respbench import client, load_stream


def settle_rss(proc: Proc, wait_s: float = 0.5) -> int:
    time.sleep(wait_s)
    return proc.rss()


def measure(proc: Proc, records: int) -> dict[str, Any]:
    assert proc.resp_port is not None
    r = client(proc.resp_port)
    info_before = r.info("memory") if proc.name == "redis-server" else {}
    before = settle_rss(proc)
    seconds = load_stream(proc.resp_port, "mem", records)
    length = r.xlen("mem")
    if length != records:
        raise RuntimeError(f"{proc.name}: XLEN mem = {length}, expected {records}")
    after = settle_rss(proc)
    out: dict[str, Any] = {
        "records": records,
        "rss_before": before,
        "rss_after": after,
        "rss_per_record": (after - before) / records,
        "load_seconds": seconds,
    }
    if info_before:
        info = r.info("memory")
        out["used_memory_per_record"] = (info["used_memory"] - info_before["used_memory"]) / records
        out["used_memory_rss"] = info["used_memory_rss"]
    r.close()
    return out
