"""Set commands (Redis 7's @set family) over the keyspace (engine/keyspace/sets.py).

Rule 1: a handler parses its arguments, calls one operation of engine/keyspace/sets.py (one
journaled keyspace operation per command) and returns the reply once it is committed; errors
are Redis 7.0's own texts in Redis's order (SPOP/SRANDMEMBER's count and SSCAN's cursor before
the key, SSCAN's options after it), a key of another kind is WRONGTYPE.
Rule 2: reads count in INFO keyspace_hits / keyspace_misses as Redis's lookupKeyRead
(`looked_up`), one per key read, the *STORE commands' sources included (SADD, SREM, SPOP and
SMOVE look up for writing: not counted).
Rule 3 (RESP3): SMEMBERS, SINTER, SUNION, SDIFF and SPOP with a count answer a set (`~`,
`Members`: in the set's order, an intset's sorted); SRANDMEMBER with a count, SMISMEMBER and
SSCAN's page an array, as redis-server 7.0.
"""

from __future__ import annotations

from typing import Any, Final

from topicsrv.engine.keyspace import sets as ops
from topicsrv.engine.keyspace.setvalue import SetValue
from topicsrv.errors import TopicsError
from topicsrv.resp.commands.base import (
    SYNTAX,
    CommandContext,
    Err,
    Members,
    command,
    committed,
    key_name,
    looked_up,
    parse_int,
)
from topicsrv.resp.commands.hashes import parse_cursor, scan_options
from topicsrv.resp.commands.keys import matcher

LONG_MAX: Final = (1 << 63) - 1
POSITIVE: Final = "ERR value is out of range, must be positive"


def _cmd(name: str, arity: int, flags: list[str], summary: str, syntax: str,
         since: str = "1.0.0", first: int = 1, last: int = 1) -> Any:
    step = 1 if first else 0
    return command(name, arity, flags, first, last, step, "set", summary, since, syntax=syntax)


def _read(ctx: CommandContext, key: bytes) -> SetValue | None:
    """A counted lookup (Rule 2)."""
    try:
        sv = ops.get(ctx.engine.keyspace, key_name(key))
    except TopicsError:
        looked_up(ctx, True)
        raise
    looked_up(ctx, sv is not None)
    return sv


def _names(keys: list[bytes], ctx: CommandContext) -> list[str]:
    """The key names of a multi-key read; each looked up (and counted, Rule 2) in order, so a
    key of another kind answers WRONGTYPE before anything else (sets.py Rule 2)."""
    for k in keys:
        _read(ctx, k)
    return [key_name(k) for k in keys]


@_cmd("sadd", -3, ["write", "denyoom", "fast"], "Add one or more members to a set",
      "key:key member:string...")
def sadd(ctx: CommandContext, args: list[bytes]) -> Any:
    n, token = ops.sadd(ctx.engine.keyspace, key_name(args[0]), args[1:])
    return committed(token, n)


@_cmd("srem", -3, ["write", "fast"], "Remove one or more members from a set",
      "key:key member:string...")
def srem(ctx: CommandContext, args: list[bytes]) -> Any:
    n, token = ops.srem(ctx.engine.keyspace, key_name(args[0]), args[1:])
    return committed(token, n)


@_cmd("smembers", 2, ["readonly"], "Get all the members in a set", "key:key")
def smembers(ctx: CommandContext, args: list[bytes]) -> Any:
    sv = _read(ctx, args[0])
    return Members() if sv is None else Members(sv)


@_cmd("sismember", 3, ["readonly", "fast"], "Determine if a given value is a member of a set",
      "key:key member:string")
def sismember(ctx: CommandContext, args: list[bytes]) -> Any:
    sv = _read(ctx, args[0])
    return int(sv is not None and args[1] in sv)


@_cmd("smismember", -3, ["readonly", "fast"], "Returns the membership associated with the "
      "given elements for a set", "key:key member:string...", "6.2.0")
def smismember(ctx: CommandContext, args: list[bytes]) -> Any:
    sv = _read(ctx, args[0])
    return [int(sv is not None and m in sv) for m in args[1:]]


@_cmd("scard", 2, ["readonly", "fast"], "Get the number of members in a set", "key:key")
def scard(ctx: CommandContext, args: list[bytes]) -> Any:
    sv = _read(ctx, args[0])
    return 0 if sv is None else len(sv)


@_cmd("spop", -2, ["write", "fast"], "Remove and return one or multiple random members from a "
      "set", "key:key [count:integer]")
def spop(ctx: CommandContext, args: list[bytes]) -> Any:
    if len(args) > 2:
        raise Err(SYNTAX)
    count = None
    if len(args) == 2:
        count = parse_int(args[1], POSITIVE)
        if count < 0:
            raise Err(POSITIVE)
    out, token = ops.spop(ctx.engine.keyspace, key_name(args[0]), count)
    return committed(token, out if count is None else Members(out))


