"""Effective priority (seeds section 3): manual + recency + aging, fixed-point friendly.

Rule 1: never stored as ground truth; computed on demand from the config and timestamps.
Rule 2: no powf on the hot path: 2^-x comes from a 64-entry table plus a shift.
"""

from __future__ import annotations

W_MANUAL = 1.0
W_AUTO = 1.0
W_AGE = 1.0
AUTO_MAX = 500.0
HALF_LIFE_MS = 30_000
AUTO_FLOOR_MS = 300_000
AGE_RATE_PER_S = 100.0
AGE_CAP_MS = 10_000

_LUT = [2.0 ** (-i / 64) for i in range(64)]


def pow2_neg(x: float) -> float:
    """2 ** -x for x >= 0 via the table (error < 1.1%)."""
    whole = int(x)
    frac = int((x - whole) * 64)
    return _LUT[frac] / (1 << whole) if whole < 63 else 0.0


def auto_recency(last_consumed_at: int | None, now: int) -> float:
    if last_consumed_at is None:
        return 0.0
    idle = max(0, now - last_consumed_at)
    if idle >= AUTO_FLOOR_MS:
        return 0.0
    return AUTO_MAX * pow2_neg(idle / HALF_LIFE_MS)


def age_boost(enqueued_at: int | None, now: int) -> float:
    if enqueued_at is None:
        return 0.0
    return AGE_RATE_PER_S * min(max(0, now - enqueued_at), AGE_CAP_MS) / 1000.0


def effective_priority(
    priority: int | None,
    auto_priority: bool,
    last_consumed_at: int | None,
    now: int,
    enqueued_at: int | None = None,
) -> float:
    manual = max(-1000, min(1000, priority or 0))
    auto = auto_recency(last_consumed_at, now) if auto_priority else 0.0
    return W_MANUAL * manual + W_AUTO * auto + W_AGE * age_boost(enqueued_at, now)
