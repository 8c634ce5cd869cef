"""Latency histograms cheap enough for the per-command hot path, exported by /metrics.

Rule 1: observing is one bisect and two additions on plain lists: no lock (the server runs on
one trio thread; WAL writer threads hand their timings back to it), no allocation once a label
was seen. prometheus_client's own Histogram takes a lock per bucket and per sum (~2-3 us per
observation against ~0.5 us here), which a RESP command costing a few microseconds would feel.
Rule 2: `/metrics` turns these into Prometheus histogram families through prometheus_client
(topicsrv/http/metrics.py): counts here are per bucket, cumulated only when exported.
Rule 3: a `Latencies` table has a bounded set of labels: a label outside `allowed` is counted
under OTHER, so a client cannot create series by sending made-up command names or methods.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Iterator
from typing import Final

# seconds; covers a 20 us RESP command up to a 10 s long-poll or a stuck disk
# not Final: a compiled Final tuple is not set yet when it is the default of a
# parameter (mypyc), as Histogram.__init__'s is
REQUEST_BUCKETS_S = (0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                     0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0)
SYNC_BUCKETS_S = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                  0.25, 0.5, 1.0, 2.5, 10.0)
OTHER: Final = "other"


class Histogram:
    """Per-bucket counts (the last one is +Inf) and the sum of the observed values."""

    __slots__ = ("bounds", "counts", "total")

    def __init__(self, bounds: tuple[float, ...] = REQUEST_BUCKETS_S) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.total = 0.0

    def observe(self, value: float, n: int = 1) -> None:
        """`n` observations of `value` (a coalesced batch: its time split evenly)."""
        self.counts[bisect_left(self.bounds, value)] += n
        self.total += value * n

    @property
    def count(self) -> int:
        return sum(self.counts)

    def cumulative(self) -> list[tuple[str, float]]:
        """(le, cumulative count) pairs as Prometheus wants them, "+Inf" last."""
        out: list[tuple[str, float]] = []
        running = 0
        for bound, n in zip((*self.bounds, float("inf")), self.counts, strict=True):
            running += n
            out.append(("+Inf" if bound == float("inf") else repr(bound), float(running)))
        return out

    def quantile(self, q: float) -> float | None:
        """The upper bound of the bucket holding quantile `q` (None when empty): the status
        page's coarse p50/p99."""
        total = self.count
        if not total:
            return None
        rank = q * total
        running = 0
        for bound, n in zip((*self.bounds, float("inf")), self.counts, strict=True):
            running += n
            if running >= rank:
                return bound
        return float("inf")


class Latencies:
    """Histograms by one label (a command, a route), bounded by `allowed` (Rule 3)."""

    __slots__ = ("allowed", "bounds", "by_label")

    def __init__(self, allowed: Iterable[str] | None = None,
                 bounds: tuple[float, ...] = REQUEST_BUCKETS_S) -> None:
        self.allowed = frozenset(allowed) if allowed is not None else None
        self.bounds = bounds
        self.by_label: dict[str, Histogram] = {}

    def observe(self, label: str, value: float, n: int = 1) -> None:
        hist = self.by_label.get(label)
        if hist is None:
            if self.allowed is not None and label not in self.allowed:
                label = OTHER
            hist = self.by_label.get(label)
            if hist is None:
                hist = self.by_label[label] = Histogram(self.bounds)
        hist.counts[bisect_left(self.bounds, value)] += n  # Histogram.observe, inlined (Rule 1)
        hist.total += value * n

    def items(self) -> Iterator[tuple[str, Histogram]]:
        return iter(sorted(self.by_label.items()))
