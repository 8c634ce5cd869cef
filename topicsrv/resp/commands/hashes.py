"""Hash commands (Redis 7's @hash family) over the keyspace (engine/keyspace/hashes.py).

Rule 1: a handler parses its arguments, calls one operation of engine/keyspace/hashes.py (one
journaled keyspace operation per command) and returns the reply once it is committed; errors
are Redis 7.0's own texts, in Redis's order (arguments checked before the key unless Redis
looks the key up first: HSCAN's options, HRANDFIELD's count 0), a key of another kind is
WRONGTYPE.
Rule 2: reads count in INFO keyspace_hits / keyspace_misses as Redis's lookupKeyRead
(`looked_up`; a key of another kind is a hit).
Rule 3 (RESP3): HGETALL answers a map (an empty map for a missing key), HRANDFIELD ...
WITHVALUES an array of [field, value] pairs; RESP2 flattens both.
"""

from __future__ import annotations

from typing import Any

from topicsrv.engine.keyspace import hashes as ops
from topicsrv.engine.keyspace.hashvalue import HashValue
from topicsrv.engine.keyspace.scanorder import U64
from topicsrv.errors import TopicsError
from topicsrv.resp.commands.base import (
    SYNTAX,
    CommandContext,
    Err,
    Simple,
    command,
    committed,
    key_name,
    looked_up,
    parse_int,
    wrong_args,
)
from topicsrv.resp.commands.keys import matcher

OK = Simple("OK")
LONG_MAX = (1 << 63) - 1


def _cmd(name: str, arity: int, flags: list[str], summary: str, syntax: str,
         since: str = "2.0.0") -> Any:
    return command(name, arity, flags, 1, 1, 1, "hash", summary, since, syntax=syntax)


def _read(ctx: CommandContext, key: bytes) -> HashValue | None:
    """A counted lookup (Rule 2)."""
    try:
        hv = ops.get(ctx.engine.keyspace, key_name(key))
    except TopicsError:
        looked_up(ctx, True)
        raise
    looked_up(ctx, hv is not None)
    return hv


def _hset(ctx: CommandContext, args: list[bytes], cmd: str) -> tuple[int, Any]:
    """HSET/HMSET: `key field value [field value ...]`: (new fields, commit token)."""
    if len(args) % 2 == 0:
        raise wrong_args(cmd)
    pairs = list(zip(args[1::2], args[2::2], strict=True))
    return ops.hset(ctx.engine.keyspace, key_name(args[0]), pairs)


@_cmd("hset", -4, ["write", "denyoom", "fast"], "Set the string value of a hash field",
      "key:key (field:string value:string)...")
def hset(ctx: CommandContext, args: list[bytes]) -> Any:
    n, token = _hset(ctx, args, "hset")
    return committed(token, n)


@_cmd("hmset", -4, ["write", "denyoom", "fast"], "Set multiple hash fields to multiple values",
      "key:key (field:string value:string)...")
def hmset(ctx: CommandContext, args: list[bytes]) -> Any:
    return committed(_hset(ctx, args, "hmset")[1], OK)


@_cmd("hsetnx", 4, ["write", "denyoom", "fast"], "Set the value of a hash field, only if the "
      "field does not exist", "key:key field:string value:string")
def hsetnx(ctx: CommandContext, args: list[bytes]) -> Any:
    n, token = ops.hset(ctx.engine.keyspace, key_name(args[0]), [(args[1], args[2])], nx=True)
    return committed(token, n)


@_cmd("hget", 3, ["readonly", "fast"], "Get the value of a hash field", "key:key field:string")
def hget(ctx: CommandContext, args: list[bytes]) -> Any:
    hv = _read(ctx, args[0])
    return None if hv is None else hv.get(args[1])


@_cmd("hmget", -3, ["readonly", "fast"], "Get the values of all the given hash fields",
      "key:key field:string...")
def hmget(ctx: CommandContext, args: list[bytes]) -> Any:
    hv = _read(ctx, args[0])
    return [None if hv is None else hv.get(f) for f in args[1:]]


@_cmd("hgetall", 2, ["readonly"], "Get all the fields and values in a hash", "key:key")
def hgetall(ctx: CommandContext, args: list[bytes]) -> Any:
    hv = _read(ctx, args[0])
    items = [] if hv is None else list(hv.items())
    if ctx.resp3:
        return dict(items)
    return [x for pair in items for x in pair]


@_cmd("hkeys", 2, ["readonly"], "Get all the fields in a hash", "key:key")
def hkeys(ctx: CommandContext, args: list[bytes]) -> Any:
    hv = _read(ctx, args[0])
    return [] if hv is None else [f for f, _ in hv.items()]


@_cmd("hvals", 2, ["readonly"], "Get all the values in a hash", "key:key")
def hvals(ctx: CommandContext, args: list[bytes]) -> Any:
    hv = _read(ctx, args[0])
    return [] if hv is None else [v for _, v in hv.items()]


