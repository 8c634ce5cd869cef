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
The string and generic key commands are in keyevents_strings.py.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from topicsrv.bus.keyspace import GENERIC, NEW, STREAM
from topicsrv.resp.commands import groups, keys, streams, streams_setid  # noqa: F401 (registers)
from topicsrv.resp.commands.base import REGISTRY, CommandContext, Err, Pending, key_name

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
    "xgroup|delconsumer": (STREAM, b"xgroup-delconsumer", _always, 0),
}


def _wrap(name: str, klass: int, event: bytes, fires: Fires, index: int) -> None:
    parent = name.partition("|")[0]
    spec = REGISTRY[parent].subcommands[name] if "|" in name else REGISTRY[name]
    inner = spec.handler
    assert inner is not None and not spec.is_async

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


for _name, (_klass, _event, _fires, _index) in EVENTS.items():
    _wrap(_name, _klass, _event, _fires, _index)
for _name in ("del", "unlink"):
    _wrap_delete(_name)