@_cmd("srandmember", -2, ["readonly"], "Get one or multiple random members from a set",
      "key:key [count:integer]")
def srandmember(ctx: CommandContext, args: list[bytes]) -> Any:
    if len(args) > 2:
        raise Err(SYNTAX)
    if len(args) == 1:
        sv = _read(ctx, args[0])
        return None if sv is None else sv.pick()
    count = parse_int(args[1])
    if count < -LONG_MAX:
        raise Err(f"ERR value is out of range, value must between {-LONG_MAX} and {LONG_MAX}")
    sv = _read(ctx, args[0])
    if sv is None or count == 0:
        return []
    return ops.srandmember(sv, count)


@_cmd("smove", 4, ["write", "fast"], "Move a member from one set to another",
      "source:key destination:key member:string", first=1, last=2)
def smove(ctx: CommandContext, args: list[bytes]) -> Any:
    n, _, token = ops.smove(ctx.engine.keyspace, key_name(args[0]), key_name(args[1]), args[2])
    return committed(token, n)


@_cmd("sinter", -2, ["readonly"], "Intersect multiple sets", "key:key...", last=-1)
def sinter(ctx: CommandContext, args: list[bytes]) -> Any:
    return Members(ops.inter(ctx.engine.keyspace, _names(args, ctx)))


@_cmd("sintercard", -3, ["readonly", "movablekeys"], "Intersect multiple sets and return the "
      "cardinality of the result", "numkeys:integer key:key... [LIMIT:limit:integer]",
      "7.0.0", first=0, last=0)
def sintercard(ctx: CommandContext, args: list[bytes]) -> Any:
    numkeys = parse_int(args[0], "ERR numkeys should be greater than 0")
    if numkeys < 1:
        raise Err("ERR numkeys should be greater than 0")
    if numkeys > len(args) - 1:
        raise Err("ERR Number of keys can't be greater than number of args")
    limit = 0
    i = 1 + numkeys
    while i < len(args):
        if args[i].lower() == b"limit" and i + 1 < len(args):
            limit = parse_int(args[i + 1], "ERR LIMIT can't be negative")
            if limit < 0:
                raise Err("ERR LIMIT can't be negative")
            i += 2
        else:
            raise Err(SYNTAX)
    return len(ops.inter(ctx.engine.keyspace, _names(args[1:1 + numkeys], ctx), limit))


@_cmd("sunion", -2, ["readonly"], "Add multiple sets", "key:key...", last=-1)
def sunion(ctx: CommandContext, args: list[bytes]) -> Any:
    return Members(ops.union(ctx.engine.keyspace, _names(args, ctx)).members())


@_cmd("sdiff", -2, ["readonly"], "Subtract multiple sets", "key:key...", last=-1)
def sdiff(ctx: CommandContext, args: list[bytes]) -> Any:
    return Members(ops.diff(ctx.engine.keyspace, _names(args, ctx)).members())


def _store(ctx: CommandContext, args: list[bytes], result: SetValue | list[bytes]) -> Any:
    n, token = ops.store(ctx.engine.keyspace, key_name(args[0]), result)
    return committed(token, n)


@_cmd("sinterstore", -3, ["write", "denyoom"], "Intersect multiple sets and store the "
      "resulting set in a key", "destination:key key:key...", last=-1)
def sinterstore(ctx: CommandContext, args: list[bytes]) -> Any:
    return _store(ctx, args, ops.inter(ctx.engine.keyspace, _names(args[1:], ctx)))


@_cmd("sunionstore", -3, ["write", "denyoom"], "Add multiple sets and store the resulting set "
      "in a key", "destination:key key:key...", last=-1)
def sunionstore(ctx: CommandContext, args: list[bytes]) -> Any:
    return _store(ctx, args, ops.union(ctx.engine.keyspace, _names(args[1:], ctx)))


@_cmd("sdiffstore", -3, ["write", "denyoom"], "Subtract multiple sets and store the resulting "
      "set in a key", "destination:key key:key...", last=-1)
def sdiffstore(ctx: CommandContext, args: list[bytes]) -> Any:
    return _store(ctx, args, ops.diff(ctx.engine.keyspace, _names(args[1:], ctx)))


@_cmd("sscan", -3, ["readonly"], "Incrementally iterate Set elements",
      "key:key cursor:integer [MATCH:pattern:pattern] [COUNT:count:integer]", "2.8.0")
def sscan(ctx: CommandContext, args: list[bytes]) -> Any:
    cursor = parse_cursor(args[1])
    sv = _read(ctx, args[0])
    if sv is None:
        return [b"0", []]
    count, pattern = scan_options(args, 2)  # after the lookup, as Redis's scanGenericCommand
    nxt, members = ops.scan(sv, cursor, count)
    if pattern is not None and pattern != b"*":
        match = matcher(pattern)
        members = [m for m in members if match(m)]
    return [str(nxt).encode(), members]
