"""Sorted-set commands (Redis 7's @sortedset family) over the keyspace
(engine/keyspace/zsets.py): members and scores, pops, removals by range, ZRANDMEMBER, ZSCAN.
The range reads are zsets_range.py's, the several-key ones zsets_multi.py's, the blocking pops
zsets_blocking.py's.

Rule 1: a handler parses its arguments, calls one operation of engine/keyspace/zsets.py (one
journaled keyspace operation per command) and returns the reply once it is committed; errors
are Redis 7.0's own texts in Redis's order (t_zset.c: arguments before the key unless Redis
looks the key up first), a key of another kind is WRONGTYPE.
Rule 2: reads count in INFO keyspace_hits / keyspace_misses as Redis's lookupKeyRead.
Rule 3 (scores out): a score is a Python float, which the encoder sends as Redis 7.0's
addReplyDouble does: a RESP2 bulk string of `%.17g` (`inf`, `-inf`), a RESP3 double. With
WITHSCORES, RESP2 flattens member, score; RESP3 answers [member, score] pairs (ZRANGE,
ZRANDMEMBER, ZUNION..., ZPOPMIN/ZPOPMAX with a count); ZSCAN answers bulk strings.
Rule 4: ZRANK/ZREVRANK accept Redis 7.2's WITHSCORE ([rank, score], a null array when the
member is missing); redis-server 7.0 has no such option.
"""

from __future__ import annotations

import math
from typing import Any, Final

from topicsrv.engine.keyspace import zsets as ops
from topicsrv.engine.keyspace.space import Keyspace
from topicsrv.engine.keyspace.zsetrange import (
    lex_span,
    parse_bound,
    parse_lex,
    parse_score,
    rank_span,
    score_span,
)
from topicsrv.engine.keyspace.zsetvalue import Pair, ZsetValue
from topicsrv.errors import TopicsError
from topicsrv.resp.commands.base import (
    NULL_ARRAY,
    SYNTAX,
    CommandContext,
    Err,
    command,
    committed,
    key_name,
    looked_up,
    parse_int,
    wrong_args,
)
from topicsrv.resp.commands.hashes import LONG_MAX, parse_cursor, scan_options
from topicsrv.resp.commands.keys import matcher

NOT_FLOAT: Final = "ERR value is not a valid float"
SCORE_RANGE: Final = "ERR min or max is not a float"
LEX_RANGE: Final = "ERR min or max not valid string range item"
POSITIVE: Final = "ERR value is out of range, must be positive"


def zcmd(name: str, arity: int, flags: list[str], summary: str, syntax: str,
         since: str = "1.2.0", first: int = 1, last: int = 1, step: int = 1) -> Any:
    return command(name, arity, flags, first, last, step, "sortedset", summary, since,
                   syntax=syntax)


def ks_of(ctx: CommandContext) -> Keyspace:
    return ctx.engine.keyspace


def read(ctx: CommandContext, key: bytes) -> ZsetValue | None:
    """A counted lookup (Rule 2)."""
    try:
        zv = ops.get(ks_of(ctx), key_name(key))
    except TopicsError:
        looked_up(ctx, True)
        raise
    looked_up(ctx, zv is not None)
    return zv


def score_arg(raw: bytes, text: str = NOT_FLOAT) -> float:
    score = parse_score(raw)
    if score is None:
        raise Err(text)
    return score


def scored(ctx: CommandContext, pairs: list[Pair], withscores: bool) -> list[Any]:
    """Rule 3: members, or members with scores (flat in RESP2, pairs in RESP3)."""
    if not withscores:
        return [m for m, _ in pairs]
    if ctx.resp3:
        return [[m, s] for m, s in pairs]
    return [x for m, s in pairs for x in (m, s)]


_LL_HALF: Final = float((1 << 62) - 1)


def fmt(score: float) -> bytes:
    """A score as ZSCAN's text, Redis 7.0's d2string: an integral score within 2^62 as an
    integer, any other as `%.17g`; `-0`, `inf`, `-inf`."""
    if math.isinf(score):
        return b"inf" if score > 0 else b"-inf"
    if score == 0:
        return b"-0" if math.copysign(1.0, score) < 0 else b"0"
    if -_LL_HALF <= score <= _LL_HALF and score == int(score):
        return b"%d" % int(score)
    return b"%.17g" % score


