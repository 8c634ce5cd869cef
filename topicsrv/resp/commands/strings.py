"""String commands (Redis 7's @string family) over the keyspace (topicsrv/engine/keyspace).

Rule 1: a handler parses its arguments (string_args.py), calls one operation of
engine/keyspace/strings.py (one journaled keyspace operation per command) and returns the
reply once it is committed (`committed`); errors are Redis's own texts.
Rule 2: a string command on a topic answers WRONGTYPE, except where Redis replaces a key of
any type (SET without GET, MSET, SETEX, PSETEX: the topic is deleted as by DEL) and MGET
(nil for a key that is not a string).
Rule 3: string size is bounded by `proto-max-bulk-len` (512 MB by default), as Redis's
checkStringLength.
Rule 4: the reads Redis counts in INFO `keyspace_hits` / `keyspace_misses` (its
lookupKeyRead: GET, MGET, GETDEL, GETEX, GETRANGE, SUBSTR, STRLEN; EXISTS, TYPE and the TTL
family in keys.py / expire.py) count a hit for a key that exists (of any type: a topic's
WRONGTYPE is a hit) and a miss for one that does not (base.py `looked_up`; the pipelined GET
runs in resp/batch.py count the same way).
"""

from __future__ import annotations

from typing import Any, Final

from topicsrv.engine.keyspace import strings as ops
from topicsrv.engine.keyspace import values
from topicsrv.engine.keyspace.space import Keyspace
from topicsrv.errors import TopicsError
from topicsrv.resp.commands.base import (
    SYNTAX,
    CommandContext,
    Err,
    Simple,
    command,
    committed,
    key_name,
    kind_of,
    looked_up,
    parse_int,
    wrong_args,
)
from topicsrv.resp.commands.lcs import lcs_reply
from topicsrv.resp.commands.string_args import deadline_of, parse_set

OK: Final = Simple("OK")


def _cmd(name: str, arity: int, flags: list[str], first: int, last: int, step: int,
         summary: str, syntax: str, since: str = "1.0.0") -> Any:
    return command(name, arity, flags, first, last, step, "string", summary, since, syntax=syntax)


def _ks(ctx: CommandContext) -> Keyspace:
    return ctx.engine.keyspace


def _read(ctx: CommandContext, name: str) -> bytes | None:
    """ks.get(name), counted in INFO keyspace_hits / keyspace_misses (Rule 4)."""
    try:
        value = _ks(ctx).get(name)
    except TopicsError:  # WRONGTYPE: the key exists
        looked_up(ctx, True)
        raise
    looked_up(ctx, value is not None)
    return value


def _limit(ctx: CommandContext) -> int:
    return int(ctx.server.config.proto_max_bulk_len)


@_cmd("set", -3, ["write", "denyoom"], 1, 1, 1, "Set the string value of a key",
      "key:key value:string [(NX|XX)] [GET] [(EX:seconds:integer|PX:milliseconds:integer|"
      "EXAT:unix-time-seconds:unix-time|PXAT:unix-time-milliseconds:unix-time|KEEPTTL)]")
def set_(ctx: CommandContext, args: list[bytes]) -> Any:
    ks = _ks(ctx)
    o = parse_set(args, 2, ks.host.now(), "set")
    name = key_name(args[0])
    old = ks.get(name) if o.get else None  # WRONGTYPE before anything changes
    exists = o.get and old is not None or ks.kind(name) is not None
    if o.nx and exists or o.xx and not exists:
        return old
    token = ops.put(ks, [(name, args[1])], ops.KEEP if o.keepttl else o.deadline)
    return committed(token, old if o.get else OK)


@_cmd("get", 2, ["readonly", "fast"], 1, 1, 1, "Get the value of a key", "key:key")
def get(ctx: CommandContext, args: list[bytes]) -> Any:
    return _read(ctx, key_name(args[0]))


@_cmd("getdel", 2, ["write", "fast"], 1, 1, 1, "Get the value of a key and delete the key",
      "key:key", "6.2.0")
def getdel(ctx: CommandContext, args: list[bytes]) -> Any:
    ks = _ks(ctx)
    name = key_name(args[0])
    old = _read(ctx, name)
    if old is None:
        return None
    return committed(ops.delete(ks, [name])[1], old)


@_cmd("getex", -2, ["write", "fast"], 1, 1, 1, "Get the value of a key and optionally set "
      "its expiration", "key:key [(EX:seconds:integer|PX:milliseconds:integer|EXAT:unix-time-"
      "seconds:unix-time|PXAT:unix-time-milliseconds:unix-time|PERSIST)]", "6.2.0")
