"""The names some waiter waits on (notify/scheduler.py `armed_names`): the interest the
engine consults before it tells a string change (engine/core.py Rule 4).

Rule 1 (a live view): `ArmedNames` holds the scheduler's two maps themselves, its armed
fan-out waiters by topic and its consumer lines by name, which the scheduler only ever
changes in place; so it always says what they hold now, and costs nothing to keep.
Rule 2 (compiled, buildinfo.HOT_MODULES): every keyspace write asks it whether anyone waits at
all (`bool`, engine/keyspace/host.py `told`); interpreted, its `__bool__` was a Python call
per write (~0.1-0.3 us at P1; docs/performance.md, "The journal's per-write calls compiled").
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any


class ArmedNames:
    """Rule 1: a name is here while a fan-out waiter or a consumer line waits on it."""

    __slots__ = ("by_topic", "by_name")

    def __init__(self, by_topic: dict[str, Any], by_name: dict[str, Any]) -> None:
        self.by_topic = by_topic
        self.by_name = by_name

    def __contains__(self, name: object) -> bool:
        return name in self.by_topic or name in self.by_name

    def __bool__(self) -> bool:
        return bool(self.by_topic) or bool(self.by_name)

    def __len__(self) -> int:
        return len(set(self))

    def __iter__(self) -> Iterator[str]:
        by_topic = self.by_topic
        yield from by_topic
        yield from (n for n in self.by_name if n not in by_topic)
