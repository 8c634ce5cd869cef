"""A pending entry of a consumer group, or a lease of a queue (groupstate.py Rule 2): who
holds it, since when, how many deliveries so far.

Rule 1 (outside the cyclic GC): a group's PEL holds one Delivery per pending entry, millions
under a slow consumer; the class holds ints and a str only, so in the compiled build it is an
acyclic native class that CPython's cyclic GC never tracks (a full collection walked 200,000
pending entries in 52 ms: docs/decisions.md, "The keyspace's values outside the cyclic GC").
Compared by identity, as the dataclass it was (eq=False).
"""

from __future__ import annotations

from mypy_extensions import mypyc_attr


@mypyc_attr(acyclic=True)  # Rule 1
class Delivery:
    __slots__ = ("seq", "ms", "consumer", "time", "count")

    def __init__(self, seq: int, ms: int, consumer: str, time: int, count: int) -> None:
        self.seq = seq
        self.ms = ms  # the ms part of the entry's id, kept so a deleted entry can still be named
        self.consumer = consumer
        self.time = time  # last delivery time (ms)
        self.count = count  # delivery count

    def idle(self, now: int) -> int:
        return max(0, now - self.time)

    def __repr__(self) -> str:
        return (f"Delivery(seq={self.seq}, ms={self.ms}, consumer={self.consumer!r}, "
                f"time={self.time}, count={self.count})")
