"""The resident store stays within its per-record budget (issue 2: <= 2 x encoded + 64 B; issue 16:
sealed segments packed, <= encoded + 12 B)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _bench_module():
    spec = importlib.util.spec_from_file_location("engine_memory", ROOT / "bench" / "engine_memory.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("form", ["json", "fields"])
def test_bytes_per_record_within_budget(form: str) -> None:
    r = _bench_module().measure(100_000, form, trace=True)
    assert r["records"] == 100_000
    assert r["traced_bytes_per_record"] <= r["target_bytes_per_record"], r
    # Sealed segments are packed (segments Rule 5): past the blob itself, a few bytes of
    # offsets, ts and flags a record, plus its share of the unsealed tail segment (issue 16).
    assert r["traced_bytes_per_record"] <= r["encoded_bytes_per_record"] + 12, r
