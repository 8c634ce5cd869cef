"""Keyspace notifications of the RESP commands (topicsrv/bus/keyspace.py), as redis-server's
`notifyKeyspaceEvent` calls: `EVENTS` names, for each command that changes a key, the class,
the event and when it fires; the handlers are wrapped at import (this module registers no
command of its own).

Rule 1: an event fires only when the command succeeded and changed something (XDEL/XTRIM of
nothing, XGROUP DESTROY of a missing group, CREATECONSUMER of an existing one fire nothing),
after the change, with the key as the client spelled it.
Rule 2 (zero cost when off): a wrapped handler checks the enabled flags before anything else.
XADD (`new`, `xadd`, `xtrim`) notifies inline (streams.py), and a run of XADDs is not
coalesced while notifications are on (batch.py), so each gets its events.
Rule 3: DEL/UNLINK fire `del` for each key that existed (a string or a topic).
Rule 4: XGROUP CREATE ... MKSTREAM that creates the stream fires `new` before `xgroup-create`.
Rule 5 (implicit consumers, as redis-server 7.0): XREADGROUP, XCLAIM and XAUTOCLAIM fire
`xgroup-createconsumer` for each stream key whose group did not have the consumer before the
command and has it after (a reply given at once; a blocked XREADGROUP fires nothing). XGROUP
DELCONSUMER fires only when the consumer existed.
The string and generic key commands are in keyevents_strings.py.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from topicsrv.bus.keyspace import GENERIC, NEW, STREAM
from topicsrv.engine import groups as eg
from topicsrv.resp.commands import (  # noqa: F401 (registers)
    groups,
    groups_ack,
    groups_claim,
    keys,
    streams,
    streams_setid,
)
from topicsrv.resp.commands.base import REGISTRY, CommandContext, Err, Pending, key_name
from topicsrv.resp.commands.stream_args import parse_read_args
from topicsrv.resp.dispatch import is_awaitable

Fires = Callable[[Any], bool]


def _value(reply: Any) -> Any:
    return reply.reply if type(reply) is Pending else reply


def _always(reply: Any) -> bool:
    return True


def _positive(reply: Any) -> bool:
    v = _value(reply)
    return type(v) is int and v > 0


# command -> (class, event, when it fires, index of the key among the arguments)
EVENTS: dict[str, tuple[int, bytes, Fires, int]] = {
    "xdel": (STREAM, b"xdel", _positive, 0),
    "xtrim": (STREAM, b"xtrim", _positive, 0),
    "xsetid": (STREAM, b"xsetid", _always, 0),
    "xgroup|create": (STREAM, b"xgroup-create", _always, 0),
    "xgroup|setid": (STREAM, b"xgroup-setid", _always, 0),
    "xgroup|destroy": (STREAM, b"xgroup-destroy", _positive, 0),
    "xgroup|createconsumer": (STREAM, b"xgroup-createconsumer", _positive, 0),
}


def _spec(name: str) -> Any:
    """The registered spec of a command or `parent|sub` subcommand (synchronous handlers)."""
    parent = name.partition("|")[0]
    spec = REGISTRY[parent].subcommands[name] if "|" in name else REGISTRY[name]
    assert spec.handler is not None and not spec.is_async
    return spec


def _wrap(name: str, klass: int, event: bytes, fires: Fires, index: int) -> None:
    spec = _spec(name)
    inner = spec.handler

    mkstream = name == "xgroup|create"

    def handler(ctx: CommandContext, args: list[bytes]) -> Any:
        ks = ctx.server.bus.keyspace
        if not ks.flags:
            return inner(ctx, args)
        created = mkstream and ctx.engine.keyspace.kind(key_name(args[index])) is None
        reply = inner(ctx, args)
        if type(reply) is not Err and fires(reply):
            if created:  # Rule 4 (the reply is OK only when MKSTREAM made it)
                ks.notify(NEW, b"new", args[index])
            ks.notify(klass, event, args[index])
        return reply

    spec.handler = handler


def _wrap_delete(name: str) -> None:
    spec = REGISTRY[name]
    inner = spec.handler
    assert inner is not None

    def handler(ctx: CommandContext, args: list[bytes]) -> Any:
        ks = ctx.server.bus.keyspace
        if not ks.flags & GENERIC:
            return inner(ctx, args)
        space = ctx.engine.keyspace
        existed = [a for a in args if space.kind(key_name(a)) is not None]
        reply = inner(ctx, args)
        if type(reply) is not Err:
            for key in dict.fromkeys(existed):
                ks.notify(GENERIC, b"del", key)
        return reply

    spec.handler = handler


def _consumer(ctx: CommandContext, key: bytes, group: bytes, consumer: bytes) -> bool | None:
    """Whether the group of stream `key` has `consumer`; None without such a stream/group."""
    topic = ctx.engine.find(key_name(key))
    if topic is None or topic.type != "log":
        return None
    g = eg.find(topic, group.decode("utf-8", "surrogateescape"))
    if g is None:
        return None
    return g.consumer(consumer.decode("utf-8", "surrogateescape")) is not None


def _targets(name: str, args: list[bytes]) -> list[tuple[bytes, bytes, bytes]]:
    """(key, group, consumer) for each stream the command may add the consumer to."""
    if name != "xreadgroup":
        return [(args[0], args[1], args[2])]  # XCLAIM / XAUTOCLAIM / DELCONSUMER: key group consumer
    try:
        ra = parse_read_args(args, group=True)
    except Err:
        return []  # the handler answers the error itself
    assert ra.group is not None and ra.consumer is not None
    group = ra.group.encode("utf-8", "surrogateescape")
    consumer = ra.consumer.encode("utf-8", "surrogateescape")
    return [(key, group, consumer) for key in dict.fromkeys(ra.keys)]


def _wrap_consumers(name: str) -> None:
    """Rule 5 for XREADGROUP, XCLAIM, XAUTOCLAIM and XGROUP DELCONSUMER."""
    spec = _spec(name)
    inner = spec.handler
    deleting = name == "xgroup|delconsumer"

    def handler(ctx: CommandContext, args: list[bytes]) -> Any:
        ks = ctx.server.bus.keyspace
        if not ks.flags & STREAM:
            return inner(ctx, args)
        targets = _targets(name, args)
        before = [_consumer(ctx, k, g, c) for k, g, c in targets]
        reply = inner(ctx, args)
        if type(reply) is Err or is_awaitable(reply):
            return reply
        for (key, group, consumer), had in zip(targets, before, strict=True):
            if deleting:
                if had:
                    ks.notify(STREAM, b"xgroup-delconsumer", key)
            elif had is False and _consumer(ctx, key, group, consumer):
                ks.notify(STREAM, b"xgroup-createconsumer", key)
        return reply

    spec.handler = handler


for _name in ("xreadgroup", "xclaim", "xautoclaim", "xgroup|delconsumer"):
    _wrap_consumers(_name)
for _name, (_klass, _event, _fires, _index) in EVENTS.items():
    _wrap(_name, _klass, _event, _fires, _index)
for _name in ("del", "unlink"):
    _wrap_delete(_name)
