"""The range reads of sorted sets: ZRANGE (BYSCORE BYLEX REV LIMIT WITHSCORES), ZRANGESTORE and
the older ZRANGEBYSCORE ZREVRANGEBYSCORE ZRANGEBYLEX ZREVRANGEBYLEX ZREVRANGE, all one
function as in Redis 7.0's zrangeGenericCommand.

Rule 1 (Redis's order of checks): the options after `key min max`, each once and only where
the command allows it (a fixed type or direction refuses BYSCORE/BYLEX/REV; a store refuses
WITHSCORES), then LIMIT without BYSCORE/BYLEX and WITHSCORES with BYLEX, then the range
itself, then the key.
Rule 2 (REV with BYSCORE/BYLEX): the range is given as max then min.
Rule 3 (LIMIT offset count): a negative count is every member; a negative offset is none
(Redis's `while (offset--)` skips past the end); an offset at or past the size is none.
Rule 4 (ZRANGESTORE): the result is stored whole (engine zsets.py Rule 4) and its size
answered; a missing source stores nothing and deletes the destination.
"""

from __future__ import annotations

from typing import Any, Final

from topicsrv.engine.keyspace import zsets as ops
from topicsrv.engine.keyspace.values import parse_i64
from topicsrv.engine.keyspace.zsetrange import (
    lex_span,
    parse_bound,
    parse_lex,
    rank_span,
    score_span,
)
from topicsrv.engine.keyspace.zsetvalue import ZsetValue
from topicsrv.resp.commands.base import SYNTAX, CommandContext, Err, committed, key_name, parse_int
from topicsrv.resp.commands.zsets import LEX_RANGE, SCORE_RANGE, ks_of, read, scored, zcmd

RANK: Final = "rank"
SCORE: Final = "score"
LEX: Final = "lex"


def _int(raw: bytes) -> int:
    """parse_int, with a canonical integer (the common case) read by the compiled
    values.parse_i64 (the same integers: parse_int's rules are string2ll's)."""
    n = parse_i64(raw)
    return parse_int(raw) if n is None else n


def _span(zv: ZsetValue, kind: str, lo: Any, hi: Any, reverse: bool, offset: int,
          limit: int) -> tuple[int, int]:
    """The positions [start, stop) of the range (Rules 2-3), in reply order when `reverse`
    is false, from stop - 1 down to start when it is true; (0, 0) when empty."""
    n = len(zv)
    if kind == RANK:
        start, stop = rank_span(lo, hi, n)
        return (start, stop) if not reverse else (n - stop, n - start)
    start, stop = score_span(zv, lo, hi) if kind == SCORE else lex_span(zv, lo, hi)
    if offset < 0 or (offset > 0 and offset >= n):
        return 0, 0
    if reverse:
        stop -= offset
        if limit >= 0:
            start = max(start, stop - limit)
        return start, stop
    start += offset
    if limit >= 0:
        stop = min(stop, start + limit)
    return start, stop