def getex(ctx: CommandContext, args: list[bytes]) -> Any:
    ks = _ks(ctx)
    now = ks.host.now()
    o = parse_set(args, 1, now, "getex")
    name = key_name(args[0])
    old = _read(ctx, name)
    if old is None:
        return None
    if o.deadline:
        return committed(ops.set_deadline(ks, name, o.deadline, False, False, False, False)[1], old)
    if o.persist:
        return committed(ops.persist(ks, name)[1], old)
    return old


@_cmd("getset", 3, ["write", "denyoom", "fast"], 1, 1, 1,
      "Set the string value of a key and return its old value", "key:key value:string")
def getset(ctx: CommandContext, args: list[bytes]) -> Any:
    ks = _ks(ctx)
    name = key_name(args[0])
    old = ks.get(name)
    return committed(ops.put(ks, [(name, args[1])]), old)


@_cmd("setnx", 3, ["write", "denyoom", "fast"], 1, 1, 1,
      "Set the value of a key, only if the key does not exist", "key:key value:string")
def setnx(ctx: CommandContext, args: list[bytes]) -> Any:
    ks = _ks(ctx)
    name = key_name(args[0])
    if ks.kind(name) is not None:
        return 0
    return committed(ops.put(ks, [(name, args[1])]), 1)


def _setex(ctx: CommandContext, args: list[bytes], scale: int, cmd: str) -> Any:
    ks = _ks(ctx)
    deadline = deadline_of(args[1], scale, False, ks.host.now(), cmd)
    return committed(ops.put(ks, [(key_name(args[0]), args[2])], deadline), OK)


@_cmd("setex", 4, ["write", "denyoom"], 1, 1, 1,
      "Set the value and expiration of a key", "key:key seconds:integer value:string", "2.0.0")
def setex(ctx: CommandContext, args: list[bytes]) -> Any:
    return _setex(ctx, args, 1000, "setex")


@_cmd("psetex", 4, ["write", "denyoom"], 1, 1, 1,
      "Set the value and expiration in milliseconds of a key",
      "key:key milliseconds:integer value:string", "2.6.0")
def psetex(ctx: CommandContext, args: list[bytes]) -> Any:
    return _setex(ctx, args, 1, "psetex")


@_cmd("mget", -2, ["readonly", "fast"], 1, -1, 1, "Get the values of all the given keys",
      "key:key...")
def mget(ctx: CommandContext, args: list[bytes]) -> Any:
    ks = _ks(ctx)
    out: list[bytes | None] = []
    for a in args:
        kind = kind_of(ctx, a)  # Rule 4: a topic is found too (MGET answers nil)
        out.append(ks.get(key_name(a)) if kind == "string" else None)
    return out


def _pairs(args: list[bytes], cmd: str) -> list[tuple[str, bytes]]:
    if len(args) % 2:
        raise wrong_args(cmd)
    return [(key_name(args[i]), args[i + 1]) for i in range(0, len(args), 2)]


@_cmd("mset", -3, ["write", "denyoom"], 1, -1, 2, "Set multiple keys to multiple values",
      "(key:key value:string)...", "1.0.1")
def mset(ctx: CommandContext, args: list[bytes]) -> Any:
    return committed(ops.put(_ks(ctx), _pairs(args, "mset")), OK)


@_cmd("msetnx", -3, ["write", "denyoom"], 1, -1, 2,
      "Set multiple keys to multiple values, only if none of the keys exist",
      "(key:key value:string)...", "1.0.1")
def msetnx(ctx: CommandContext, args: list[bytes]) -> Any:
    ks = _ks(ctx)
    pairs = _pairs(args, "msetnx")
    if any(ks.kind(n) is not None for n, _ in pairs):
        return 0
    return committed(ops.put(ks, pairs), 1)


def _incr(ctx: CommandContext, key: bytes, delta: int) -> Any:
    new, token = ops.incr_by(_ks(ctx), key_name(key), delta)
    return committed(token, new)


@_cmd("incr", 2, ["write", "denyoom", "fast"], 1, 1, 1,
      "Increment the integer value of a key by one", "key:key")
def incr(ctx: CommandContext, args: list[bytes]) -> Any:
    return _incr(ctx, args[0], 1)


@_cmd("decr", 2, ["write", "denyoom", "fast"], 1, 1, 1,
      "Decrement the integer value of a key by one", "key:key")
