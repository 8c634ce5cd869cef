"""Consumer-group definition changes as values: what storage logs for an XGROUP command.

A change is a small JSON-able dict naming one group (and consumer) and only the fields the
command set, so its WAL frame is proportional to the change, never to the group's state (a
group with 200k pending entries writes the same few bytes for CREATECONSUMER as an empty one).

Rule 1: `apply(topic, change)` redoes the change on restored state and is idempotent (a
create of an existing group, a delete of a missing consumer change nothing), so replaying a
frame over a checkpoint that already contains it is harmless.
Rule 2: definitions only. Delivery progress (cursor, entries-read, the PEL) moves with
XREADGROUP/XACK and is persisted at checkpoints (docs/decisions.md); DELCONSUMER replays its
side effect on the PEL (the consumer's pending entries leave the group).
Rule 3 (progress, for replicas only): `progress` is what one XREADGROUP, XACK, XCLAIM or
XAUTOCLAIM left of the entries it touched: the group's cursor, its consumers named, and each
touched seq's delivery (owner, time, count) or its absence. It is state, not a command, so
`apply_progress` on a replica is idempotent; storage feeds it to replicas and never writes it
to the WAL (Rule 2 stands for the primary's own disk).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from topicsrv.engine import groups
from topicsrv.engine.log.topic import Topic

Change = dict[str, Any]


def created(group: groups.Group) -> Change:
    return {"op": "create", "group": group.name, "last_seq": group.last_seq, "last_ms": group.last_ms,
            "entries_read": group.entries_read}


def id_set(group: groups.Group) -> Change:
    return {"op": "setid", "group": group.name, "last_seq": group.last_seq, "last_ms": group.last_ms,
            "entries_read": group.entries_read}


def destroyed(name: str) -> Change:
    return {"op": "destroy", "group": name}


def consumer_created(group: groups.Group, consumer: str, now: int) -> Change:
    return {"op": "createconsumer", "group": group.name, "consumer": consumer, "time": now}


def consumer_deleted(group: groups.Group, consumer: str) -> Change:
    return {"op": "delconsumer", "group": group.name, "consumer": consumer}


def apply(topic: Topic, change: Change) -> None:
    """Redo one change on `topic`'s restored groups (Rule 1)."""
    op, name = change["op"], str(change["group"])
    entries_read = change.get("entries_read")
    entries_read = None if entries_read is None else int(entries_read)
    if op == "create":
        groups.create(topic, name, int(change["last_seq"]), int(change["last_ms"]), entries_read, 0)
        return
    if op == "destroy":
        groups.destroy(topic, name)
        return
    group = groups.find(topic, name)
    if group is None:
        return
    if op == "setid":
        groups.setid(group, int(change["last_seq"]), int(change["last_ms"]), entries_read)
    elif op == "createconsumer":
        groups.create_consumer(group, str(change["consumer"]), int(change["time"]))
    elif op == "delconsumer":
        groups.delete_consumer(group, str(change["consumer"]))


def progress(group: groups.Group, consumers: Iterable[str], seqs: Iterable[int]) -> Change:
    """Rule 3."""
    pel = group.pel
    named = [c for c in (group.consumer(n) for n in dict.fromkeys(consumers)) if c is not None]
    held, gone = [], []
    for seq in dict.fromkeys(seqs):
        d = pel.get(seq)
        if d is None:
            gone.append(seq)
        else:
            held.append([d.seq, d.ms, d.consumer, d.time, d.count])
    return {"group": group.name, "last_seq": group.last_seq, "last_ms": group.last_ms,
            "cursor": group.cursor, "entries_read": group.entries_read,
            "consumers": [[c.name, c.seen_time, c.active_time] for c in named],
            "pel": held, "gone": gone}


def apply_progress(topic: Topic, change: Change) -> None:
    """Rule 3: the group's state for what `change` names becomes what it says."""
    group = groups.find(topic, str(change["group"]))
    if group is None:
        return
    group.last_seq, group.last_ms = int(change["last_seq"]), int(change["last_ms"])
    group.cursor = int(change["cursor"])
    er = change.get("entries_read")
    group.entries_read = None if er is None else int(er)
    for name, seen, active in change["consumers"]:
        c = group.touch(str(name), int(seen))
        c.active_time = int(active)
    for seq in change["gone"]:
        d = group.pel.get(int(seq))
        if d is not None:
            group.drop(d)
    for seq, ms, owner, t, n in change["pel"]:
        d = group.pel.get(int(seq))
        if d is None:
            d = groups.Delivery(int(seq), int(ms), str(owner), int(t), int(n))
        else:
            d.time, d.count = int(t), int(n)
        c = group.consumer(str(owner)) or group.touch(str(owner), int(t))
        group.assign(d, c)
