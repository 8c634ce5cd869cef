"""Transactions: MULTI, EXEC, DISCARD, WATCH, UNWATCH (Redis semantics, Redis 7's texts).

The state (queue, watches, the WATCH registry) and the queueing rules are in
topicsrv/resp/multi.py; the dispatcher queues (dispatch Rule 7); this module holds the five
commands and runs a transaction.

Rule 1 (atomic): EXEC runs the queued commands back to back in one synchronous step, so no
other client of either front (they all run on the same trio loop, and the engine never
yields) can observe a state between two of them; the commit tokens of their writes are
awaited afterwards, together, by the session (each element of the reply is marked on its
own: session.emit), so a failed commit turns only its own element into the error.
Rule 2: EXEC answers EXECABORT when a command was refused at queue time (and runs nothing),
or when a queued command is flagged `denyoom` while the server is over `maxmemory` (as
redis-server's processCommand, with the OOM error's text; the transaction is discarded), else
the null array when a watched key changed (multi.py Rule 2), else the array of the
replies, a command's runtime error (syntax, WRONGTYPE, ...) being its own element.
Rule 3: a blocking command inside EXEC does not block (dispatch Rule 7). A command whose
handler awaits for another reason (FLUSHDB/FLUSHALL waiting for their commits, an XADD of more
than 4096 fields encoded off the loop) is awaited in its turn: the commands after it run once
it is done, so such a transaction is atomic only up to that command.
Rule 4: EXEC and DISCARD always end the transaction and forget every watch; UNWATCH inside
MULTI is queued (as Redis) and so changes nothing before EXEC.
Rule 5 (issue 23): EXEC is atomic, so while it runs every other client waits; it must be fast,
not interleaved. A run of plain `XADD key * ...` to one key among the queued commands goes
through the pipeline's coalescing (topicsrv/resp/batch.py: one engine write per MAX_RUN
commands, each command still answered on its own, the same replies and errors), as it does
outside MULTI. The cyclic GC is paused for that synchronous step: the step allocates a few
objects per command, which would otherwise trigger full collections over the whole heap in
the middle of the freeze (most of the stall, measured: bench/execstall.py); reference
counting still frees everything, and what the step leaves for the GC is collected after.
Rule 6 (crash): the writes of that step are one commit group (engine/journal.py Rule 4,
storage/txgroup.py): after a crash all of them are back or none, whichever topics' WAL shards
and the keyspace's shard they were written to.
"""

from __future__ import annotations

import gc
import inspect
from collections.abc import Awaitable
from typing import Any

from topicsrv.memory import oom_error
from topicsrv.resp.batch import argv_lists, run_xadds
from topicsrv.resp.commands.base import (
    NULL_ARRAY,
    CommandContext,
    Err,
    Simple,
    command,
    key_name,
)
from topicsrv.resp.dispatch import execute
from topicsrv.resp.multi import EXECABORT, ExecReply, Tx

OK = Simple("OK")
FLAGS = ["noscript", "loading", "stale", "fast", "allow_busy"]


def _cmd(name: str, arity: int, flags: list[str], summary: str, syntax: str = "",
         since: str = "1.2.0", first: int = 0, last: int = 0) -> Any:
    return command(name, arity, flags, first, last, 1 if first else 0, "transactions",
                   summary, since, syntax=syntax)


def _end(ctx: CommandContext, tx: Tx) -> None:
    tx.end()
    ctx.client.tx = None


def _outside_multi(ctx: CommandContext, error: str) -> Tx:
    """The client's transaction state (made on first use); `error` when already in MULTI."""
    tx = ctx.client.tx
    if tx is None:
        tx = ctx.client.tx = Tx()
    elif tx.multi:
        raise Err(error)
    return tx


@_cmd("multi", 1, FLAGS, "Starts a transaction.")
def multi(ctx: CommandContext, args: list[bytes]) -> Any:
    _outside_multi(ctx, "ERR MULTI calls can not be nested").multi = True
    return OK


@_cmd("discard", 1, FLAGS, "Discards a transaction.", since="2.0.0")
def discard(ctx: CommandContext, args: list[bytes]) -> Any:
    tx = ctx.client.tx
    if tx is None or not tx.multi:
        raise Err("ERR DISCARD without MULTI")
    _end(ctx, tx)
    return OK


