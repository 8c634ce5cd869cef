"""Keyspace notifications of the list commands (class `l`, topicsrv/bus/keyspace.py), as
redis-server 7.0 fires them (compat/test_keyspace_events.py replays a script on both servers).

Rule 1: as the string events (keyevents_strings.py Rules 1, 2 and 4): an event fires only when
the command wrote, `new` first for a key the command created, nothing at all while
notifications are off.
Rule 2 (the events): LPUSH/LPUSHX `lpush`, RPUSH/RPUSHX `rpush`, one per command; LPOP/RPOP
and LMPOP `lpop`/`rpop`; LSET `lset`; LINSERT `linsert`; LREM `lrem`; LTRIM `ltrim`; then
`del` when the command emptied the list. LMOVE/RPOPLPUSH: the destination's `new` and
`lpush`/`rpush` first, then the source's `lpop`/`rpop` and its `del` when emptied.
"""

from __future__ import annotations

from typing import Any

from topicsrv.bus.keyspace import GENERIC, LIST, NEW, Notifications
from topicsrv.resp.commands import lists  # noqa: F401 (registers the commands)
from topicsrv.resp.commands.base import CommandContext
from topicsrv.resp.commands.keyevents_strings import (
    Fire,
    Handler,
    _exists,
    _gone,
    _run,
    _value,
    _wrap,
)


def edit(event: bytes, arg: int = 0, klass: int = LIST) -> Fire:
    """A command changing the collection at args[arg]: [new] event [del] (the hash commands
    use it too, with class `h`: keyevents_hashes.py)."""

    def fire(ctx: CommandContext, ks: Notifications, inner: Handler, args: list[bytes]) -> Any:
        key = args[arg]
        existed = _exists(ctx, key)
        reply, wrote = _run(ctx, inner, args)
        if wrote:
            if not existed:
                ks.notify(NEW, b"new", key)
            ks.notify(klass, event, key)
            if _gone(ctx, key):
                ks.notify(GENERIC, b"del", key)
        return reply

    return fire


def _move(from_arg: int | None, to_arg: int | None) -> Fire:
    """LMOVE (sides in args[from_arg], args[to_arg]) and RPOPLPUSH (None: RIGHT, LEFT)."""

    def fire(ctx: CommandContext, ks: Notifications, inner: Handler, args: list[bytes]) -> Any:
        src, dst = args[0], args[1]
        fresh = not _exists(ctx, dst)
        reply, wrote = _run(ctx, inner, args)
        if wrote:
            left_from = from_arg is not None and args[from_arg].upper() == b"LEFT"
            left_to = to_arg is None or args[to_arg].upper() == b"LEFT"
            if fresh and src != dst:
                ks.notify(NEW, b"new", dst)
            ks.notify(LIST, b"lpush" if left_to else b"rpush", dst)
            ks.notify(LIST, b"lpop" if left_from else b"rpop", src)
            if _gone(ctx, src):
                ks.notify(GENERIC, b"del", src)
        return reply

    return fire


def _mpop(ctx: CommandContext, ks: Notifications, inner: Handler, args: list[bytes]) -> Any:
    reply, wrote = _run(ctx, inner, args)
    if wrote:
        key: bytes = _value(reply)[0]
        numkeys = int(args[0])
        left = args[1 + numkeys].upper() == b"LEFT"
        ks.notify(LIST, b"lpop" if left else b"rpop", key)
        if _gone(ctx, key):
            ks.notify(GENERIC, b"del", key)
    return reply


EVENTS: dict[str, Fire] = {
    "lpush": edit(b"lpush"), "lpushx": edit(b"lpush"),
    "rpush": edit(b"rpush"), "rpushx": edit(b"rpush"),
    "lpop": edit(b"lpop"), "rpop": edit(b"rpop"),
    "lset": edit(b"lset"), "linsert": edit(b"linsert"),
    "lrem": edit(b"lrem"), "ltrim": edit(b"ltrim"),
    "lmove": _move(2, 3), "rpoplpush": _move(None, None),
    "lmpop": _mpop,
}

for _name, _fire in EVENTS.items():
    _wrap(_name, _fire)