# ---- ZADD ZINCRBY ZREM ---------------------------------------------------------------------

@zcmd("zadd", -4, ["write", "denyoom", "fast"], "Add one or more members to a sorted set, or "
      "update its score if it already exists",
      "key:key [(NX|XX)] [(GT|LT)] [CH] [INCR] (score:double member:string)...")
def zadd(ctx: CommandContext, args: list[bytes]) -> Any:
    flags: set[bytes] = set()
    i = 1
    while i < len(args):
        opt = args[i].lower()
        if opt not in (b"nx", b"xx", b"ch", b"incr", b"gt", b"lt"):
            break
        flags.add(opt)
        i += 1
    rest = args[i:]
    if not rest or len(rest) % 2:
        raise Err(SYNTAX)
    nx, xx, gt, lt = (f in flags for f in (b"nx", b"xx", b"gt", b"lt"))
    incr = b"incr" in flags
    if nx and xx:
        raise Err("ERR XX and NX options at the same time are not compatible")
    if (gt and nx) or (lt and nx) or (gt and lt):
        raise Err("ERR GT, LT, and/or NX options at the same time are not compatible")
    if incr and len(rest) > 2:
        raise Err("ERR INCR option supports a single increment-element pair")
    pairs = [(score_arg(rest[j]), rest[j + 1]) for j in range(0, len(rest), 2)]
    added, updated, score, token = ops.zadd(ks_of(ctx), key_name(args[0]), pairs, nx, xx, gt,
                                            lt, incr)
    if incr:
        return committed(token, score)
    return committed(token, added + updated if b"ch" in flags else added)


@zcmd("zincrby", 4, ["write", "denyoom", "fast"], "Increment the score of a member in a "
      "sorted set", "key:key increment:integer member:string")
def zincrby(ctx: CommandContext, args: list[bytes]) -> Any:
    by = score_arg(args[1])
    _, _, score, token = ops.zadd(ks_of(ctx), key_name(args[0]), [(by, args[2])], incr=True)
    return committed(token, score)


@zcmd("zrem", -3, ["write", "fast"], "Remove one or more members from a sorted set",
      "key:key member:string...")
def zrem(ctx: CommandContext, args: list[bytes]) -> Any:
    n, token = ops.zrem(ks_of(ctx), key_name(args[0]), args[1:])
    return committed(token, n)


# ---- single reads --------------------------------------------------------------------------

@zcmd("zcard", 2, ["readonly", "fast"], "Get the number of members in a sorted set", "key:key")
def zcard(ctx: CommandContext, args: list[bytes]) -> Any:
    zv = read(ctx, args[0])
    return 0 if zv is None else len(zv)


@zcmd("zscore", 3, ["readonly", "fast"], "Get the score associated with the given member in a "
      "sorted set", "key:key member:string")
def zscore(ctx: CommandContext, args: list[bytes]) -> Any:
    zv = read(ctx, args[0])
    return None if zv is None else zv.score(args[1])


@zcmd("zmscore", -3, ["readonly", "fast"], "Get the score associated with the given members "
      "in a sorted set", "key:key member:string...", "6.2.0")
def zmscore(ctx: CommandContext, args: list[bytes]) -> Any:
    zv = read(ctx, args[0])
    return [None if zv is None else zv.score(m) for m in args[1:]]


def _rank(ctx: CommandContext, args: list[bytes], reverse: bool, name: str) -> Any:
    if len(args) > 3:
        raise wrong_args(name)
    withscore = len(args) == 3
    if withscore and args[2].lower() != b"withscore":
        raise Err(SYNTAX)
    zv = read(ctx, args[0])
    rank = None if zv is None else zv.rank(args[1])
    if rank is None or zv is None:
        return NULL_ARRAY if withscore else None
    if reverse:
        rank = len(zv) - 1 - rank
    return [rank, zv.score(args[1])] if withscore else rank


@zcmd("zrank", -3, ["readonly", "fast"], "Determine the index of a member in a sorted set",
      "key:key member:string [WITHSCORE]", "2.0.0")