def decr(ctx: CommandContext, args: list[bytes]) -> Any:
    return _incr(ctx, args[0], -1)


@_cmd("incrby", 3, ["write", "denyoom", "fast"], 1, 1, 1,
      "Increment the integer value of a key by the given amount", "key:key increment:integer")
def incrby(ctx: CommandContext, args: list[bytes]) -> Any:
    return _incr(ctx, args[0], parse_int(args[1]))


@_cmd("decrby", 3, ["write", "denyoom", "fast"], 1, 1, 1,
      "Decrement the integer value of a key by the given number", "key:key decrement:integer")
def decrby(ctx: CommandContext, args: list[bytes]) -> Any:
    n = parse_int(args[1])
    if n == values.I64_MIN:
        raise Err("ERR decrement would overflow")
    return _incr(ctx, args[0], -n)


@_cmd("incrbyfloat", 3, ["write", "denyoom", "fast"], 1, 1, 1,
      "Increment the float value of a key by the given amount", "key:key increment:double",
      "2.6.0")
def incrbyfloat(ctx: CommandContext, args: list[bytes]) -> Any:
    text, token = ops.incr_by_float(_ks(ctx), key_name(args[0]), args[1])
    return committed(token, text)


@_cmd("append", 3, ["write", "denyoom", "fast"], 1, 1, 1, "Append a value to a key",
      "key:key value:string", "2.0.0")
def append(ctx: CommandContext, args: list[bytes]) -> Any:
    n, token = ops.append(_ks(ctx), key_name(args[0]), args[1], _limit(ctx))
    return committed(token, n)


@_cmd("strlen", 2, ["readonly", "fast"], 1, 1, 1, "Get the length of the value stored in a key",
      "key:key", "2.2.0")
def strlen(ctx: CommandContext, args: list[bytes]) -> Any:
    value = _read(ctx, key_name(args[0]))
    return 0 if value is None else len(value)


def _getrange(ctx: CommandContext, args: list[bytes]) -> Any:
    start, end = parse_int(args[1]), parse_int(args[2])
    value = _read(ctx, key_name(args[0]))
    return b"" if value is None else ops.getrange(value, start, end)


@_cmd("getrange", 4, ["readonly"], 1, 1, 1, "Get a substring of the string stored at a key",
      "key:key start:integer end:integer", "2.4.0")
def getrange(ctx: CommandContext, args: list[bytes]) -> Any:
    return _getrange(ctx, args)


@_cmd("substr", 4, ["readonly"], 1, 1, 1, "Get a substring of the string stored at a key",
      "key:key start:integer end:integer", "1.0.0")
def substr(ctx: CommandContext, args: list[bytes]) -> Any:
    return _getrange(ctx, args)


@_cmd("setrange", 4, ["write", "denyoom"], 1, 1, 1,
      "Overwrite part of a string at key starting at the specified offset",
      "key:key offset:integer value:string", "2.2.0")
def setrange(ctx: CommandContext, args: list[bytes]) -> Any:
    offset = parse_int(args[1])
    n, token = ops.setrange(_ks(ctx), key_name(args[0]), offset, args[2], _limit(ctx))
    return committed(token, n)


@_cmd("lcs", -3, ["readonly"], 1, 2, 1, "Find longest common substring",
      "key1:key key2:key [LEN] [IDX] [MINMATCHLEN:min-match-len:integer] [WITHMATCHLEN]", "7.0.0")
def lcs(ctx: CommandContext, args: list[bytes]) -> Any:
    ks = _ks(ctx)
    a, b = key_name(args[0]), key_name(args[1])
    if "stream" in (ks.kind(a), ks.kind(b)):
        raise Err("ERR The specified keys must contain string values")
    want_len = want_idx = with_len = False
    min_len = 0
    i = 2
    while i < len(args):
        opt = args[i].lower()
        if opt == b"idx":
            want_idx = True
        elif opt == b"len":
            want_len = True
        elif opt == b"withmatchlen":
            with_len = True
        elif opt == b"minmatchlen" and i + 1 < len(args):
            min_len = max(0, parse_int(args[i + 1]))
            i += 1
        else:
            raise Err(SYNTAX)
        i += 1
    if want_len and want_idx:
        raise Err("ERR If you want both the length and indexes, please just use IDX.")
    va, vb = ks.get(a) or b"", ks.get(b) or b""
    return lcs_reply(va, vb, want_len, want_idx, min_len, with_len)
