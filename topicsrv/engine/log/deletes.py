"""Permanent deletion (seeds section 7; permanent-deletion.txt) and explicit capacity trims.

Rule 1: a delete is point-in-time: its upper bound is `head_seq + 1` at call time, so a record
appended a moment later with a matching tag is never touched.
Rule 2: a delete is silent: it moves earliest_seq (through the slot flags) and never a
sub-floor of evict_floor.
Rule 3: `before_seq` never touches the tag index lookups (a marker plus slot flags); `match`
never scans the log (tag index point lookup / prefix range).
Rule 4: count and bytes drop immediately; payloads are freed; a segment whose every record is
dead leaves whole (Topic.reclaim).
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass
from typing import Any

from topicsrv.engine.log.segments import DELETED, LIVE, Segment
from topicsrv.engine.log.topic import Topic
from topicsrv.errors import invalid


@dataclass(frozen=True, slots=True)
class Match:
    kind: str  # "Eq" | "Glob"
    pattern: str  # for Glob: the literal prefix (trailing '*' stripped)

    def to_json(self) -> list[str]:
        return ["tag", self.kind, self.pattern + ("*" if self.kind == "Glob" else "")]


def parse_match(value: Any) -> Match:
    """`"X"`, `"X*"`, `["tag","Eq","X"]` or `["tag","Glob","X*"]`."""
    if isinstance(value, str):
        if value.endswith("*"):
            return Match("Glob", value[:-1])
        return Match("Eq", value)
    if isinstance(value, list) and len(value) == 3 and value[0] == "tag":
        kind, pattern = value[1], value[2]
        if not isinstance(pattern, str):
            raise invalid("match pattern must be a string", field="match")
        if kind == "Eq":
            return Match("Eq", pattern)
        if kind == "Glob":
            if not pattern.endswith("*"):
                raise invalid("a Glob pattern must end with a trailing '*'", field="match")
            return Match("Glob", pattern[:-1])
        raise invalid("match operator must be 'Eq' or 'Glob'", field="match")
    raise invalid(
        'match must be a tag string or ["tag", "Eq"|"Glob", pattern]', field="match"
    )


def _delete_seq(topic: Topic, seq: int) -> bool:
    if seq < topic.front or seq >= topic.next_seq:
        return False
    seg, i = topic.locate(seq)
    if seg.flags[i] != LIVE:
        return False
    topic.kill_slots(seg, i, i + 1, DELETED)
    return True


def delete_before(topic: Topic, before_seq: int) -> int:
    """Delete every live record with seq < before_seq (bounded by the current head)."""
    hi = min(before_seq, topic.next_seq)
    topic.delete_below = max(topic.delete_below, hi)
    deleted = 0
    s = topic.front
    while s < hi:
        seg, i = topic.locate(s)
        j = min(hi, seg.next_seq) - seg.base
        if seg.tags is not None:
            for tag in {seg.tags[k] for k in range(i, j) if seg.flags[k] == LIVE}:
                if tag is not None:
                    topic.tags.prune_below(tag, hi)
        deleted += topic.kill_slots(seg, i, j, DELETED)
        s = seg.base + j
    return deleted


def delete_matching(topic: Topic, match: Match, before_seq: int | None) -> int:
    bound = topic.next_seq  # head_seq + 1: point-in-time
    hi = bound if before_seq is None else min(before_seq, bound)
    deleted = 0
    for tag, seqs in topic.tags.matching(match.kind, match.pattern):
        k = bisect_left(seqs, hi)
        for seq in seqs[:k]:
            deleted += _delete_seq(topic, seq)
        topic.tags.set_seqs(tag, seqs[k:])
    return deleted


def delete(topic: Topic, now: int, before_seq: int | None, match: Match | None) -> int:
    topic.expire(now)
    if match is None:
        if before_seq is None:
            raise invalid("a delete needs 'before_seq', 'match' or both")
        deleted = delete_before(topic, before_seq)
    else:
        deleted = delete_matching(topic, match, before_seq)
    topic.deleted_total += deleted
    topic.reclaim()
    return deleted


def delete_seqs(topic: Topic, now: int, seqs: list[int]) -> int:
    """Delete the given seqs (XDEL, queue acks); tags of the deleted records are pruned from
    the index. Consecutive seqs of one segment go as one run (one kill of a slot range), so
    a batch ack costs one locate per run, not two per seq."""
    topic.expire(now)
    deleted = 0
    front, nxt = topic.front, topic.next_seq
    k, n = 0, len(seqs)
    while k < n:
        seq = seqs[k]
        k += 1
        if seq < front or seq >= nxt:
            continue
        seg, i = topic.locate(seq)
        j, stop, base = i + 1, min(len(seg), nxt - seg.base), seg.base
        while k < n and j < stop and seqs[k] == base + j:
            j += 1
            k += 1
        tags = seg.tags if isinstance(seg, Segment) else None
        if tags is not None:
            flags = seg.flags
            for x in range(i, j):
                tag = tags[x]
                if tag is not None and flags[x] == LIVE:
                    topic.tags.discard(tag, base + x)
        deleted += topic.kill_slots(seg, i, j, DELETED)
    topic.deleted_total += deleted
    topic.reclaim()
    return deleted


def trim(topic: Topic, now: int, maxlen: int | None = None, minid_seq: int | None = None) -> int:
    """An explicit capacity trim (XTRIM / XADD MAXLEN|MINID): involuntary, reason `cap`."""
    topic.expire(now)
    if maxlen is not None:
        if maxlen == 0:
            return topic.drop_front(topic.next_seq, "cap")
        return topic.evict_for_cap(max_records=maxlen)
    if minid_seq is not None:
        return topic.drop_front(minid_seq, "cap")
    return 0