def zrange_generic(ctx: CommandContext, args: list[bytes], at: int, store: bool,
                   kind: str | None, reverse: bool | None) -> Any:
    """Redis's zrangeGenericCommand: args[at] is the source key, then min and max (Rule 1);
    `kind` and `reverse` are fixed by the command or None (ZRANGE, ZRANGESTORE)."""
    withscores = False
    offset, limit = 0, -1
    j = at + 3
    while j < len(args):
        opt = args[j].lower()
        left = len(args) - j - 1
        if not store and opt == b"withscores":
            withscores = True
        elif opt == b"limit" and left >= 2:
            offset, limit = _int(args[j + 1]), _int(args[j + 2])
            j += 2
        elif reverse is None and opt == b"rev":
            reverse = True
        elif kind is None and opt == b"bylex":
            kind = LEX
        elif kind is None and opt == b"byscore":
            kind = SCORE
        else:
            raise Err(SYNTAX)
        j += 1
    reverse = bool(reverse)
    kind = kind or RANK
    if limit != -1 and kind == RANK:
        raise Err("ERR syntax error, LIMIT is only supported in combination with either "
                  "BYSCORE or BYLEX")
    if withscores and kind == LEX:
        raise Err("ERR syntax error, WITHSCORES not supported in combination with BYLEX")
    lo_raw, hi_raw = args[at + 1], args[at + 2]
    if reverse and kind != RANK:  # Rule 2
        lo_raw, hi_raw = hi_raw, lo_raw
    lo: Any
    hi: Any
    if kind == RANK:
        lo, hi = parse_int(lo_raw), parse_int(hi_raw)
    elif kind == SCORE:
        lo, hi = parse_bound(lo_raw), parse_bound(hi_raw)
        if lo is None or hi is None:
            raise Err(SCORE_RANGE)
    else:
        lo, hi = parse_lex(lo_raw), parse_lex(hi_raw)
        if lo is None or hi is None:
            raise Err(LEX_RANGE)
    zv = read(ctx, args[at])
    start, stop = (0, 0) if zv is None else _span(zv, kind, lo, hi, reverse, offset, limit)
    if zv is not None and not store and not withscores:  # members only: no score decoded
        return zv.members_at(start, stop, reverse)
    pairs = [] if zv is None else zv.span(start, stop, reverse)
    if store:
        n, token = ops.store(ks_of(ctx), key_name(args[0]), pairs)
        return committed(token, n)
    return scored(ctx, pairs, withscores)


@zcmd("zrange", -4, ["readonly"], "Return a range of members in a sorted set",
      "key:key start:string stop:string [(BYSCORE|BYLEX)] [REV] "
      "[LIMIT offset:integer count:integer] [WITHSCORES]")
def zrange(ctx: CommandContext, args: list[bytes]) -> Any:
    return zrange_generic(ctx, args, 0, False, None, None)


@zcmd("zrangestore", -5, ["write", "denyoom"], "Store a range of members from sorted set into "
      "another key", "dst:key src:key min:string max:string [(BYSCORE|BYLEX)] [REV] "
      "[LIMIT offset:integer count:integer]", "6.2.0", 1, 2, 1)
def zrangestore(ctx: CommandContext, args: list[bytes]) -> Any:
    return zrange_generic(ctx, args, 1, True, None, None)


@zcmd("zrangebyscore", -4, ["readonly"], "Return a range of members in a sorted set, by score",
      "key:key min:double max:double [WITHSCORES] [LIMIT offset:integer count:integer]", "1.0.5")
def zrangebyscore(ctx: CommandContext, args: list[bytes]) -> Any:
    return zrange_generic(ctx, args, 0, False, SCORE, False)


@zcmd("zrevrangebyscore", -4, ["readonly"], "Return a range of members in a sorted set, by "
      "score, with scores ordered from high to low",
      "key:key max:double min:double [WITHSCORES] [LIMIT offset:integer count:integer]", "2.2.0")
def zrevrangebyscore(ctx: CommandContext, args: list[bytes]) -> Any:
    return zrange_generic(ctx, args, 0, False, SCORE, True)


@zcmd("zrangebylex", -4, ["readonly"], "Return a range of members in a sorted set, by "
      "lexicographical range", "key:key min:string max:string "
      "[LIMIT offset:integer count:integer]", "2.8.9")
def zrangebylex(ctx: CommandContext, args: list[bytes]) -> Any:
    return zrange_generic(ctx, args, 0, False, LEX, False)


@zcmd("zrevrangebylex", -4, ["readonly"], "Return a range of members in a sorted set, by "
      "lexicographical range, ordered from higher to lower strings",
      "key:key max:string min:string [LIMIT offset:integer count:integer]", "2.8.9")
def zrevrangebylex(ctx: CommandContext, args: list[bytes]) -> Any:
    return zrange_generic(ctx, args, 0, False, LEX, True)


@zcmd("zrevrange", -4, ["readonly"], "Return a range of members in a sorted set, by index, "
      "with scores ordered from high to low", "key:key start:integer stop:integer [WITHSCORES]")
def zrevrange(ctx: CommandContext, args: list[bytes]) -> Any:
    return zrange_generic(ctx, args, 0, False, RANK, True)