@_cmd("watch", -2, FLAGS, "Monitors changes to keys to determine the execution of a transaction.",
      "key:key...", since="2.2.0", first=1, last=-1)
def watch(ctx: CommandContext, args: list[bytes]) -> Any:
    tx = _outside_multi(ctx, "ERR WATCH inside MULTI is not allowed")
    engine = ctx.engine
    for key in args:
        tx.watch(engine, key_name(key))
    return OK


@_cmd("unwatch", 1, FLAGS, "Forgets about watched keys of a transaction.", since="2.2.0")
def unwatch(ctx: CommandContext, args: list[bytes]) -> Any:
    tx = ctx.client.tx
    if tx is not None:
        tx.unwatch()
        if not tx.multi:
            ctx.client.tx = None
    return OK


@_cmd("exec", 1, ["noscript", "loading", "stale", "skip_slowlog"],
      "Executes all commands in a transaction.")
def exec_(ctx: CommandContext, args: list[bytes]) -> Any:
    tx = ctx.client.tx
    if tx is None or not tx.multi:
        raise Err("ERR EXEC without MULTI")
    queued, aborted, denyoom_bytes = tx.queued, tx.aborted, tx.denyoom_bytes
    dirty = not aborted and bool(tx.watched) and tx.is_dirty(ctx.engine)
    _end(ctx, tx)
    if aborted:
        raise Err(EXECABORT)
    if dirty:
        return NULL_ARRAY
    if _over_memory(ctx, denyoom_bytes):
        raise Err(f"EXECABORT Transaction discarded because of: {oom_error().resp_line()}")
    return run(ctx, queued)


def _over_memory(ctx: CommandContext, denyoom_bytes: int) -> bool:
    """Rule 2: a transaction with a `denyoom` command while memory is over the limit, the
    bytes of those commands counted (summed as they were queued, multi.py Tx.queue: a
    300,000-XADD EXEC spent a tenth of its step summing them again)."""
    memory = ctx.server.memory
    return bool(memory.limit) and denyoom_bytes >= 0 and memory.over(denyoom_bytes)


def run(ctx: CommandContext, queued: list[tuple[bytes, ...]]) -> Any:
    """Rule 1: every queued command in one synchronous step and one commit group (Rule 6;
    Rule 3 for an awaiting one: the group closes before it); a run of plain XADDs to one key
    is one engine write per batch.MAX_RUN, with the cyclic GC paused (Rule 5)."""
    paused = gc.isenabled()
    if paused:
        gc.disable()
    journal = ctx.engine.journal
    journal.begin_group()
    argvs = argv_lists(queued)
    try:
        return _run(argvs, ctx)
    finally:
        lazy = ctx.server.lazyfree  # freed in slices after the step (topicsrv/lazyfree.py)
        lazy.add(argvs)
        lazy.add(queued)
        journal.end_group()
        ctx.client.last_cmd = "exec"  # CLIENT LIST shows cmd=exec after it, as Redis
        if paused:
            gc.enable()


def _run(queued: list[list[bytes]], ctx: CommandContext) -> Any:
    replies = ExecReply()
    i, n = 0, len(queued)
    while i < n:
        argv = queued[i]
        if len(argv) >= 5 and argv[2] == b"*" and n - i > 1:
            coalesced = run_xadds(ctx, queued, i)
            if coalesced is not None:
                replies += coalesced
                i += len(coalesced)
                continue
        i += 1
        reply = execute(ctx, argv, nowait=True)
        if inspect.isawaitable(reply):
            return _rest(ctx, replies, reply, queued[i:])
        replies.append(reply)
    return replies


async def _rest(ctx: CommandContext, replies: ExecReply, waiting: Awaitable[Any],
                rest: list[list[bytes]]) -> Any:
    replies.append(await waiting)
    for argv in rest:
        reply = execute(ctx, argv, nowait=True)
        if inspect.isawaitable(reply):
            reply = await reply
        replies.append(reply)
    ctx.client.last_cmd = "exec"
    return replies
