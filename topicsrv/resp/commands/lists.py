"""List commands (Redis 7's @list family) over the keyspace (engine/keyspace/lists.py).

Rule 1: a handler parses its arguments, calls one operation of engine/keyspace/lists.py (one
journaled keyspace operation per command) and returns the reply once it is committed;
errors are Redis 7's own texts, a key of another kind is WRONGTYPE.
Rule 2: reads count in INFO keyspace_hits / keyspace_misses as Redis's lookupKeyRead
(`looked_up`).
"""

from __future__ import annotations

from typing import Any

from topicsrv.engine.keyspace import lists as ops
from topicsrv.engine.keyspace.space import Keyspace
from topicsrv.resp.commands.base import (
    NULL_ARRAY,
    SYNTAX,
    CommandContext,
    Err,
    Simple,
    command,
    committed,
    key_name,
    looked_up,
    parse_int,
)

OK = Simple("OK")
POSITIVE = "ERR value is out of range, must be positive"


def _cmd(name: str, arity: int, flags: list[str], first: int, last: int, step: int,
         summary: str, syntax: str, since: str = "1.0.0") -> Any:
    return command(name, arity, flags, first, last, step, "list", summary, since, syntax=syntax)


def _ks(ctx: CommandContext) -> Keyspace:
    return ctx.engine.keyspace


def _read(ctx: CommandContext, name: str) -> Any:
    lv = ops.get(_ks(ctx), name)
    looked_up(ctx, lv is not None)
    return lv


def _push(ctx: CommandContext, args: list[bytes], left: bool, only_existing: bool) -> Any:
    n, token = ops.push(_ks(ctx), key_name(args[0]), args[1:], left, only_existing)
    return committed(token, n)


@_cmd("lpush", -3, ["write", "denyoom", "fast"], 1, 1, 1, "Prepend one or multiple elements "
      "to a list", "key:key element:string...")
def lpush(ctx: CommandContext, args: list[bytes]) -> Any:
    return _push(ctx, args, True, False)


@_cmd("rpush", -3, ["write", "denyoom", "fast"], 1, 1, 1, "Append one or multiple elements "
      "to a list", "key:key element:string...")
def rpush(ctx: CommandContext, args: list[bytes]) -> Any:
    return _push(ctx, args, False, False)


@_cmd("lpushx", -3, ["write", "denyoom", "fast"], 1, 1, 1, "Prepend an element to a list, "
      "only if the list exists", "key:key element:string...", "2.2.0")
def lpushx(ctx: CommandContext, args: list[bytes]) -> Any:
    return _push(ctx, args, True, True)


@_cmd("rpushx", -3, ["write", "denyoom", "fast"], 1, 1, 1, "Append an element to a list, "
      "only if the list exists", "key:key element:string...", "2.2.0")
def rpushx(ctx: CommandContext, args: list[bytes]) -> Any:
    return _push(ctx, args, False, True)


def _pop(ctx: CommandContext, args: list[bytes], left: bool, name: str) -> Any:
    if len(args) > 2:
        raise Err(f"ERR wrong number of arguments for '{name}' command")
    count = None
    if len(args) == 2:
        count = parse_int(args[1], POSITIVE)
        if count < 0:
            raise Err(POSITIVE)
    values, token = ops.pop(_ks(ctx), key_name(args[0]), 1 if count is None else count, left)
    if values is None:
        return None if count is None else NULL_ARRAY
    if count is None:
        return committed(token, values[0])
    return committed(token, values)


@_cmd("lpop", -2, ["write", "fast"], 1, 1, 1, "Remove and get the first elements in a list",
      "key:key [count:integer]")
def lpop(ctx: CommandContext, args: list[bytes]) -> Any:
    return _pop(ctx, args, True, "lpop")


@_cmd("rpop", -2, ["write", "fast"], 1, 1, 1, "Remove and get the last elements in a list",
      "key:key [count:integer]")
def rpop(ctx: CommandContext, args: list[bytes]) -> Any:
    return _pop(ctx, args, False, "rpop")


@_cmd("llen", 2, ["readonly", "fast"], 1, 1, 1, "Get the length of a list", "key:key")
def llen(ctx: CommandContext, args: list[bytes]) -> Any:
    lv = _read(ctx, key_name(args[0]))
    return 0 if lv is None else len(lv)


@_cmd("lrange", 4, ["readonly"], 1, 1, 1, "Get a range of elements from a list",
      "key:key start:integer stop:integer")
def lrange(ctx: CommandContext, args: list[bytes]) -> Any:
    start, stop = parse_int(args[1]), parse_int(args[2])
    name = key_name(args[0])
    lv = _read(ctx, name)
    if lv is None:
        return []
    return ops.lrange(_ks(ctx), name, start, stop)


@_cmd("lindex", 3, ["readonly"], 1, 1, 1, "Get an element from a list by its index",
      "key:key index:integer")
def lindex(ctx: CommandContext, args: list[bytes]) -> Any:
    index = parse_int(args[1])
    lv = _read(ctx, key_name(args[0]))
    return None if lv is None else lv.get(index)


@_cmd("lset", 4, ["write", "denyoom"], 1, 1, 1, "Set the value of an element in a list by "
      "its index", "key:key index:integer element:string")
def lset(ctx: CommandContext, args: list[bytes]) -> Any:
    index = parse_int(args[1])
    return committed(ops.lset(_ks(ctx), key_name(args[0]), index, args[2]), OK)


@_cmd("linsert", 5, ["write", "denyoom"], 1, 1, 1, "Insert an element before or after "
      "another element in a list", "key:key (BEFORE|AFTER) pivot:string element:string",
      "2.2.0")
