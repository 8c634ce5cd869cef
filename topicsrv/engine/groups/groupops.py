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
"""

from __future__ import annotations

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
