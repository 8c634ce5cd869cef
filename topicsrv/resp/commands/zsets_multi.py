"""Sorted-set commands over several keys: ZUNION ZINTER ZDIFF, their STORE forms, and
ZINTERCARD, as Redis 7.0's zunionInterDiffGenericCommand.

Rule 1 (Redis's order of checks): numkeys (an integer, at least 1: "at least 1 input key is
needed for '<command>' command"), then no more
keys than arguments (syntax error), then every input key is looked up (WRONGTYPE for a kind
other than a sorted set or a set), then the options: WEIGHTS (one per key, "weight value is
not a float"), AGGREGATE SUM|MIN|MAX, WITHSCORES (not for a store), ZINTERCARD's LIMIT ("LIMIT
can't be negative"); ZDIFF takes neither WEIGHTS nor AGGREGATE.
Rule 2 (scores): a weighted score that is NaN (0 * inf) counts as 0, a SUM of inf and -inf is
0 (zunionInterAggregate); the result is ordered by (score, member).
Rule 3 (stores): the destination gets the result whole, or is deleted when it is empty
(engine zsets.py Rule 4); the reply is the result's size.
"""

from __future__ import annotations

from typing import Any

from topicsrv.engine.keyspace import zsets as ops
from topicsrv.resp.commands.base import (
    SYNTAX,
    CommandContext,
    Err,
    committed,
    key_name,
    looked_up,
    parse_int,
)
from topicsrv.resp.commands.zsets import ks_of, score_arg, scored, zcmd

_STORE_SYNTAX = ("destination:key numkeys:integer key:key... [WEIGHTS weight:integer...] "
                 "[AGGREGATE (SUM|MIN|MAX)]")
_READ_SYNTAX = ("numkeys:integer key:key... [WEIGHTS weight:integer...] "
                "[AGGREGATE (SUM|MIN|MAX)] [WITHSCORES]")


def _generic(ctx: CommandContext, args: list[bytes], at: int, op: str, cmd: str,
             store: bool = False, card: bool = False) -> Any:
    """args[at] is numkeys (Rule 1)."""
    n = parse_int(args[at])
    if n < 1:
        raise Err(f"ERR at least 1 input key is needed for '{cmd}' command")
    if n > len(args) - at - 1:
        raise Err(SYNTAX)
    ks = ks_of(ctx)
    inputs = []
    for raw in args[at + 1:at + 1 + n]:
        try:
            src = ops.source(ks, key_name(raw))
        except Exception:
            looked_up(ctx, True)
            raise
        looked_up(ctx, src is not None)
        inputs.append(src)
    weights = [1.0] * n
    how, withscores, limit = b"sum", False, 0
    j = at + 1 + n
    while j < len(args):
        left = len(args) - j
        opt = args[j].lower()
        if op != "diff" and not card and left >= n + 1 and opt == b"weights":
            weights = [score_arg(w, "ERR weight value is not a float")
                       for w in args[j + 1:j + 1 + n]]
            j += n + 1
        elif op != "diff" and not card and left >= 2 and opt == b"aggregate":
            how = args[j + 1].lower()
            if how not in (b"sum", b"min", b"max"):
                raise Err(SYNTAX)
            j += 2
        elif not store and not card and opt == b"withscores":
            withscores = True
            j += 1
        elif card and left >= 2 and opt == b"limit":
            limit = parse_int(args[j + 1], "ERR LIMIT can't be negative")
            if limit < 0:
                raise Err("ERR LIMIT can't be negative")
            j += 2
        else:
            raise Err(SYNTAX)
    pairs = ops.combine(inputs, op, weights, how, limit if card else 0)
    if card:
        return len(pairs)
    if store:
        count, token = ops.store(ks, key_name(args[0]), pairs)
        return committed(token, count)
    return scored(ctx, pairs, withscores)


@zcmd("zunion", -3, ["readonly", "movablekeys"], "Add multiple sorted sets",
      _READ_SYNTAX, "6.2.0", 0, 0, 0)
def zunion(ctx: CommandContext, args: list[bytes]) -> Any:
    return _generic(ctx, args, 0, "union", "zunion")


@zcmd("zinter", -3, ["readonly", "movablekeys"], "Intersect multiple sorted sets",
      _READ_SYNTAX, "6.2.0", 0, 0, 0)
def zinter(ctx: CommandContext, args: list[bytes]) -> Any:
    return _generic(ctx, args, 0, "inter", "zinter")


@zcmd("zdiff", -3, ["readonly", "movablekeys"], "Subtract multiple sorted sets",
      "numkeys:integer key:key... [WITHSCORES]", "6.2.0", 0, 0, 0)
def zdiff(ctx: CommandContext, args: list[bytes]) -> Any:
    return _generic(ctx, args, 0, "diff", "zdiff")


@zcmd("zunionstore", -4, ["write", "denyoom", "movablekeys"], "Add multiple sorted sets and "
      "store the resulting sorted set in a new key", _STORE_SYNTAX, "2.0.0")
def zunionstore(ctx: CommandContext, args: list[bytes]) -> Any:
    return _generic(ctx, args, 1, "union", "zunionstore", store=True)


@zcmd("zinterstore", -4, ["write", "denyoom", "movablekeys"], "Intersect multiple sorted sets "
      "and store the resulting sorted set in a new key", _STORE_SYNTAX, "2.0.0")
def zinterstore(ctx: CommandContext, args: list[bytes]) -> Any:
    return _generic(ctx, args, 1, "inter", "zinterstore", store=True)


@zcmd("zdiffstore", -4, ["write", "denyoom", "movablekeys"], "Subtract multiple sorted sets "
      "and store the resulting sorted set in a new key",
      "destination:key numkeys:integer key:key...", "6.2.0")
def zdiffstore(ctx: CommandContext, args: list[bytes]) -> Any:
    return _generic(ctx, args, 1, "diff", "zdiffstore", store=True)


@zcmd("zintercard", -3, ["readonly", "movablekeys"], "Intersect multiple sorted sets and "
      "return the cardinality of the result", "numkeys:integer key:key... [LIMIT:limit:integer]",
      "7.0.0", 0, 0, 0)
def zintercard(ctx: CommandContext, args: list[bytes]) -> Any:
    return _generic(ctx, args, 0, "inter", "zintercard", card=True)
