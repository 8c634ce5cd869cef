"""Generic key commands over both kinds of key: the EXPIRE family, TTL family, PERSIST,
RENAME/RENAMENX, COPY, TOUCH, RANDOMKEY (Redis 7 replies and errors).

Rule 1: a TTL is an absolute Unix-ms deadline in the keyspace's one expiry index
(engine/keyspace/expiry.py), for strings and topics alike; a deadline already past deletes
the key (a topic exactly as DEL) and answers 1, as Redis's checkAlreadyExpired.
Rule 2: options are parsed before the number (redis-server's expireGenericCommand order).
Rule 3: RENAME/RENAMENX/COPY of a topic answer a clear `ERR` (docs/redis-compatibility.md):
a topic's name is its identity for routers, consumer groups and its storage directory.
"""

from __future__ import annotations

import random
from typing import Any

from topicsrv.engine.keyspace import strings as ops
from topicsrv.resp.commands.base import (
    SYNTAX,
    CommandContext,
    Err,
    Simple,
    command,
    committed,
    key_name,
    kind_of,
    parse_int,
)

I64_MAX, I64_MIN = (1 << 63) - 1, -(1 << 63)
_random = random.Random()  # RANDOMKEY's draws


def _cmd(name: str, arity: int, flags: list[str], first: int, last: int, summary: str,
         syntax: str, since: str = "1.0.0") -> Any:
    return command(name, arity, flags, first, last, 1 if first else 0, "generic", summary, since,
                   syntax=syntax)


_EXPIRE_SYNTAX = "key:key {}:{} [(NX|XX|GT|LT)]"


def _expire(ctx: CommandContext, args: list[bytes], scale: int, absolute: bool, cmd: str) -> Any:
    nx = xx = gt = lt = False
    for raw in args[2:]:
        opt = raw.lower()
        if opt == b"nx":
            nx = True
        elif opt == b"xx":
            xx = True
        elif opt == b"gt":
            gt = True
        elif opt == b"lt":
            lt = True
        else:
            raise Err(f"ERR Unsupported option {raw.decode('utf-8', 'replace')}")
    if nx and (xx or gt or lt):
        raise Err("ERR NX and XX, GT or LT options at the same time are not compatible")
    if gt and lt:
        raise Err("ERR GT and LT options at the same time are not compatible")
    when = parse_int(args[1])
    invalid = Err(f"ERR invalid expire time in '{cmd}' command")
    if scale != 1:
        if when > I64_MAX // scale or when < -(-I64_MIN // scale):  # C's LLONG_MIN / 1000
            raise invalid
        when *= scale
    base = 0 if absolute else ctx.engine.now()
    if when > I64_MAX - base:
        raise invalid
    n, token = ops.set_deadline(ctx.engine.keyspace, key_name(args[0]), when + base, nx, xx, gt, lt)
    return committed(token, n)


@_cmd("expire", -3, ["write", "fast"], 1, 1, "Set a key's time to live in seconds",
      _EXPIRE_SYNTAX.format("seconds", "integer"))
def expire(ctx: CommandContext, args: list[bytes]) -> Any:
    return _expire(ctx, args, 1000, False, "expire")


@_cmd("pexpire", -3, ["write", "fast"], 1, 1, "Set a key's time to live in milliseconds",
      _EXPIRE_SYNTAX.format("milliseconds", "integer"), "2.6.0")
def pexpire(ctx: CommandContext, args: list[bytes]) -> Any:
    return _expire(ctx, args, 1, False, "pexpire")


@_cmd("expireat", -3, ["write", "fast"], 1, 1,
      "Set the expiration for a key as a UNIX timestamp",
      _EXPIRE_SYNTAX.format("unix-time-seconds", "unix-time"), "1.2.0")
def expireat(ctx: CommandContext, args: list[bytes]) -> Any:
    return _expire(ctx, args, 1000, True, "expireat")


@_cmd("pexpireat", -3, ["write", "fast"], 1, 1,
      "Set the expiration for a key as a UNIX timestamp specified in milliseconds",
      _EXPIRE_SYNTAX.format("unix-time-milliseconds", "unix-time"), "2.6.0")
def pexpireat(ctx: CommandContext, args: list[bytes]) -> Any:
    return _expire(ctx, args, 1, True, "pexpireat")


