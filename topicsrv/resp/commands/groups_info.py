"""XINFO GROUPS and XINFO CONSUMERS, and the group part of XINFO STREAM [FULL] (installed into
base.HOOKS at import, see base.py's decision on XINFO).

Rule: read-only; every field and its order is Redis's reply for the same command.
"""

from __future__ import annotations

from typing import Any

from topicsrv.engine import groups as eg
from topicsrv.engine.log.topic import Topic
from topicsrv.resp.commands.base import HOOKS, CommandContext, Err
from topicsrv.resp.commands.group_args import command, delivery_id, group_last_id, stream, text

# ---- XINFO GROUPS | CONSUMERS, and XINFO STREAM's group part ---------------------------------


def group_info(topic: Topic, g: eg.Group) -> dict[str, Any]:
    return {
        "name": g.name,
        "consumers": len(g.consumers),
        "pending": len(g.pel),
        "last-delivered-id": group_last_id(topic, g),
        "entries-read": g.entries_read,
        "lag": eg.lag(topic, g),
    }


@command("xinfo|groups", 3, ["readonly"], 2, 2, 1,
         "Returns a list of the consumer groups of a stream.", "key:key")
def xinfo_groups(ctx: CommandContext, args: list[bytes]) -> Any:
    topic = stream(ctx, args[0])
    if topic is None:
        raise Err("ERR no such key")
    gs = eg.groups_of(topic)
    return [group_info(topic, g) for g in gs] if gs is not None else []


@command("xinfo|consumers", 4, ["readonly"], 2, 2, 1,
         "Returns a list of the consumers in a consumer group.", "key:key group:string")
def xinfo_consumers(ctx: CommandContext, args: list[bytes]) -> Any:
    topic = stream(ctx, args[0])
    if topic is None:
        raise Err("ERR no such key")
    group = eg.find(topic, text(args[1]))
    if group is None:
        raise Err(f"NOGROUP No such consumer group '{text(args[1])}' for key name '{text(args[0])}'")
    now = ctx.engine.now()
    return [{"name": c.name, "pending": len(c.pel), "idle": max(0, now - c.seen_time)}
            for c in group.consumers.values()]


def _groups_count(ctx: CommandContext, topic: Topic) -> int:
    gs = eg.groups_of(topic)
    return 0 if gs is None else len(gs)


def _full_groups(ctx: CommandContext, topic: Topic, count: int) -> list[Any]:
    gs = eg.groups_of(topic)
    out: list[Any] = []
    for g in gs or ():
        pel = list(g.pel.values())
        if count:
            pel = pel[:count]
        consumers = []
        for c in g.consumers.values():
            own = list(c.pel.values())[:count] if count else list(c.pel.values())
            consumers.append({
                "name": c.name, "seen-time": c.seen_time, "pel-count": len(c.pel),
                "pending": [[delivery_id(d, topic), d.time, d.count] for d in own],
            })
        out.append({
            "name": g.name, "last-delivered-id": group_last_id(topic, g),
            "entries-read": g.entries_read, "lag": eg.lag(topic, g), "pel-count": len(g.pel),
            "pending": [[delivery_id(d, topic), d.consumer, d.time, d.count] for d in pel],
            "consumers": consumers,
        })
    return out


HOOKS["xinfo_stream_groups_count"] = _groups_count
HOOKS["xinfo_stream_full_groups"] = _full_groups