def zrank(ctx: CommandContext, args: list[bytes]) -> Any:
    return _rank(ctx, args, False, "zrank")


@zcmd("zrevrank", -3, ["readonly", "fast"], "Determine the index of a member in a sorted set, "
      "with scores ordered from high to low", "key:key member:string [WITHSCORE]", "2.0.0")
def zrevrank(ctx: CommandContext, args: list[bytes]) -> Any:
    return _rank(ctx, args, True, "zrevrank")


@zcmd("zcount", 4, ["readonly", "fast"], "Count the members in a sorted set with scores within "
      "the given values", "key:key min:double max:double", "2.0.0")
def zcount(ctx: CommandContext, args: list[bytes]) -> Any:
    lo, hi = parse_bound(args[1]), parse_bound(args[2])
    if lo is None or hi is None:
        raise Err(SCORE_RANGE)
    zv = read(ctx, args[0])
    if zv is None:
        return 0
    start, stop = score_span(zv, lo, hi)
    return stop - start


@zcmd("zlexcount", 4, ["readonly", "fast"], "Count the number of members in a sorted set "
      "between a given lexicographical range", "key:key min:string max:string", "2.8.9")
def zlexcount(ctx: CommandContext, args: list[bytes]) -> Any:
    lo, hi = parse_lex(args[1]), parse_lex(args[2])
    if lo is None or hi is None:
        raise Err(LEX_RANGE)
    zv = read(ctx, args[0])
    if zv is None:
        return 0
    start, stop = lex_span(zv, lo, hi)
    return stop - start


# ---- removals by range ---------------------------------------------------------------------

def _remove(ctx: CommandContext, args: list[bytes], span: Any) -> Any:
    name = key_name(args[0])
    zv = ops.get(ks_of(ctx), name)
    if zv is None:
        return 0
    lo, hi = span(zv)
    n, token = ops.remove_span(ks_of(ctx), name, zv, lo, hi)
    return committed(token, n)


@zcmd("zremrangebyrank", 4, ["write"], "Remove all members in a sorted set within the given "
      "indexes", "key:key start:integer stop:integer", "2.0.0")
def zremrangebyrank(ctx: CommandContext, args: list[bytes]) -> Any:
    start, stop = parse_int(args[1]), parse_int(args[2])
    return _remove(ctx, args, lambda zv: rank_span(start, stop, len(zv)))


@zcmd("zremrangebyscore", 4, ["write"], "Remove all members in a sorted set within the given "
      "scores", "key:key min:double max:double")
def zremrangebyscore(ctx: CommandContext, args: list[bytes]) -> Any:
    lo, hi = parse_bound(args[1]), parse_bound(args[2])
    if lo is None or hi is None:
        raise Err(SCORE_RANGE)
    return _remove(ctx, args, lambda zv: score_span(zv, lo, hi))


@zcmd("zremrangebylex", 4, ["write"], "Remove all members in a sorted set between the given "
      "lexicographical range", "key:key min:string max:string", "2.8.9")
def zremrangebylex(ctx: CommandContext, args: list[bytes]) -> Any:
    lo, hi = parse_lex(args[1]), parse_lex(args[2])
    if lo is None or hi is None:
        raise Err(LEX_RANGE)
    return _remove(ctx, args, lambda zv: lex_span(zv, lo, hi))


# ---- pops ----------------------------------------------------------------------------------

def _zpop(ctx: CommandContext, args: list[bytes], top: bool) -> Any:
    if len(args) > 2:
        raise Err(SYNTAX)
    count = -1
    if len(args) == 2:
        count = parse_int(args[1], POSITIVE)
        if count < 0:
            raise Err(POSITIVE)
    name = key_name(args[0])
    zv = ops.get(ks_of(ctx), name)  # a lookup for a write: not counted (lookupKeyWrite)
    if zv is None or count == 0:
        return []
    pairs, token = ops.pop_from(ks_of(ctx), name, zv, 1 if count < 0 else count, top)
    if ctx.resp3 and count >= 0:
        return committed(token, [[m, s] for m, s in pairs])
    return committed(token, [x for m, s in pairs for x in (m, s)])


@zcmd("zpopmin", -2, ["write", "fast"], "Remove and return members with the lowest scores in a "
      "sorted set", "key:key [count:integer]", "5.0.0")
