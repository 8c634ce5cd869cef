"""The blocking list pops (Redis 7's BLPOP, BRPOP, BLMOVE, BRPOPLPUSH, BLMPOP) on the one blocking
machinery (topicsrv/notify/lines.py): each list key has a line of blocked clients, FIFO, and a
push of K elements makes at most K of them ready, as Redis's blocked.c serves its clients.

Rule 1: a command first tries at once, exactly as its non-blocking twin; only when every key is
empty (or missing) does it wait, in the lines of its keys (several keys: one wait, the first
key in argument order that has an element serves it).
Rule 2: a push inside MULTI/EXEC or a script wakes waiters only after it (the engine holds its
change notices until the end of the step); inside EXEC or a script a blocking pop never waits
(resp/dispatch.py `nowait`): it answers at once, a null array when nothing is there. As in
redis-server 7.0, BLPOP BRPOP BLMOVE BRPOPLPUSH are `noscript` (a script calling one gets
`This Redis command is not allowed from script`); BLMPOP is not, and answers at once.
Rule 3: a key that holds another kind when the wait is served is skipped (the client keeps
waiting, as Redis serves only list keys to it); at the first try it answers WRONGTYPE.
Rule 4 (timeouts, Redis's texts): seconds as a float, 0 = forever; negative is "timeout is
negative", not a number "timeout is not a float or out of range"; a timed-out wait answers a
null array.
Rule 5 (nothing to a client that is gone): a waiting BLPOP/BRPOP/BLMPOP whose client leaves
between the pop and its reply gives the elements back where they were (notify/blocks.py
Rule 2); a BLMOVE/BRPOPLPUSH's element stays in its destination, where the reliable-queue
pattern looks for it.
Rule 6 (fairness, as Redis): a key with clients already blocked on it serves them first: a new
blocking pop does not take from it at once but joins the end of its line (a pipelined
`LPUSH k x` + `BLPOP k 0` from one client leaves `x` to the client that blocked before).
Rule 7 (events): a served pop fires what its non-blocking twin fires (keyevents_lists.py
Rule 2): `lpop`/`rpop` and `del` when it emptied the key; a served move `new` for a destination
it created, `lpush`/`rpush` there, then the source's pop and `del`.
Rule 8: a pop of one element (BLPOP, BRPOP, BLMPOP without COUNT, at once or served) takes
RPOP's plain path (engine/keyspace/runs.py, a run of one: the same change, journal, WATCH and
waiters told, fewer steps than the generic commit); with a COUNT, or inside a transaction or
a script (the keyspace gathers their operations), the generic pop.
"""

from __future__ import annotations

import logging
import math
import time
from typing import Any

from topicsrv.bus.keyspace import GENERIC, LIST, NEW
from topicsrv.engine.keyspace import lists as ops
from topicsrv.engine.keyspace import runs
from topicsrv.engine.keyspace.space import Keyspace
from topicsrv.errors import TopicsError
from topicsrv.notify.lines import Line
from topicsrv.notify.waiter import NOTHING
from topicsrv.resp.blocked import RespBlock
from topicsrv.resp.commands.base import (
    CommandContext,
    Err,
    command,
    committed,
    key_name,
)
from topicsrv.resp.commands.lists import _side, parse_mpop

NOT_FLOAT = "ERR timeout is not a float or out of range"
log = logging.getLogger("topicsrv.resp")


def parse_timeout(raw: bytes) -> float | None:
    """Rule 4, as Redis's getTimeoutFromObjectOrReply: the seconds times 1000 cast to a C long
    long (so an infinity or a value past its range is negative, and -0.0009 is 0); None for
    0 (wait forever)."""
    try:
        t = float(raw)
    except ValueError:
        raise Err(NOT_FLOAT) from None
    if math.isnan(t):
        raise Err(NOT_FLOAT)
    ms = t * 1000.0
    tval = int(ms) if -9.2e18 < ms < 9.2e18 else -1
    if tval < 0:
        raise Err("ERR timeout is negative")
    if tval > (1 << 63) - 1 - int(time.time() * 1000):
        raise Err("ERR timeout is out of range")
    return None if tval == 0 else tval / 1000.0


