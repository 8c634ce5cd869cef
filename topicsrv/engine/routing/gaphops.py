"""Hop counts of gap slots (LOST or TRIMMED seqs with no record) in a router's topics.

A router forwards a source gap as a gap of the same length in its dest (routerfwd Rule 2).
Around an `allow_cycle` cycle that gap would come back to its source, be forwarded again and
so on forever (issue 23: a crash's `lost` range grew two mirrored heads by millions a second),
so a gap obeys the hop cap exactly as a record does (routerfwd Rule 5):

Rule 1: a gap's hop is 0 where it arose (the topic's own crash, damage or failed write, an
eviction the router reports), and its source gap's hop + 1 in a dest; a router forwards a
gap seq only while its hop is below the router's hop cap.
Rule 2 (void): a source's crash gap (seqs assigned but never durable; no router forwarded
any of them: routerfwd Rule 7) is marked VOID at recovery and in the WAL (rederive.py Rule 3):
its routers skip it without a dest seq, as they skip a deleted record, live and when
re-deriving alike, so a dest's seqs do not depend on when the source crashed.
Rule 3: hops > 0 live in `topic.ext["ghops"]` as runs `[first, last, hop]` in seq order
(O(runs), never O(seqs): a gap may span millions of seqs), pruned like record hops below
the smallest outbound cursor, and checkpointed above it (storage/routerlog.py Rule 4). A topic with no run has only hop-0 gaps.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterator

from topicsrv.engine.log.topic import Topic

KEY = "ghops"
VOID = 1 << 30  # Rule 2: above every hop cap


def forwards(hop: int, cap: int | None) -> bool:
    """Does a router with hop cap `cap` forward a gap seq of hop `hop` (Rules 1-2)?"""
    return hop < VOID and (cap is None or hop < cap)


def add(topic: Topic, first: int, n: int, hop: int) -> None:
    """Seqs [first, first + n) of `topic` are a gap of hop `hop` (Rule 1); appended in order."""
    if n <= 0 or hop <= 0:
        return
    runs: list[list[int]] = topic.ext.setdefault(KEY, [])
    if runs and runs[-1][1] == first - 1 and runs[-1][2] == hop:
        runs[-1][1] = first + n - 1
    elif not runs or runs[-1][1] < first:
        runs.append([first, first + n - 1, hop])
    else:  # out of order (a replayed marker): keep them sorted and disjoint, the new one wins
        last = first + n - 1
        kept = [r for r in runs if r[1] < first or r[0] > last]
        kept += [[r[0], first - 1, r[2]] for r in runs if r[0] < first <= r[1]]
        kept += [[last + 1, r[1], r[2]] for r in runs if r[0] <= last < r[1]]
        runs[:] = sorted([*kept, [first, last, hop]])


def hop_of(topic: Topic, seq: int) -> int:
    runs: list[list[int]] | None = topic.ext.get(KEY)
    if not runs:
        return 0
    k = bisect_right(runs, seq, key=lambda r: r[0]) - 1
    return runs[k][2] if k >= 0 and runs[k][1] >= seq else 0


def spans(topic: Topic, first: int, end: int) -> Iterator[tuple[int, int, int]]:
    """[first, end) cut where the gap hop changes: (start, stop, hop) in seq order."""
    runs: list[list[int]] | None = topic.ext.get(KEY)
    if not runs:
        if first < end:
            yield first, end, 0
        return
    k = max(0, bisect_right(runs, first, key=lambda r: r[0]) - 1)
    s = first
    while s < end:
        while k < len(runs) and runs[k][1] < s:
            k += 1
        if k == len(runs) or runs[k][0] >= end:
            yield s, end, 0
            return
        a, b, hop = runs[k]
        if a > s:
            yield s, a, 0
            s = a
        stop = min(end, b + 1)
        yield s, stop, hop
        s = stop


def prune(topic: Topic, floor: int) -> None:
    """Forget runs at or below `floor` (Rule 2)."""
    runs: list[list[int]] | None = topic.ext.get(KEY)
    if not runs:
        return
    k = 0
    while k < len(runs) and runs[k][1] <= floor:
        k += 1
    if k:
        del runs[:k]
    if runs and runs[0][0] <= floor:
        runs[0][0] = floor + 1
    if not runs:
        del topic.ext[KEY]