def linsert(ctx: CommandContext, args: list[bytes]) -> Any:
    where = args[1].upper()
    if where not in (b"BEFORE", b"AFTER"):
        raise Err(SYNTAX)
    n, token = ops.linsert(_ks(ctx), key_name(args[0]), where == b"BEFORE", args[2], args[3])
    return committed(token, n)


@_cmd("lrem", 4, ["write"], 1, 1, 1, "Remove elements from a list",
      "key:key count:integer element:string")
def lrem(ctx: CommandContext, args: list[bytes]) -> Any:
    count = parse_int(args[1])
    n, token = ops.lrem(_ks(ctx), key_name(args[0]), count, args[2])
    return committed(token, n)


@_cmd("ltrim", 4, ["write"], 1, 1, 1, "Trim a list to the specified range",
      "key:key start:integer stop:integer")
def ltrim(ctx: CommandContext, args: list[bytes]) -> Any:
    start, stop = parse_int(args[1]), parse_int(args[2])
    return committed(ops.ltrim(_ks(ctx), key_name(args[0]), start, stop), OK)


@_cmd("lpos", -3, ["readonly"], 1, 1, 1, "Return the index of matching elements on a list",
      "key:key element:string [RANK:rank:integer] [COUNT:num-matches:integer] "
      "[MAXLEN:len:integer]", "6.0.6")
def lpos(ctx: CommandContext, args: list[bytes]) -> Any:
    rank, count, maxlen = 1, None, 0
    i = 2
    while i < len(args):
        opt = args[i].upper()
        if i + 1 >= len(args) or opt not in (b"RANK", b"COUNT", b"MAXLEN"):
            raise Err(SYNTAX)
        n = parse_int(args[i + 1])
        if opt == b"RANK":
            if n == 0:
                raise Err("ERR RANK can't be zero: use 1 to start from the first match, 2 "
                          "from the second ... or use negative to start from the end of the "
                          "list")
            if n == -(1 << 63):
                raise Err("ERR value is out of range, value must between -9223372036854775807 "
                          "and 9223372036854775807")
            rank = n
        elif opt == b"COUNT":
            if n < 0:
                raise Err("ERR COUNT can't be negative")
            count = n
        else:
            if n < 0:
                raise Err("ERR MAXLEN can't be negative")
            maxlen = n
        i += 2
    lv = _read(ctx, key_name(args[0]))
    if lv is None:
        return None if count is None else []
    found = ops.lpos(lv, args[1], rank, count, maxlen)
    if count is None:
        return found[0] if found else None
    return found


def _side(arg: bytes) -> bool:
    side = arg.upper()
    if side not in (b"LEFT", b"RIGHT"):
        raise Err(SYNTAX)
    return side == b"LEFT"


@_cmd("lmove", 5, ["write", "denyoom"], 1, 2, 1, "Pop an element from a list, push it to "
      "another list and return it", "source:key destination:key (LEFT|RIGHT) (LEFT|RIGHT)",
      "6.2.0")
def lmove(ctx: CommandContext, args: list[bytes]) -> Any:
    wherefrom, whereto = _side(args[2]), _side(args[3])
    value, token = ops.move(_ks(ctx), key_name(args[0]), key_name(args[1]), wherefrom, whereto)
    return committed(token, value)


@_cmd("rpoplpush", 3, ["write", "denyoom"], 1, 2, 1, "Remove the last element in a list, "
      "prepend it to another list and return it", "source:key destination:key", "1.2.0")
def rpoplpush(ctx: CommandContext, args: list[bytes]) -> Any:
    value, token = ops.move(_ks(ctx), key_name(args[0]), key_name(args[1]), False, True)
    return committed(token, value)


def parse_mpop(args: list[bytes], first: int, cmd: str) -> tuple[list[str], bool, int]:
    """`numkeys key... LEFT|RIGHT [COUNT count]` from args[first]: names, left, count."""
    numkeys = parse_int(args[first], "ERR numkeys should be greater than 0")
    if numkeys <= 0:
        raise Err("ERR numkeys should be greater than 0")
    where = first + 1 + numkeys
    if where >= len(args):
        raise Err(SYNTAX)
    names = [key_name(a) for a in args[first + 1:where]]
    left = _side(args[where])
    count = 0
    j = where + 1
    while j < len(args):  # COUNT once (a second one is a syntax error, as Redis)
        if args[j].upper() != b"COUNT" or j + 1 >= len(args) or count:
            raise Err(SYNTAX)
        count = parse_int(args[j + 1], "ERR count should be greater than 0")
        if count <= 0:
            raise Err("ERR count should be greater than 0")
        j += 2
    return names, left, count or 1


def mpop(ctx: CommandContext, names: list[str], left: bool, count: int) -> Any:
    """LMPOP's reply: [key, [elements]] of the first non-empty list, or a null array."""
    ks = _ks(ctx)
    found = ops.first_nonempty(ks, names)
    if found is None:
        return NULL_ARRAY
    name, _ = found
    values, token = ops.pop(ks, name, count, left)
    return committed(token, [name.encode("latin-1"), values])


@command("lmpop", -4, ["write", "movablekeys"], 0, 0, 0, "list", "Pop elements from a list",
         "7.0.0", syntax="numkeys:integer key:key... (LEFT|RIGHT) [COUNT:count:integer]")
def lmpop(ctx: CommandContext, args: list[bytes]) -> Any:
    names, left, count = parse_mpop(args, 0, "lmpop")
    return mpop(ctx, names, left, count)