def kind_line(ctx: CommandContext, kind: str, name: str) -> Line:
    """The line of the clients blocked on collection `name` of `kind` ("list", "zset"); its
    supply is the collection's length (0 while the key is missing or of another kind, Rule 3)."""
    colls = ctx.engine.keyspace.colls

    def supply() -> int:
        value = colls.get(name)
        return len(value) if value is not None and value.KIND == kind else 0

    return ctx.server.notifier.line((kind, name), name, supply)


def _ready(ctx: CommandContext, kind: str, names: list[str]) -> str | None:
    """The first of `names` that holds a non-empty collection of `kind` now (others skipped,
    Rule 3)."""
    colls = ctx.engine.keyspace.colls
    for name in names:
        value = colls.get(name)
        if value is not None and value.KIND == kind and len(value):
            return name
    return None


def block_on(ctx: CommandContext, kind: str, names: list[str], serve: Any,
             timeout: float | None, demand: int = 1) -> Any:
    """Rule 1: serve now if a key holds something, else wait in the keys' lines. `serve(name,
    block)` pops from `name`; when it serves a waiting `block` it sets the block's give_back
    (Rule 5). The blocking sorted-set pops wait here too (zsets_blocking.py)."""
    ks = ctx.engine.keyspace
    for key in names:  # WRONGTYPE at the first try (Rule 3), lazy expiry too
        ks.coll(key, kind)
    by_key = ctx.server.notifier.lines.by_key
    queued = [n for n in names if not _queue(by_key.get((kind, n)))]
    now = _ready(ctx, kind, queued)  # keys with clients blocked on them serve those (Rule 6)
    if now is not None:
        return serve(now, None)
    box: list[RespBlock] = []

    def attempt() -> Any:
        ready = _ready(ctx, kind, names)
        return NOTHING if ready is None else serve(ready, box[0])

    lines = [kind_line(ctx, kind, n) for n in dict.fromkeys(names)]
    box.append(RespBlock(ctx, attempt, lines=lines, demand=demand, timeout_s=timeout))
    return box[0]


def _block(ctx: CommandContext, names: list[str], serve: Any, timeout: float | None,
           demand: int = 1) -> Any:
    return block_on(ctx, "list", names, serve, timeout, demand)


def _queue(line: Line | None) -> bool:
    """Rule 6: are clients waiting, or being served, in this line?"""
    return line is not None and (line.live > 0 or line.in_flight > 0)


def pop_events(ctx: CommandContext, fired: list[tuple[int, bytes, str]]) -> None:
    """Rule 7: the keyspace events of a served pop or move, in redis-server's order (one
    `del` for a key the command emptied); the sorted-set pops use it too."""
    bus = ctx.server.bus.keyspace
    if not bus.flags:
        return
    ks = ctx.engine.keyspace
    for klass, event, name in fired:
        key = name.encode("latin-1")
        bus.notify(klass, event, key)
        if b"pop" in event and not ks.owns(name):  # lpop, rpop, zpopmin, zpopmax
            bus.notify(GENERIC, b"del", key)


def _pop_for(ctx: CommandContext, name: str, count: int, left: bool,
             block: RespBlock | None) -> tuple[list[bytes], Any]:
    """Pop for a client; a waiting client that leaves before its reply is written gives the
    elements back where they were, in their order (Rule 5)."""
    ks = ctx.engine.keyspace
    values: list[bytes] | None
    if count == 1 and ks.gathered is None:
        values, token = _pop_one(ks, name, left)
    else:
        values, token = ops.pop(ks, name, count, left)
    assert values
    pop_events(ctx, [(LIST, b"lpop" if left else b"rpop", name)])
    if block is not None:
        back = values[::-1]

        def give_back() -> None:
            try:
                ops.push(ks, name, back, left, False)
            except TopicsError as e:  # the key became another kind, or storage refuses
                log.warning("%d elements popped for a client that left could not go back "
                            "to %r: %s", len(back), name, e)
        block.give_back = give_back
    return values, token


