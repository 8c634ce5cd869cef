"""Consumer-group ownership transfer: XCLAIM, XAUTOCLAIM and XREADGROUP's CLAIM (Redis 8.4).
Pure and synchronous.

Rule 1: a claim never touches the log; a PEL entry whose record was deleted or evicted
  is dropped from the PEL (XCLAIM: skipped; XAUTOCLAIM: listed as deleted), as in Redis 7.
Rule 2: ownership moves with `Group.assign` only, so a Delivery stays in exactly one
  consumer's PEL (groupstate Rule 1).
Rule 3: XREADGROUP ... CLAIM takes the entries pending (with any consumer) for at least
  min-idle ms, the longest idle first (ties by ID), at most `count`; each reports the idle
  time and delivery count it had before, then is delivered as XCLAIM delivers (time = now,
  count + 1, new owner). An entry whose record is gone is skipped and left pending.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

from topicsrv.engine.groups.grouppel import resp_entry
from topicsrv.engine.groups.groupstate import Consumer, Delivery, Group, entry_ms
from topicsrv.engine.log.topic import Topic


@dataclass(slots=True)
class Claimed:
    delivery: Delivery
    entry: bytes | None  # RESP entry blob (None with JUSTID)
    idle: int = 0  # XREADGROUP CLAIM: ms since the previous delivery, before this one
    count: int = 0  # XREADGROUP CLAIM: deliveries before this one


def claim(
    topic: Topic,
    group: Group,
    consumer: str,
    min_idle: int,
    seqs: list[int],
    now: int,
    *,
    delivery_time: int | None = None,
    retrycount: int | None = None,
    force: bool = False,
    justid: bool = False,
    last: tuple[int, int] | None = None,
) -> list[Claimed]:
    """XCLAIM. `seqs` name entries (a seq that names no record matches nothing). Entries no
    longer in the log are dropped from the PEL and skipped (Redis 7). `delivery_time` (from
    IDLE/TIME) outside [0, now] means now, as in Redis."""
    topic.expire(now)
    if last is not None and last[1] > group.last_seq:
        group.last_seq, group.last_ms = last[1], last[0]
        group.cursor = max(group.cursor, last[1])
    if delivery_time is None or delivery_time < 0 or delivery_time > now:
        delivery_time = now
    min_idle = max(0, min_idle)
    owner: Consumer | None = None
    out: list[Claimed] = []
    for seq in seqs:
        d: Delivery | None = group.pel.get(seq)
        blob = resp_entry(topic, seq)
        if blob is None:
            if d is not None:
                group.drop(d)
            continue
        fresh = False
        if d is None:
            if not force:
                continue
            d = Delivery(seq, entry_ms(topic, seq), "", now, 0)
            fresh = True
        if not fresh and min_idle and now - d.time < min_idle:
            continue
        if owner is None:
            owner = group.touch(consumer, now)
        d.time = delivery_time
        if retrycount is not None and retrycount >= 0:
            d.count = retrycount
        elif not justid:
            d.count += 1
        group.assign(d, owner)
        owner.active_time = now
        out.append(Claimed(d, None if justid else blob))
    return out


def autoclaim(
    topic: Topic,
    group: Group,
    consumer: str,
    min_idle: int,
    start: int,
    count: int,
    now: int,
    *,
    justid: bool = False,
) -> tuple[Delivery | None, list[Claimed], list[Delivery]]:
    """XAUTOCLAIM: scan the PEL from `start` (at most count*10 entries), claim idle ones.
    Returns (next cursor entry or None for 0-0, claimed, deleted entries dropped from the PEL)."""
    topic.expire(now)
    attempts = count * 10
    owner: Consumer | None = None
    claimed: list[Claimed] = []
    deleted: list[Delivery] = []
    keys = list(group.pel.irange(minimum=start))
    i = 0
    while attempts > 0 and count > 0 and i < len(keys):
        attempts -= 1
        d: Delivery = group.pel[keys[i]]
        i += 1
        blob = resp_entry(topic, d.seq)
        if blob is None:
            group.drop(d)
            deleted.append(d)
            count -= 1
            continue
        if min_idle and now - d.time < min_idle:
            continue
        if owner is None:
            owner = group.touch(consumer, now)
        d.time = now
        if not justid:
            d.count += 1
        group.assign(d, owner)
        owner.active_time = now
        claimed.append(Claimed(d, None if justid else blob))
        count -= 1
    nxt: Delivery | None = group.pel[keys[i]] if i < len(keys) else None
    return nxt, claimed, deleted


def _idlest(d: Delivery) -> tuple[int, int]:
    return d.time, d.seq


def claim_idle(topic: Topic, group: Group, consumer: str, min_idle: int, count: int,
               now: int) -> list[Claimed]:
    """XREADGROUP ... CLAIM min-idle (Rule 3); count 0 = no limit."""
    topic.expire(now)
    ripe = (d for d in group.pel.values()
            if now - d.time >= min_idle and topic.record_at(d.seq) is not None)
    picked = heapq.nsmallest(count, ripe, key=_idlest) if count > 0 else sorted(ripe, key=_idlest)
    owner = group.touch(consumer, now)
    out: list[Claimed] = []
    for d in picked:
        blob = resp_entry(topic, d.seq)
        if blob is None:
            continue
        out.append(Claimed(d, blob, max(0, now - d.time), d.count))
        d.time = now
        d.count += 1
        group.assign(d, owner)
        owner.active_time = now
    return out


def next_ripe(group: Group, min_idle: int, now: int) -> int | None:
    """The engine time (ms) at which the next pending entry not yet claimable becomes so
    (XREADGROUP BLOCK ... CLAIM wakes then), None if there is none."""
    return min((d.time + min_idle for d in group.pel.values() if d.time + min_idle > now),
               default=None)