def _ttl(ctx: CommandContext, key: bytes, ms: bool, absolute: bool) -> int:
    ks = ctx.engine.keyspace
    name = key_name(key)
    if kind_of(ctx, key) is None:
        return -2
    deadline = ks.deadline(name)
    if deadline is None:
        return -1
    ttl = deadline if absolute else max(0, deadline - ctx.engine.now())
    return ttl if ms else (ttl + 500) // 1000


@_cmd("ttl", 2, ["readonly", "fast"], 1, 1, "Get the time to live for a key in seconds", "key:key")
def ttl(ctx: CommandContext, args: list[bytes]) -> Any:
    return _ttl(ctx, args[0], False, False)


@_cmd("pttl", 2, ["readonly", "fast"], 1, 1, "Get the time to live for a key in milliseconds",
      "key:key", "2.6.0")
def pttl(ctx: CommandContext, args: list[bytes]) -> Any:
    return _ttl(ctx, args[0], True, False)


@_cmd("expiretime", 2, ["readonly", "fast"], 1, 1,
      "Get the expiration Unix timestamp for a key", "key:key", "7.0.0")
def expiretime(ctx: CommandContext, args: list[bytes]) -> Any:
    return _ttl(ctx, args[0], False, True)


@_cmd("pexpiretime", 2, ["readonly", "fast"], 1, 1,
      "Get the expiration Unix timestamp for a key in milliseconds", "key:key", "7.0.0")
def pexpiretime(ctx: CommandContext, args: list[bytes]) -> Any:
    return _ttl(ctx, args[0], True, True)


@_cmd("persist", 2, ["write", "fast"], 1, 1, "Remove the expiration from a key", "key:key",
      "2.2.0")
def persist(ctx: CommandContext, args: list[bytes]) -> Any:
    n, token = ops.persist(ctx.engine.keyspace, key_name(args[0]))
    return committed(token, n)


@_cmd("rename", 3, ["write"], 1, 2, "Rename a key", "key:key newkey:key")
def rename(ctx: CommandContext, args: list[bytes]) -> Any:
    _, token = ops.rename(ctx.engine.keyspace, key_name(args[0]), key_name(args[1]), False)
    return committed(token, Simple("OK"))


@_cmd("renamenx", 3, ["write", "fast"], 1, 2, "Rename a key, only if the new key does not exist",
      "key:key newkey:key")
def renamenx(ctx: CommandContext, args: list[bytes]) -> Any:
    n, token = ops.rename(ctx.engine.keyspace, key_name(args[0]), key_name(args[1]), True)
    return committed(token, n)


@_cmd("copy", -3, ["write", "denyoom"], 1, 2, "Copy a key",
      "source:key destination:key [DB:destination-db:integer] [REPLACE]", "6.2.0")
def copy(ctx: CommandContext, args: list[bytes]) -> Any:
    replace = False
    i = 2
    while i < len(args):
        opt = args[i].lower()
        if opt == b"replace":
            replace = True
        elif opt == b"db" and i + 1 < len(args):
            db = parse_int(args[i + 1])
            if db != 0:
                raise Err("ERR DB index is out of range")
            i += 1
        else:
            raise Err(SYNTAX)
        i += 1
    if args[0] == args[1]:
        raise Err("ERR source and destination objects are the same")
    n, token = ops.copy(ctx.engine.keyspace, key_name(args[0]), key_name(args[1]), replace)
    return committed(token, n)


@_cmd("touch", -2, ["readonly", "fast"], 1, -1,
      "Alters the last access time of a key(s). Returns the number of existing keys specified.",
      "key:key...", "3.2.1")
def touch(ctx: CommandContext, args: list[bytes]) -> Any:
    ks = ctx.engine.keyspace
    n = 0
    for a in args:
        name = key_name(a)
        if ks.kind(name) is not None:
            n += 1
            if ks.owns(name):
                ks.touch(name)
    return n


@_cmd("randomkey", 1, ["readonly"], 0, 0, "Return a random key from the keyspace", "")
def randomkey(ctx: CommandContext, args: list[bytes]) -> Any:
    ks = ctx.engine.keyspace
    total = ks.size()
    if not total:
        return None
    i = _random.randrange(total)
    order = ks.order
    name: str = order.choice(_random) if i < len(order) else \
        ctx.engine.topics.keys()[i - len(order)]
    return name.encode("latin-1")
