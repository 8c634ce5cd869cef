"""Keyspace notifications of the sorted-set commands (class `z`, topicsrv/bus/keyspace.py), as
redis-server 7.0 fires them (compat/test_keyspace_events.py replays a script on both servers).

Rule 1: as the list events (keyevents_lists.py Rule 1): an event fires only when the command
wrote, `new` first for a key the command created, nothing at all while notifications are off.
Rule 2 (the events): ZADD `zadd` (`zincr` with INCR), ZINCRBY `zincr`, one per command when a
member was added or its score changed; ZREM `zrem`; ZREMRANGEBYRANK/SCORE/LEX
`zremrangebyrank`/`zremrangebyscore`/`zremrangebylex`; ZPOPMIN/ZPOPMAX and ZMPOP
`zpopmin`/`zpopmax`; then `del` when the command emptied the set.
Rule 3 (stores): ZRANGESTORE, ZUNIONSTORE, ZINTERSTORE, ZDIFFSTORE fire `zrangestore`,
`zunionstore`, ... on the destination when the result has members (`new` first when the key
did not exist), else `del` when a destination was deleted.
Rule 4: the blocking pops fire nothing, as the blocking list pops here (a known difference).
"""

from __future__ import annotations

from typing import Any

from topicsrv.bus.keyspace import GENERIC, NEW, ZSET, Notifications
from topicsrv.resp.commands import zsets, zsets_multi, zsets_range  # noqa: F401 (registers them)
from topicsrv.resp.commands.base import CommandContext
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

_ZADD, _ZINCR = edit(b"zadd", klass=ZSET), edit(b"zincr", klass=ZSET)


def _zadd(ctx: CommandContext, ks: Notifications, inner: Handler, args: list[bytes]) -> Any:
    incr = any(a.lower() == b"incr" for a in args[1:])
    return (_ZINCR if incr else _ZADD)(ctx, ks, inner, args)


def _mpop(ctx: CommandContext, ks: Notifications, inner: Handler, args: list[bytes]) -> Any:
    reply, wrote = _run(ctx, inner, args)
    if wrote:
        key: bytes = _value(reply)[0]
        numkeys = int(args[0])
        top = args[1 + numkeys].upper() == b"MAX"
        ks.notify(ZSET, b"zpopmax" if top else b"zpopmin", key)
        if _gone(ctx, key):
            ks.notify(GENERIC, b"del", key)
    return reply


def _store(event: bytes) -> Fire:
    def fire(ctx: CommandContext, ks: Notifications, inner: Handler, args: list[bytes]) -> Any:
        dst = args[0]
        existed = _exists(ctx, dst)
        reply, wrote = _run(ctx, inner, args)
        if wrote:
            if _value(reply):
                if not existed:
                    ks.notify(NEW, b"new", dst)
                ks.notify(ZSET, event, dst)
            else:
                ks.notify(GENERIC, b"del", dst)
        return reply

    return fire


EVENTS: dict[str, Fire] = {
    "zadd": _zadd, "zincrby": _ZINCR, "zrem": edit(b"zrem", klass=ZSET),
    "zremrangebyrank": edit(b"zremrangebyrank", klass=ZSET),
    "zremrangebyscore": edit(b"zremrangebyscore", klass=ZSET),
    "zremrangebylex": edit(b"zremrangebylex", klass=ZSET),
    "zpopmin": edit(b"zpopmin", klass=ZSET), "zpopmax": edit(b"zpopmax", klass=ZSET),
    "zmpop": _mpop,
    "zrangestore": _store(b"zrangestore"), "zunionstore": _store(b"zunionstore"),
    "zinterstore": _store(b"zinterstore"), "zdiffstore": _store(b"zdiffstore"),
}

for _name, _fire in EVENTS.items():
    _wrap(_name, _fire)