@_cmd("hdel", -3, ["write", "fast"], "Delete one or more hash fields", "key:key field:string...")
def hdel(ctx: CommandContext, args: list[bytes]) -> Any:
    n, token = ops.hdel(ctx.engine.keyspace, key_name(args[0]), args[1:])
    return committed(token, n)


@_cmd("hlen", 2, ["readonly", "fast"], "Get the number of fields in a hash", "key:key")
def hlen(ctx: CommandContext, args: list[bytes]) -> Any:
    hv = _read(ctx, args[0])
    return 0 if hv is None else len(hv)


@_cmd("hexists", 3, ["readonly", "fast"], "Determine if a hash field exists",
      "key:key field:string")
def hexists(ctx: CommandContext, args: list[bytes]) -> Any:
    hv = _read(ctx, args[0])
    return int(hv is not None and args[1] in hv)


@_cmd("hstrlen", 3, ["readonly", "fast"], "Get the length of the value of a hash field",
      "key:key field:string", "3.2.0")
def hstrlen(ctx: CommandContext, args: list[bytes]) -> Any:
    hv = _read(ctx, args[0])
    value = None if hv is None else hv.get(args[1])
    return 0 if value is None else len(value)


@_cmd("hincrby", 4, ["write", "denyoom", "fast"], "Increment the integer value of a hash "
      "field by the given number", "key:key field:string increment:integer")
def hincrby(ctx: CommandContext, args: list[bytes]) -> Any:
    delta = parse_int(args[2])
    n, token = ops.incr_by(ctx.engine.keyspace, key_name(args[0]), args[1], delta)
    return committed(token, n)


@_cmd("hincrbyfloat", 4, ["write", "denyoom", "fast"], "Increment the float value of a hash "
      "field by the given amount", "key:key field:string increment:double", "2.6.0")
def hincrbyfloat(ctx: CommandContext, args: list[bytes]) -> Any:
    text, token = ops.incr_by_float(ctx.engine.keyspace, key_name(args[0]), args[1], args[2])
    return committed(token, text)


@_cmd("hrandfield", -2, ["readonly"], "Get one or multiple random fields from a hash",
      "key:key [count:integer [WITHVALUES]]", "6.2.0")
def hrandfield(ctx: CommandContext, args: list[bytes]) -> Any:
    if len(args) == 1:
        hv = _read(ctx, args[0])
        return None if hv is None else ops.random_field(hv)
    count = parse_int(args[1])
    if count < -LONG_MAX:
        raise Err(f"ERR value is out of range, value must between {-LONG_MAX} and {LONG_MAX}")
    if len(args) > 3 or len(args) == 3 and args[2].upper() != b"WITHVALUES":
        raise Err(SYNTAX)
    withvalues = len(args) == 3
    if withvalues and not -(LONG_MAX // 2) <= count <= LONG_MAX // 2:
        raise Err("ERR value is out of range")
    hv = _read(ctx, args[0])
    if hv is None or count == 0:
        return []
    pairs = ops.random_fields(hv, count)
    if not withvalues:
        return [f for f, _ in pairs]
    if ctx.resp3:
        return [[f, v] for f, v in pairs]
    return [x for pair in pairs for x in pair]


def parse_cursor(raw: bytes) -> int:
    """A SCAN cursor as Redis's strtoul reads it: an optional sign (a negative one wraps
    around 2^64), decimal digits; anything else, or past 2^64 - 1, is an invalid cursor."""
    body = raw[1:] if raw[:1] in (b"+", b"-") else raw
    if raw and (not body.isdigit() or not body.isascii() or int(body) > U64):
        raise Err("ERR invalid cursor")
    n = int(body) if body else 0
    return -n & U64 if raw[:1] == b"-" else n


def scan_options(args: list[bytes], i: int) -> tuple[int, bytes | None]:
    """HSCAN's and ZSCAN's options from args[i] (COUNT, MATCH): read after the key's lookup,
    as Redis's scanGenericCommand."""
    count, pattern = 10, None
    while i < len(args):
        opt = args[i].lower()
        if opt == b"count" and i + 1 < len(args):
            count = parse_int(args[i + 1])
            if count < 1:
                raise Err(SYNTAX)
        elif opt == b"match" and i + 1 < len(args):
            pattern = args[i + 1]
        else:
            raise Err(SYNTAX)
        i += 2
    return count, pattern


@_cmd("hscan", -3, ["readonly"], "Incrementally iterate hash fields and associated values",
      "key:key cursor:integer [MATCH:pattern:pattern] [COUNT:count:integer]", "2.8.0")
def hscan(ctx: CommandContext, args: list[bytes]) -> Any:
    cursor = parse_cursor(args[1])
    hv = _read(ctx, args[0])
    if hv is None:
        return [b"0", []]
    count, pattern = scan_options(args, 2)
    nxt, pairs = ops.scan(hv, cursor, count)
    if pattern is not None and pattern != b"*":
        match = matcher(pattern)
        pairs = [(f, v) for f, v in pairs if match(f)]
    return [str(nxt).encode(), [x for pair in pairs for x in pair]]
