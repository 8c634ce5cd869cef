"""topicsrv/latency.py: bucket counting, Prometheus cumulation, bounded labels."""

from __future__ import annotations

from topicsrv.latency import OTHER, Histogram, Latencies


def test_observations_land_in_their_bucket_and_cumulate() -> None:
    h = Histogram((0.001, 0.01, 0.1))
    for v in (0.0005, 0.001, 0.002, 0.05, 3.0):
        h.observe(v)
    h.observe(0.02, n=3)  # a coalesced batch: three observations of its share
    assert h.counts == [2, 1, 4, 1]
    assert h.cumulative() == [("0.001", 2.0), ("0.01", 3.0), ("0.1", 7.0), ("+Inf", 8.0)]
    assert h.count == 8 and abs(h.total - (0.0005 + 0.001 + 0.002 + 0.05 + 3.0 + 0.06)) < 1e-9
    assert h.quantile(0.5) == 0.1 and h.quantile(0.99) == float("inf")
    assert Histogram().quantile(0.5) is None


def test_labels_outside_the_allowed_set_share_one_series() -> None:
    t = Latencies(allowed={"GET /v0/health"})
    t.observe("GET /v0/health", 0.001)
    for i in range(100):
        t.observe(f"BREW{i} /x", 0.001)
    assert [label for label, _ in t.items()] == ["GET /v0/health", OTHER]
    assert dict(t.items())[OTHER].count == 100