def _pop_one(ks: Keyspace, name: str, left: bool) -> tuple[list[bytes], Any]:
    """Rule 8: one element popped as RPOP's plain form pops it (a run of one,
    engine/keyspace/runs.py), outside MULTI and scripts. Where storage refuses writes,
    `runs.begin` raises the error the generic pop's commit would (the same check_writable),
    before anything is applied."""
    run = runs.begin(ks)
    try:
        value = runs.pop(run, name, left)
    finally:
        token = runs.finish(run)
    return ([] if value is None else [value]), token


def _bpop(ctx: CommandContext, args: list[bytes], left: bool) -> Any:
    timeout = parse_timeout(args[-1])
    names = [key_name(a) for a in args[:-1]]

    def serve(name: str, block: RespBlock | None) -> Any:
        values, token = _pop_for(ctx, name, 1, left, block)
        return committed(token, [name.encode("latin-1"), values[0]])

    return _block(ctx, names, serve, timeout)


@command("blpop", -3, ["write", "blocking", "noscript"], 1, -2, 1, "list", "Remove and get "
         "the first element in a list, or block until one is available", "2.0.0",
         syntax="key:key... timeout:double")
def blpop(ctx: CommandContext, args: list[bytes]) -> Any:
    return _bpop(ctx, args, True)


@command("brpop", -3, ["write", "blocking", "noscript"], 1, -2, 1, "list", "Remove and get "
         "the last element in a list, or block until one is available", "2.0.0",
         syntax="key:key... timeout:double")
def brpop(ctx: CommandContext, args: list[bytes]) -> Any:
    return _bpop(ctx, args, False)


def _bmove(ctx: CommandContext, src: str, dst: str, from_left: bool, to_left: bool,
           timeout: float | None) -> Any:
    # the destination's kind is checked when there is an element to move (as Redis): a wrong
    # one is the client's WRONGTYPE then, and the element stays in the source

    def serve(name: str, block: RespBlock | None) -> Any:
        # the element is in `dst` once moved, whether or not the client is still there to
        # hear it: the reliable-queue pattern's point (Rule 5)
        ks = ctx.engine.keyspace
        fresh = ks.kind(dst) is None
        value, token = ops.move(ks, src, dst, from_left, to_left)
        if value is not None:  # as LMOVE's: the destination's events, then the source's
            fired = [(NEW, b"new", dst)] if fresh and src != dst else []
            fired += [(LIST, b"lpush" if to_left else b"rpush", dst),
                      (LIST, b"lpop" if from_left else b"rpop", src)]
            pop_events(ctx, fired)
        return committed(token, value)

    return _block(ctx, [src], serve, timeout)


@command("blmove", 6, ["write", "denyoom", "blocking", "noscript"], 1, 2, 1, "list",
         "Pop an element from a list, push it to another list and return it; or block until one "
         "is available", "6.2.0",
         syntax="source:key destination:key (LEFT|RIGHT) (LEFT|RIGHT) timeout:double")
def blmove(ctx: CommandContext, args: list[bytes]) -> Any:
    from_left, to_left = _side(args[2]), _side(args[3])
    timeout = parse_timeout(args[4])
    return _bmove(ctx, key_name(args[0]), key_name(args[1]), from_left, to_left, timeout)


@command("brpoplpush", 4, ["write", "denyoom", "blocking", "noscript"], 1, 2, 1, "list",
         "Pop an element from a list, push it to another list and return it; or block until one "
         "is available", "2.2.0", syntax="source:key destination:key timeout:double")
def brpoplpush(ctx: CommandContext, args: list[bytes]) -> Any:
    timeout = parse_timeout(args[2])
    return _bmove(ctx, key_name(args[0]), key_name(args[1]), False, True, timeout)


@command("blmpop", -5, ["write", "blocking", "movablekeys"], 0, 0, 0, "list", "Pop elements "
         "from a list, or block until one is available", "7.0.0",
         syntax="timeout:double numkeys:integer key:key... (LEFT|RIGHT) [COUNT:count:integer]")
def blmpop(ctx: CommandContext, args: list[bytes]) -> Any:
    timeout = parse_timeout(args[0])
    names, left, count = parse_mpop(args, 1, "blmpop")

    def serve(name: str, block: RespBlock | None) -> Any:
        values, token = _pop_for(ctx, name, count, left, block)
        return committed(token, [name.encode("latin-1"), values])

    return _block(ctx, names, serve, timeout, count)



