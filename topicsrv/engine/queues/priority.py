"""Effective priority (seeds section 3.1): manual + recency + aging, in integer fixed point.

    P_eff = W_manual * clamp(priority, -1000, 1000)
          + W_auto   * AUTO_MAX * 2^(-(now - last_consumed_at) / HALF_LIFE_MS)
          + W_age    * AGE_RATE * min(now - enqueued_at, AGE_CAP_MS)

Rule 1: never stored as ground truth; computed on demand from the config and timestamps (the
scheduler caches a topic's value for at most one aging tick, TICK_MS).
Rule 2: integers only: 2^-x comes from a 64-entry table of 2^-(i/64) in Q16 plus a shift; the
weights are per-mille integers; a result is whole priority units, rounded half up.
Rule 3: every constant of section 3.1 is named here and nowhere else.
Rule 4: the recency term is 0 when `auto_priority` is false, when the topic was never
consumed, and once it has been idle AUTO_FLOOR_MS or longer (no math).
"""

from __future__ import annotations

from dataclasses import dataclass

# ---- the constants of seeds section 3.1 (weights in per mille: 1000 = 1.0) ---------------
W_MANUAL = 1000
W_AUTO = 1000
W_AGE = 1000
PRIORITY_MIN = -1000
PRIORITY_MAX = 1000
AUTO_MAX = 500
HALF_LIFE_MS = 30_000
AUTO_FLOOR_MS = 300_000
AGE_RATE_PER_S = 100
AGE_CAP_MS = 10_000
TICK_MS = 50  # the aging tick: how long a computed P_eff may be reused

_Q = 16
_ONE = 1 << _Q
_STEPS = 64
# 2^-(i/64) in Q16, computed once at import (not on the hot path)
LUT: tuple[int, ...] = tuple(round(_ONE * 2.0 ** (-i / _STEPS)) for i in range(_STEPS))


def pow2_neg_q16(num: int, den: int) -> int:
    """2^-(num/den) in Q16 for num >= 0, den > 0, to 1/64 of an exponent step (error < 1.1%)."""
    steps = num * _STEPS // den
    whole, frac = steps >> 6, steps & (_STEPS - 1)
    return LUT[frac] >> whole if whole < _Q + 1 else 0


def _per_mille(weight: int, value: int) -> int:
    return value if weight == 1000 else (weight * value + 500) // 1000


def manual(priority: int | None) -> int:
    return _per_mille(W_MANUAL, max(PRIORITY_MIN, min(PRIORITY_MAX, priority or 0)))


def auto_recency(last_consumed_at: int | None, now: int, enabled: bool = True) -> int:
    if not enabled or last_consumed_at is None:
        return 0
    idle = now - last_consumed_at
    if idle >= AUTO_FLOOR_MS:
        return 0
    q = pow2_neg_q16(max(0, idle), HALF_LIFE_MS)
    return _per_mille(W_AUTO, (AUTO_MAX * q + (_ONE >> 1)) >> _Q)


def age_boost(enqueued_at: int | None, now: int) -> int:
    if enqueued_at is None:
        return 0
    waited = min(max(0, now - enqueued_at), AGE_CAP_MS)
    return _per_mille(W_AGE, AGE_RATE_PER_S * waited // 1000)


@dataclass(frozen=True, slots=True)
class Components:
    manual: int
    auto: int
    age: int

    @property
    def total(self) -> int:
        return self.manual + self.auto + self.age

    def to_json(self) -> dict[str, int]:
        return {"manual": self.manual, "auto": self.auto, "age": self.age}


def components(priority: int | None, auto_priority: bool, last_consumed_at: int | None, now: int,
               enqueued_at: int | None = None) -> Components:
    return Components(manual(priority), auto_recency(last_consumed_at, now, auto_priority),
                      age_boost(enqueued_at, now))


def effective_priority(priority: int | None, auto_priority: bool, last_consumed_at: int | None,
                       now: int, enqueued_at: int | None = None) -> int:
    """P_eff in whole units (section 3.1), integers only."""
    return (manual(priority) + auto_recency(last_consumed_at, now, auto_priority)
            + age_boost(enqueued_at, now))
