"""Consumer-group ownership transfer: XCLAIM and XAUTOCLAIM. Pure and synchronous.

Rule 1: a claim never touches the log; a PEL entry whose record was deleted or evicted
  is dropped from the PEL (XCLAIM: skipped; XAUTOCLAIM: listed as deleted), as in Redis 7.
Rule 2: ownership moves with `Group.assign` only, so a Delivery stays in exactly one
  consumer's PEL (groupstate Rule 1).
"""

from __future__ import annotations

from dataclasses import dataclass

from topicsrv.engine.grouppel import resp_entry
from topicsrv.engine.groupstate import Consumer, Delivery, Group, entry_ms
from topicsrv.engine.topic import Topic


@dataclass(slots=True)
class Claimed:
    delivery: Delivery
    entry: bytes | None  # RESP entry blob (None with JUSTID)


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
