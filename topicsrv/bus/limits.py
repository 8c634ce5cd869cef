"""The output-buffer limits of pub/sub subscribers, as Redis's `client-output-buffer-limit
pubsub <hard> <soft> <soft-seconds>` (default 32mb 8mb 60).

Rule 1: `check` runs before each delivery is queued, with the subscriber's pending bytes as
they would be after it. Past `hard` bytes the subscriber is cut at once; past `soft` bytes it
is cut once it has stayed past `soft` for more than `soft_seconds` (timed with the bus's
clock, so tests use a FakeClock); dropping back under `soft` resets that timer. A limit of 0
is "no limit", as in Redis.
The limits come from `serve --client-output-buffer-limit-pubsub "<hard> <soft> <seconds>"`
(cli.py) and change at run time with CONFIG SET client-output-buffer-limit.
Rule 2: the check is before the queueing, so the bytes held for one subscriber never exceed
`hard` (Redis queues first and checks after; the difference is one message).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

DEFAULT_HARD = 32 << 20
DEFAULT_SOFT = 8 << 20
DEFAULT_SOFT_SECONDS = 60


@dataclass(slots=True)
class OutputLimits:
    hard: int = DEFAULT_HARD
    soft: int = DEFAULT_SOFT
    soft_seconds: int = DEFAULT_SOFT_SECONDS

    def check(self, sub: Any, pending: int, now_ms: int) -> str | None:
        """None when `sub` may take `pending` bytes; else why it must be cut (Rule 1)."""
        if self.hard and pending > self.hard:
            return f"{pending} bytes pending > hard limit {self.hard}"
        if not self.soft or pending <= self.soft:
            sub.soft_since = None
            return None
        if sub.soft_since is None:
            sub.soft_since = now_ms
            return None
        if now_ms - sub.soft_since > self.soft_seconds * 1000:
            return (f"{pending} bytes pending > soft limit {self.soft} for more than "
                    f"{self.soft_seconds} s")
        return None

    def render(self) -> str:
        """The `pubsub ...` part of CONFIG GET client-output-buffer-limit."""
        return f"pubsub {self.hard} {self.soft} {self.soft_seconds}"
