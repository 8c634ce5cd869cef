"""The blocking sorted-set pops (Redis 7's BZPOPMIN, BZPOPMAX, BZMPOP) on the one blocking
machinery (topicsrv/notify/lines.py), exactly as the blocking list pops (lists_blocking.py,
whose Rules 1-6 hold here with "sorted set" for "list"): each sorted-set key has a line of
blocked clients, FIFO, and a write that adds K members makes at most K of them ready.

Rule 1: a command first tries at once, as ZPOPMIN/ZPOPMAX/ZMPOP; only when every key is
missing does it wait in the lines of its keys; the first key in argument order that holds
members serves it. Inside MULTI/EXEC or a script it never waits (a null array at once).
As redis-server 7.0, BZPOPMIN and BZPOPMAX are `noscript`, BZMPOP is not.
Rule 2: timeouts are the list pops' (parse_timeout); a timed-out wait answers a null array.
Rule 3 (replies, both protocols): BZPOPMIN/BZPOPMAX [key, member, score]; BZMPOP [key,
[[member, score], ...]].
Rule 4 (nothing to a client that is gone): members popped for a waiting client that left
before its reply go back with their scores (notify/blocks.py Rule 2).
Rule 5 (events): a served pop fires ZPOPMIN's or ZPOPMAX's `zpopmin`/`zpopmax`, then `del`
when it emptied the key (lists_blocking.py Rule 7).
"""

from __future__ import annotations

import logging
from typing import Any

from topicsrv.bus.keyspace import ZSET
from topicsrv.engine.keyspace import zsets as ops
from topicsrv.errors import TopicsError
from topicsrv.resp.blocked import RespBlock
from topicsrv.resp.commands.base import CommandContext, committed, key_name
from topicsrv.resp.commands.lists_blocking import block_on, parse_timeout, pop_events
from topicsrv.resp.commands.zsets import ks_of, mpop_reply, parse_mpop, zcmd

log = logging.getLogger("topicsrv.resp")
LINE = "zset"


def _pop_for(ctx: CommandContext, name: str, count: int, top: bool,
             block: RespBlock | None) -> tuple[list[tuple[bytes, float]], Any]:
    ks = ks_of(ctx)
    pairs, token = ops.pop(ks, name, count, top)
    if pairs:  # Rule 5
        pop_events(ctx, [(ZSET, b"zpopmax" if top else b"zpopmin", name)])
    if block is not None:
        def give_back() -> None:  # Rule 4
            try:
                ks.commit([ops.change(ks, name, pairs, [])])
            except TopicsError as e:
                log.warning("%d members popped for a client that left could not go back to "
                            "%r: %s", len(pairs), name, e)
        block.give_back = give_back
    return pairs, token


def _bzpop(ctx: CommandContext, args: list[bytes], top: bool) -> Any:
    timeout = parse_timeout(args[-1])
    names = [key_name(a) for a in args[:-1]]

    def serve(name: str, block: RespBlock | None) -> Any:
        pairs, token = _pop_for(ctx, name, 1, top, block)
        member, score = pairs[0]
        return committed(token, [name.encode("latin-1"), member, score])

    return block_on(ctx, LINE, names, serve, timeout)


@zcmd("bzpopmin", -3, ["write", "noscript", "blocking", "fast"], "Remove and return the member "
      "with the lowest score from one or more sorted sets, or block until one is available",
      "key:key... timeout:double", "5.0.0", 1, -2, 1)
def bzpopmin(ctx: CommandContext, args: list[bytes]) -> Any:
    return _bzpop(ctx, args, False)


@zcmd("bzpopmax", -3, ["write", "noscript", "blocking", "fast"], "Remove and return the member "
      "with the highest score from one or more sorted sets, or block until one is available",
      "key:key... timeout:double", "5.0.0", 1, -2, 1)
def bzpopmax(ctx: CommandContext, args: list[bytes]) -> Any:
    return _bzpop(ctx, args, True)


@zcmd("bzmpop", -5, ["write", "blocking", "movablekeys"], "Remove and return members with "
      "scores in a sorted set or block until one is available",
      "timeout:double numkeys:integer key:key... (MIN|MAX) [COUNT:count:integer]", "7.0.0",
      0, 0, 0)
def bzmpop(ctx: CommandContext, args: list[bytes]) -> Any:
    timeout = parse_timeout(args[0])
    names, top, count = parse_mpop(args, 1)

    def serve(name: str, block: RespBlock | None) -> Any:
        pairs, token = _pop_for(ctx, name, count, top, block)
        return committed(token, mpop_reply(ctx, name, pairs))

    return block_on(ctx, LINE, names, serve, timeout, count)
