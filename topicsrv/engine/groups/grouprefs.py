"""Redis 8.2's consumer-group reference policies, `KEEPREF | DELREF | ACKED`, for the deletes
of XDELEX/XACKDEL and the trims of XADD/XTRIM. Pure and synchronous; the log itself changes
only through the Engine (a delete is `Engine.delete_seqs`, a trim `Engine.trim`), so both are
journaled exactly as XDEL and XTRIM are.

Rule 1: an entry is *referenced* (ACKED keeps it) when some group has not read it yet (its seq
  is past that group's last-delivered position) or it is pending in some group's PEL. With no
  groups nothing is referenced (Redis's streamEntryIsReferenced).
Rule 2: DELREF removes the entry from every group's PEL (`Group.drop`, groupstate Rule 1);
  KEEPREF leaves the PELs alone (today's XDEL). A PEL change is persisted at checkpoints, like
  XACK's.
Rule 3: a trim stays an eviction from the front (evict_floor, a tombstone for lagging
  readers): an ACKED trim stops at the first referenced entry (`acked_floor`), so it never
  crosses a group's cursor and never punches a hole a reader would cross silently.
Rule 4: per-ID result codes are Redis's: -1 no such entry (for XACKDEL: and not acknowledged
  now), 1 deleted (XACKDEL: or acknowledged, the entry being gone already), 2 kept because it
  is still referenced (ACKED). An ID named twice is deleted once (-1 the second time).
"""

from __future__ import annotations

from collections.abc import Sequence

from topicsrv.engine.groups.groupstate import Group, groups_of
from topicsrv.engine.log.topic import Topic

KEEPREF, DELREF, ACKED = "keepref", "delref", "acked"
POLICIES = (KEEPREF, DELREF, ACKED)
NOT_FOUND, DELETED, REFERENCED = -1, 1, 2


def _groups(topic: Topic) -> list[Group]:
    gs = groups_of(topic)
    return [] if gs is None else list(gs)


def referenced(topic: Topic, seq: int) -> bool:
    """Rule 1."""
    return any(seq > g.last_seq or seq in g.pel for g in _groups(topic))


def drop_refs(topic: Topic, seq: int) -> int:
    """DELREF for one entry: remove it from every group's PEL; how many PELs held it."""
    n = 0
    for g in _groups(topic):
        d = g.pel.get(seq)
        if d is not None:
            g.drop(d)
            n += 1
    return n


def drop_refs_between(topic: Topic, lo: int, hi: int) -> int:
    """DELREF for a trim: remove the entries with lo <= seq < hi from every group's PEL."""
    n = 0
    for g in _groups(topic):
        for seq in list(g.pel.irange(lo, hi, inclusive=(True, False))):
            g.drop(g.pel[seq])
            n += 1
    return n


def acked_floor(topic: Topic) -> int | None:
    """The first referenced seq (Rule 1), where an ACKED trim stops (Rule 3); None when no
    group references anything (no groups)."""
    floor: int | None = None
    for g in _groups(topic):
        first = g.last_seq + 1
        if g.pel:
            first = min(first, g.pel.peekitem(0)[0])
        floor = first if floor is None else min(floor, first)
    return floor


def live_below(topic: Topic, hi: int) -> int:
    """How many live records lie in [front, hi)."""
    n, s = 0, topic.front
    hi = min(hi, topic.next_seq)
    while s < hi:
        seg, i = topic.locate(s)
        j = min(hi, seg.next_seq) - seg.base
        n += seg.live_in(i, j)[0]
        s = seg.base + j
    return n


def plan_deletes(topic: Topic, seqs: Sequence[int], policy: str,
                 group: Group | None = None) -> tuple[list[int], list[int]]:
    """XDELEX (group None) or XACKDEL (acknowledge in `group` first): the per-ID codes (Rule 4)
    and the sorted seqs the caller must delete from the log. PEL changes (the ack, DELREF) are
    made here; a seq <= 0 names no entry. The caller has expired the topic."""
    codes: list[int] = []
    doomed: set[int] = set()
    for seq in seqs:
        code = NOT_FOUND
        if group is not None and seq > 0:
            d = group.pel.get(seq)
            if d is not None:
                group.drop(d)
                code = DELETED
        if seq > 0 and policy == ACKED and referenced(topic, seq):
            codes.append(REFERENCED)
            continue
        if seq > 0 and policy == DELREF:
            drop_refs(topic, seq)
        if seq > 0 and seq not in doomed and topic.record_at(seq) is not None:
            doomed.add(seq)
            code = DELETED
        codes.append(code)
    return codes, sorted(doomed)
