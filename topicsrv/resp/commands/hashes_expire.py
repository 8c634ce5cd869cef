"""Hash field expiry commands (Redis 7.4): HEXPIRE HPEXPIRE HEXPIREAT HPEXPIREAT HTTL HPTTL
HEXPIRETIME HPEXPIRETIME HPERSIST, over engine/keyspace/hashexpiry.py.

Rule 1 (Redis 7.4.1's t_hash.c order of checks): the key's type first (WRONGTYPE), then the
time (an integer, >= 0, and a deadline at most 2^46 - 1 ms: "invalid expire time in
'<cmd>' command"), then the optional NX|XX|GT|LT, then `FIELDS` at its place, `numfields` in
[1, LONG_MAX] (HEXPIRE*: "Parameter `numFields` should be greater than 0", the others:
"Number of fields must be a positive integer"), then `numfields` equal to the fields given.
A missing key answers -2 for every field. The error texts are Redis 7.4's.
Rule 2: the reply is an array of integers, one per field, in argument order (hashexpiry.py
Rule 4); the relative forms count from the command's clock reading.
Rule 3 (reads): HTTL and friends count as a lookup in keyspace_hits/misses (lookupKeyRead);
HEXPIRE and HPERSIST look up for writing, which Redis does not count.
"""

from __future__ import annotations

from typing import Any

from topicsrv.engine.keyspace import hashes as ops
from topicsrv.resp.commands.base import CommandContext, Err, command, committed, key_name, parse_int
from topicsrv.resp.commands.hashes import _read

MAX_DEADLINE = ((1 << 48) - 1) >> 2  # Redis 7.4's HFE_MAX_ABS_TIME_MSEC
LONG_MAX = (1 << 63) - 1
FIELDS_MISSING = "ERR Mandatory argument FIELDS is missing or not at the right position"
MISMATCH = "ERR The `numfields` parameter must match the number of arguments"
CONDITIONS = {b"NX": "NX", b"XX": "XX", b"GT": "GT", b"LT": "LT"}
_EXPIRE_SYNTAX = "key:key {t}:{typ} [(NX|XX|GT|LT)] (FIELDS numfields:integer field:string...)"
_FIELDS_SYNTAX = "key:key (FIELDS numfields:integer field:string...)"


def _fields(args: list[bytes], at: int, numfields_error: str) -> list[bytes]:
    """`FIELDS numfields field...` from args[at] (Rule 1)."""
    if at >= len(args) or args[at].upper() != b"FIELDS":
        raise Err(FIELDS_MISSING)
    try:
        n = parse_int(args[at + 1]) if at + 1 < len(args) else 0
    except Err:
        n = 0
    if not 1 <= n <= LONG_MAX:
        raise Err(f"ERR {numfields_error}")
    fields = args[at + 2:]
    if n != len(fields):
        raise Err(MISMATCH)
    return fields


def _expire(ctx: CommandContext, args: list[bytes], cmd: str, relative: bool,
            seconds: bool) -> Any:
    ks = ctx.engine.keyspace
    name = key_name(args[0])
    hv = ops.get(ks, name)  # WRONGTYPE first (Rule 1)
    when = parse_int(args[1])
    if when < 0:
        raise Err("ERR invalid expire time, must be >= 0")
    bad = Err(f"ERR invalid expire time in '{cmd}' command")
    if seconds:
        if when > MAX_DEADLINE // 1000:
            raise bad
        when *= 1000
    base = ks.clock.now_ms() if relative else 0
    if when > MAX_DEADLINE - base:
        raise bad
    cond = CONDITIONS.get(args[2].upper())
    fields = _fields(args, 2 if cond is None else 3, "Parameter `numFields` should be greater "
                     "than 0")
    out, token = ops.expire_fields(ks, name, when + base, cond, fields) if hv is not None \
        else ([-2] * len(fields), None)
    return committed(token, out)


def _cmd(name: str, arity: int, flags: list[str], summary: str, syntax: str) -> Any:
    return command(name, arity, flags, 1, 1, 1, "hash", summary, "7.4.0", syntax=syntax,
                   complexity="O(N) where N is the number of specified fields")


_W = ["write", "denyoom", "fast"]


@_cmd("hexpire", -6, _W, "Set expiry for hash field using relative time to expire (seconds)",
      _EXPIRE_SYNTAX.format(t="seconds", typ="integer"))
def hexpire(ctx: CommandContext, args: list[bytes]) -> Any:
    return _expire(ctx, args, "hexpire", True, True)


@_cmd("hpexpire", -6, _W, "Set expiry for hash field using relative time to expire "
      "(milliseconds)", _EXPIRE_SYNTAX.format(t="milliseconds", typ="integer"))
def hpexpire(ctx: CommandContext, args: list[bytes]) -> Any:
    return _expire(ctx, args, "hpexpire", True, False)


@_cmd("hexpireat", -6, _W, "Set expiry for hash field using an absolute Unix timestamp "
      "(seconds)", _EXPIRE_SYNTAX.format(t="unix-time-seconds", typ="unix-time"))
def hexpireat(ctx: CommandContext, args: list[bytes]) -> Any:
    return _expire(ctx, args, "hexpireat", False, True)


@_cmd("hpexpireat", -6, _W, "Set expiry for hash field using an absolute Unix timestamp "
      "(milliseconds)", _EXPIRE_SYNTAX.format(t="unix-time-milliseconds", typ="unix-time"))
def hpexpireat(ctx: CommandContext, args: list[bytes]) -> Any:
    return _expire(ctx, args, "hpexpireat", False, False)


def _times(ctx: CommandContext, args: list[bytes], relative: bool, millis: bool) -> Any:
    hv = _read(ctx, args[0])  # WRONGTYPE first (Rule 1), a counted lookup (Rule 3)
    fields = _fields(args, 1, "Number of fields must be a positive integer")
    return ops.field_times(ctx.engine.keyspace, hv, fields, relative, millis)


_R = ["readonly", "fast"]


@_cmd("httl", -5, _R, "Returns the TTL in seconds of a hash field.", _FIELDS_SYNTAX)
def httl(ctx: CommandContext, args: list[bytes]) -> Any:
    return _times(ctx, args, True, False)


@_cmd("hpttl", -5, _R, "Returns the TTL in milliseconds of a hash field.", _FIELDS_SYNTAX)
def hpttl(ctx: CommandContext, args: list[bytes]) -> Any:
    return _times(ctx, args, True, True)


@_cmd("hexpiretime", -5, _R, "Returns the expiration time of a hash field as a Unix timestamp, "
      "in seconds.", _FIELDS_SYNTAX)
def hexpiretime(ctx: CommandContext, args: list[bytes]) -> Any:
    return _times(ctx, args, False, False)


@_cmd("hpexpiretime", -5, _R, "Returns the expiration time of a hash field as a Unix "
      "timestamp, in msec.", _FIELDS_SYNTAX)
def hpexpiretime(ctx: CommandContext, args: list[bytes]) -> Any:
    return _times(ctx, args, False, True)


@_cmd("hpersist", -5, ["write", "fast"], "Removes the expiration time for each specified field",
      _FIELDS_SYNTAX)
def hpersist(ctx: CommandContext, args: list[bytes]) -> Any:
    ks = ctx.engine.keyspace
    name = key_name(args[0])
    hv = ops.get(ks, name)
    fields = _fields(args, 1, "Number of fields must be a positive integer")
    if hv is None:
        return [-2] * len(fields)
    out, token = ops.persist_fields(ks, name, fields)
    return committed(token, out)
