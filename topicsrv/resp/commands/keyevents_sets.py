"""Keyspace notifications of the set commands (class `s`, topicsrv/bus/keyspace.py), as
redis-server 7.0 fires them.

Rule 1: as the list events (keyevents_lists.py Rule 1): an event fires only when the command
wrote, `new` first for a key the command created, nothing at all while notifications are off.
Rule 2 (the events): SADD `sadd`, SREM `srem`, SPOP `spop` (one per command), then `del` when
the command emptied the set. SMOVE: the source's `srem` (and `del` when emptied), then the
destination's `new` when created and `sadd` when it gained the member (Redis's smoveCommand).
SINTERSTORE/SUNIONSTORE/SDIFFSTORE: `new` when the destination did not exist, then
`sinterstore`/`sunionstore`/`sdiffstore` on it; an empty result deletes the destination:
`del`, when it existed.
"""

from __future__ import annotations

from typing import Any

from topicsrv.bus.keyspace import GENERIC, NEW, SET, Notifications
from topicsrv.engine.keyspace import sets as set_ops
from topicsrv.errors import TopicsError
from topicsrv.resp.commands import sets  # noqa: F401 (registers the commands)
from topicsrv.resp.commands.base import CommandContext, key_name
from topicsrv.resp.commands.keyevents_lists import edit
from topicsrv.resp.commands.keyevents_strings import (
    Fire,
    Handler,
    _exists,
    _gone,
    _run,
    _value,
    _wrap,
)


def _smove(ctx: CommandContext, ks: Notifications, inner: Handler, args: list[bytes]) -> Any:
    src, dst, member = args[0], args[1], args[2]
    fresh = not _exists(ctx, dst)
    try:
        dv = set_ops.get(ctx.engine.keyspace, key_name(dst))
    except TopicsError:  # another kind: the command answers WRONGTYPE
        dv = None
    had = dv is not None and member in dv
    reply, wrote = _run(ctx, inner, args)
    if wrote:
        ks.notify(SET, b"srem", src)
        if _gone(ctx, src):
            ks.notify(GENERIC, b"del", src)
        if fresh:
            ks.notify(NEW, b"new", dst)
        if not had:
            ks.notify(SET, b"sadd", dst)
    return reply


def _store(event: bytes) -> Fire:
    def fire(ctx: CommandContext, ks: Notifications, inner: Handler, args: list[bytes]) -> Any:
        key = args[0]
        existed = _exists(ctx, key)
        reply, wrote = _run(ctx, inner, args)
        n = _value(reply)
        if wrote and isinstance(n, int):
            if n > 0:
                if not existed:
                    ks.notify(NEW, b"new", key)
                ks.notify(SET, event, key)
            elif existed:
                ks.notify(GENERIC, b"del", key)
        return reply

    return fire


EVENTS: dict[str, Fire] = {
    "sadd": edit(b"sadd", klass=SET), "srem": edit(b"srem", klass=SET),
    "spop": edit(b"spop", klass=SET), "smove": _smove,
    "sinterstore": _store(b"sinterstore"), "sunionstore": _store(b"sunionstore"),
    "sdiffstore": _store(b"sdiffstore"),
}

for _name, _fire in EVENTS.items():
    _wrap(_name, _fire)
