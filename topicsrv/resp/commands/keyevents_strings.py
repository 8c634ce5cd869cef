"""Keyspace notifications of the string and generic key commands (topicsrv/bus/keyspace.py),
as redis-server 7.0 fires them (checked with `CONFIG SET notify-keyspace-events KEAn` and a
`__key*__:*` subscriber; compat/test_keyspace_events.py replays a script on both servers).

Rule 1: an event fires only when the command wrote: the keyspace's write counter
(`stats["string_writes"]`, one per committed keyspace operation) moved across the handler.
A SET NX that found the key, a SETRANGE of an empty string, a PERSIST of a key without TTL,
a RENAME onto itself fire nothing, as Redis.
Rule 2: `new` (class n) fires before the command's own event when the key did not exist
before the command (after its lazy expiry, which fires `expired` first, as Redis's
lookupKeyWrite). RENAME and COPY always fire `new` for the destination: Redis deletes it
and adds it again.
Rule 3 (the events): SET/SETNX/GETSET/SETEX/PSETEX/MSET/MSETNX `set` per key (with a TTL
option, then `expire`); INCR/DECR/INCRBY/DECRBY `incrby`; INCRBYFLOAT `incrbyfloat`;
APPEND `append`; SETRANGE `setrange`; GETDEL `del`; GETEX `expire`, `persist`, or `del`
when the deadline is already past; EXPIRE family `expire`, or `del` when past; PERSIST
`persist`; RENAME/RENAMENX `rename_from` (source) then `rename_to`; COPY `copy_to`.
Strings are class `$`, the rest `g`. `expired` comes from the keyspace (space.py Rule 3).
Rule 4 (zero cost when off): a wrapped handler reads the enabled flags once and calls the
command untouched when they are 0.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from topicsrv.bus.keyspace import GENERIC, NEW, STRING, Notifications
from topicsrv.resp.commands import expire, strings  # noqa: F401 (registers the commands)
from topicsrv.resp.commands.base import REGISTRY, CommandContext, Err, Pending, key_name

Handler = Callable[[CommandContext, list[bytes]], Any]
Fire = Callable[[CommandContext, Notifications, Handler, list[bytes]], Any]
TTL_OPTIONS = {b"EX", b"PX", b"EXAT", b"PXAT"}


def _exists(ctx: CommandContext, key: bytes) -> bool:
    return ctx.engine.keyspace.kind(key_name(key)) is not None


def _gone(ctx: CommandContext, key: bytes) -> bool:
    """No such key now (no lazy expiry: the command just wrote it)."""
    name = key_name(key)
    return not ctx.engine.keyspace.owns(name) and name not in ctx.engine.topics


def _writes(ctx: CommandContext) -> int:
    return int(ctx.engine.keyspace.stats["string_writes"])


def _value(reply: Any) -> Any:
    return reply.reply if type(reply) is Pending else reply


def _has(args: list[bytes], options: set[bytes]) -> bool:
    return any(a.upper() in options for a in args)


def _run(ctx: CommandContext, inner: Handler, args: list[bytes]) -> tuple[Any, bool]:
    """The reply, and whether the command wrote (Rule 1)."""
    n = _writes(ctx)
    reply = inner(ctx, args)
    return reply, type(reply) is not Err and _writes(ctx) != n


def _one_key(klass: int, event: bytes, ttl: Callable[[list[bytes]], bool] | None = None) -> Fire:
    """A command writing its first argument: [new] event [expire] (Rules 2, 3)."""

    def fire(ctx: CommandContext, ks: Notifications, inner: Handler, args: list[bytes]) -> Any:
        key = args[0]
        existed = _exists(ctx, key)
        reply, wrote = _run(ctx, inner, args)
        if wrote:
            if not existed:
                ks.notify(NEW, b"new", key)
            ks.notify(klass, event, key)
            if ttl is not None and ttl(args):
                ks.notify(GENERIC, b"expire", key)
        return reply

    return fire


def _multi_set(ctx: CommandContext, ks: Notifications, inner: Handler, args: list[bytes]) -> Any:
    keys = args[0::2]
    fresh = {k for k in keys if not _exists(ctx, k)}
    reply, wrote = _run(ctx, inner, args)
    if wrote:
        for key in keys:
            if key in fresh:
                fresh.discard(key)
                ks.notify(NEW, b"new", key)
            ks.notify(STRING, b"set", key)
    return reply


def _ttl_change(persist_option: bool) -> Fire:
    """GETEX and the EXPIRE family: `expire`, `persist`, or `del` when it deleted the key."""

    def fire(ctx: CommandContext, ks: Notifications, inner: Handler, args: list[bytes]) -> Any:
        key = args[0]
        _exists(ctx, key)  # lazy expiry (and its `expired`) before the command, as Redis
        reply, wrote = _run(ctx, inner, args)
        if wrote:
            if _gone(ctx, key):
                ks.notify(GENERIC, b"del", key)
            elif persist_option and _has(args[1:], {b"PERSIST"}):
                ks.notify(GENERIC, b"persist", key)
            else:
                ks.notify(GENERIC, b"expire", key)
        return reply

    return fire


def _getdel(ctx: CommandContext, ks: Notifications, inner: Handler, args: list[bytes]) -> Any:
    reply, wrote = _run(ctx, inner, args)
    if wrote:
        ks.notify(GENERIC, b"del", args[0])
    return reply


def _persist(ctx: CommandContext, ks: Notifications, inner: Handler, args: list[bytes]) -> Any:
    reply, wrote = _run(ctx, inner, args)
    if wrote:
        ks.notify(GENERIC, b"persist", args[0])
    return reply


def _rename(ctx: CommandContext, ks: Notifications, inner: Handler, args: list[bytes]) -> Any:
    reply, wrote = _run(ctx, inner, args)
    if wrote:
        ks.notify(NEW, b"new", args[1])
        ks.notify(GENERIC, b"rename_from", args[0])
        ks.notify(GENERIC, b"rename_to", args[1])
    return reply


def _copy(ctx: CommandContext, ks: Notifications, inner: Handler, args: list[bytes]) -> Any:
    reply, wrote = _run(ctx, inner, args)
    if wrote and _value(reply) == 1:
        ks.notify(NEW, b"new", args[1])
        ks.notify(GENERIC, b"copy_to", args[1])
    return reply


def _set_ttl(args: list[bytes]) -> bool:
    return _has(args[2:], TTL_OPTIONS)


def _always(args: list[bytes]) -> bool:
    return True


EVENTS: dict[str, Fire] = {
    "set": _one_key(STRING, b"set", _set_ttl),
    "setnx": _one_key(STRING, b"set"),
    "getset": _one_key(STRING, b"set"),
    "setex": _one_key(STRING, b"set", _always),
    "psetex": _one_key(STRING, b"set", _always),
    "mset": _multi_set,
    "msetnx": _multi_set,
    "incr": _one_key(STRING, b"incrby"),
    "decr": _one_key(STRING, b"incrby"),
    "incrby": _one_key(STRING, b"incrby"),
    "decrby": _one_key(STRING, b"incrby"),
    "incrbyfloat": _one_key(STRING, b"incrbyfloat"),
    "append": _one_key(STRING, b"append"),
    "setrange": _one_key(STRING, b"setrange"),
    "getdel": _getdel,
    "getex": _ttl_change(True),
    "expire": _ttl_change(False),
    "pexpire": _ttl_change(False),
    "expireat": _ttl_change(False),
    "pexpireat": _ttl_change(False),
    "persist": _persist,
    "rename": _rename,
    "renamenx": _rename,
    "copy": _copy,
}


def _wrap(name: str, fire: Fire) -> None:
    spec = REGISTRY[name]
    inner = spec.handler
    assert inner is not None and not spec.is_async

    def handler(ctx: CommandContext, args: list[bytes]) -> Any:
        ks = ctx.server.bus.keyspace
        if not ks.flags:  # Rule 4
            return inner(ctx, args)
        return fire(ctx, ks, inner, args)

    spec.handler = handler


for _name, _fire in EVENTS.items():
    _wrap(_name, _fire)