def zpopmin(ctx: CommandContext, args: list[bytes]) -> Any:
    return _zpop(ctx, args, False)


@zcmd("zpopmax", -2, ["write", "fast"], "Remove and return members with the highest scores in "
      "a sorted set", "key:key [count:integer]", "5.0.0")
def zpopmax(ctx: CommandContext, args: list[bytes]) -> Any:
    return _zpop(ctx, args, True)


def parse_mpop(args: list[bytes], first: int) -> tuple[list[str], bool, int]:
    """`numkeys key... MIN|MAX [COUNT count]` from args[first]: names, top (MAX), count."""
    numkeys = parse_int(args[first], "ERR numkeys should be greater than 0")
    if numkeys <= 0:
        raise Err("ERR numkeys should be greater than 0")
    where = first + 1 + numkeys
    if where >= len(args):
        raise Err(SYNTAX)
    names = [key_name(a) for a in args[first + 1:where]]
    side = args[where].upper()
    if side not in (b"MIN", b"MAX"):
        raise Err(SYNTAX)
    count = 0
    j = where + 1
    while j < len(args):
        if args[j].upper() != b"COUNT" or j + 1 >= len(args) or count:
            raise Err(SYNTAX)
        count = parse_int(args[j + 1], "ERR count should be greater than 0")
        if count <= 0:
            raise Err("ERR count should be greater than 0")
        j += 2
    return names, side == b"MAX", count or 1


def mpop_reply(ctx: CommandContext, name: str, pairs: list[Pair]) -> list[Any]:
    """ZMPOP/BZMPOP: [key, [[member, score], ...]] in both protocols."""
    return [name.encode("latin-1"), [[m, s] for m, s in pairs]]


@zcmd("zmpop", -4, ["write", "movablekeys"], "Remove and return members with scores in a "
      "sorted set", "numkeys:integer key:key... (MIN|MAX) [COUNT:count:integer]", "7.0.0",
      0, 0, 0)
def zmpop(ctx: CommandContext, args: list[bytes]) -> Any:
    names, top, count = parse_mpop(args, 0)
    name = ops.first_nonempty(ks_of(ctx), names)
    if name is None:
        return NULL_ARRAY
    pairs, token = ops.pop(ks_of(ctx), name, count, top)
    return committed(token, mpop_reply(ctx, name, pairs))


# ---- ZRANDMEMBER ZSCAN ---------------------------------------------------------------------

@zcmd("zrandmember", -2, ["readonly"], "Get one or multiple random elements from a sorted set",
      "key:key [count:integer [WITHSCORES]]", "6.2.0")
def zrandmember(ctx: CommandContext, args: list[bytes]) -> Any:
    if len(args) == 1:
        zv = read(ctx, args[0])
        return None if zv is None else ops.random_members(zv, -1)[0][0]
    count = parse_int(args[1])
    if count < -LONG_MAX:
        raise Err(f"ERR value is out of range, value must between {-LONG_MAX} and {LONG_MAX}")
    if len(args) > 3 or len(args) == 3 and args[2].lower() != b"withscores":
        raise Err(SYNTAX)
    withscores = len(args) == 3
    if withscores and not -(LONG_MAX // 2) <= count <= LONG_MAX // 2:
        raise Err("ERR value is out of range")
    zv = read(ctx, args[0])
    if zv is None or count == 0:
        return []
    return scored(ctx, ops.random_members(zv, count), withscores)


@zcmd("zscan", -3, ["readonly"], "Incrementally iterate sorted sets elements and associated "
      "scores", "key:key cursor:integer [MATCH:pattern:pattern] [COUNT:count:integer]", "2.8.0")
def zscan(ctx: CommandContext, args: list[bytes]) -> Any:
    cursor = parse_cursor(args[1])
    zv = read(ctx, args[0])
    if zv is None:
        return [b"0", []]
    count, pattern = scan_options(args, 2)
    nxt, pairs = ops.scan(zv, cursor, count)
    if pattern is not None and pattern != b"*":
        match = matcher(pattern)
        pairs = [(m, s) for m, s in pairs if match(m)]
    return [str(nxt).encode(), [x for m, s in pairs for x in (m, fmt(s))]]
