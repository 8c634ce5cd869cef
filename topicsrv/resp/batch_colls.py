"""Runs of the common list, hash, set and sorted-set commands, and of PUBLISH, past the
per-command dispatch (as batch.py's SET and GET runs: its Rules 4, 6, 9 and 10 hold here).

Rule 1: a run is consecutive commands of one name among FAST (any keys), each with an argument
count its entry admits; every command runs its own handler (the function the command table
calls, so its reply, its errors, its one journaled operation and its keyspace hit/miss
counting are the command's own) and gets its own reply, in order. A plain command alone (a run
of one: every P1 request) takes the same path.
Rule 2: only what makes the dispatcher's per-command checks moot runs here: a client that
`batch.plain_client` admits (the default user, authenticated, not subscribed, keyspace
events off, no BUSY script), outside MULTI, and for a write under `--max-memory` a run whose
bytes fit (`batch.over_memory`); anything else goes command by command through the dispatcher.
Rule 3: bookkeeping as for single commands (batch.py Rule 4): total_commands, last_cmd, the
latency histogram and commandstats (n calls, the error replies as failed calls).
Rule 4: a run of two or more writes is journaled once (engine/keyspace/space.py Rule 9): each
command commits, is applied and tells WATCH and waiters as alone, and the run's operations go
to the journal as one at its end; under an `fsync` keyspace every reply but the errors waits
for that one token (the replies go out in order anyway).
Rule 5: a write with a `step` (LPUSH, RPUSH, LPOP, RPOP, HSET, SADD, ZADD, ZPOPMIN: their
plain forms) skips its handler and the per-command commit: the step parses the command and
engine/keyspace/runs.py applies its change within the run's ONE operation (that module's
Rules: the same changes, replies and errors, WATCH and waiters told once after the run); a
form the step leaves alone (ZADD with options, a hash with field deadlines) runs its
handler inside the same run (runs.py Rule 3). A run of one (P1) takes the same path.
"""

from __future__ import annotations

from collections.abc import Callable
from time import perf_counter
from typing import Any, Final

from topicsrv.engine.keyspace import runs
from topicsrv.engine.keyspace.runs import SLOW, Run
from topicsrv.engine.keyspace.zsetrange import parse_score
from topicsrv.errors import TopicsError
from topicsrv.resp.batch import MAX_RUN, account, over_memory, plain_client
from topicsrv.resp.commands import hashes as hcmd
from topicsrv.resp.commands import lists as lcmd
from topicsrv.resp.commands import sets as scmd
from topicsrv.resp.commands import zsets as zcmd
from topicsrv.resp.commands import zsets_range as zrcmd
from topicsrv.resp.commands.base import CommandContext, Err, Pending
from topicsrv.resp.dispatch import error_reply, internal_error

Handler = Callable[[CommandContext, list[bytes]], Any]
Step = Callable[[Run, list[bytes]], Any]


class Fast:
    """One command FAST admits: its handler, its argument counts (min, max; -1: no max, and
    `pairs`: min plus a multiple of 2), whether it writes, its step (Rule 5)."""

    __slots__ = ("name", "handler", "least", "most", "pairs", "write", "step")

    def __init__(self, name: str, handler: Handler, least: int, most: int, write: bool,
                 pairs: bool = False, step: Step | None = None) -> None:
        self.name = name
        self.handler = handler
        self.least = least
        self.most = most
        self.write = write
        self.pairs = pairs
        self.step = step

    def admits(self, argc: int) -> bool:
        if argc < self.least or (self.most >= 0 and argc > self.most):
            return False
        return not self.pairs or (argc - self.least) % 2 == 0


FAST: Final[dict[bytes, Fast]] = {}


def _add(fast: Fast) -> None:
    raw = fast.name.encode()
    FAST[raw] = FAST[raw.upper()] = fast


# ---- the steps (Rule 5): argv as its Fast entry admits it ---------------------------------

def _lpush(run: Run, argv: list[bytes]) -> Any:
    return runs.push(run, argv[1].decode("latin-1"), argv[2:], True)


def _rpush(run: Run, argv: list[bytes]) -> Any:
    return runs.push(run, argv[1].decode("latin-1"), argv[2:], False)


def _lpop(run: Run, argv: list[bytes]) -> Any:
    return runs.pop(run, argv[1].decode("latin-1"), True)


def _rpop(run: Run, argv: list[bytes]) -> Any:
    return runs.pop(run, argv[1].decode("latin-1"), False)


def _hset(run: Run, argv: list[bytes]) -> Any:
    pairs = [(argv[2], argv[3])] if len(argv) == 4 else \
        list(zip(argv[2::2], argv[3::2], strict=True))
    return runs.hset(run, argv[1].decode("latin-1"), pairs)


def _sadd(run: Run, argv: list[bytes]) -> Any:
    return runs.sadd(run, argv[1].decode("latin-1"), argv[2:])


def _zadd(run: Run, argv: list[bytes]) -> Any:
    """The plain form `ZADD key score member ...`; an option or a score that does not parse
    is the handler's to answer."""
    if len(argv) % 2:
        return SLOW
    pairs: list[tuple[float, bytes]] = []
    for j in range(2, len(argv), 2):
        score = parse_score(argv[j])
        if score is None:
            return SLOW
        pairs.append((score, argv[j + 1]))
    return runs.zadd(run, argv[1].decode("latin-1"), pairs)


def _zpopmin(run: Run, argv: list[bytes]) -> Any:
    return runs.zpop(run, argv[1].decode("latin-1"), False)


def _publish(ctx: CommandContext, args: list[bytes]) -> Any:
    """PUBLISH's handler (commands/pubsub.py), here as a native call (issue 38: PUBLISH to one
    subscriber at P1 is the dispatcher's checks and this call)."""
    return ctx.server.bus.publish(args[0], args[1])


_add(Fast("lpush", lcmd.lpush, 3, -1, True, step=_lpush))
_add(Fast("rpush", lcmd.rpush, 3, -1, True, step=_rpush))
_add(Fast("lpop", lcmd.lpop, 2, 2, True, step=_lpop))
_add(Fast("rpop", lcmd.rpop, 2, 2, True, step=_rpop))
_add(Fast("hset", hcmd.hset, 4, -1, True, pairs=True, step=_hset))
_add(Fast("hget", hcmd.hget, 3, 3, False))
_add(Fast("sadd", scmd.sadd, 3, -1, True, step=_sadd))
_add(Fast("sismember", scmd.sismember, 3, 3, False))
_add(Fast("zadd", zcmd.zadd, 4, -1, True, step=_zadd))
_add(Fast("zscore", zcmd.zscore, 3, 3, False))
_add(Fast("zpopmin", zcmd.zpopmin, 2, 2, True, step=_zpopmin))
_add(Fast("zrangebyscore", zrcmd.zrangebyscore, 4, -1, False))
_add(Fast("publish", _publish, 3, 3, False))


def _lookup(name: bytes) -> Fast | None:
    fast = FAST.get(name)
    if fast is None and len(name) <= 8:
        fast = FAST.get(name.lower())
    return fast


def run_colls(ctx: CommandContext, cmds: list[list[bytes]], i: int) -> list[Any] | None:
    """Replies for the run of FAST commands starting at cmds[i] (Rule 1), or None (not one of
    them, or a guard says no: Rule 2)."""
    first = cmds[i]
    fast = _lookup(first[0])
    if fast is None or not fast.admits(len(first)) or not plain_client(ctx):
        return None
    end = min(len(cmds), i + MAX_RUN)
    j = i + 1
    while j < end:
        argv = cmds[j]
        if _lookup(argv[0]) is not fast or not fast.admits(len(argv)):
            break
        j += 1
    run = cmds[i:j]
    if fast.write and over_memory(ctx, run):
        return None  # each command is refused on its own (-OOM)
    t0 = perf_counter()
    ks = ctx.engine.keyspace
    started: Run | None = None
    if fast.step is not None and ks.gathered is None:
        try:
            started = runs.begin(ks)  # Rule 5
        except TopicsError:  # storage refuses writes: each command answers it on its own
            started = None
    gather = started is None and fast.write and len(run) > 1  # Rule 4
    if gather:
        ks.gather()
    try:
        replies, failed = _replies(ctx, fast, run, started)
    finally:
        if started is not None:
            token = runs.finish(started)
        else:
            token = ks.journal_gathered() if gather else None
    if token is not None:
        replies = [r if isinstance(r, Err | Pending) else Pending(token, r) for r in replies]
    account(ctx, fast.name, len(run), t0, failed)
    return replies


def _replies(ctx: CommandContext, fast: Fast, run: list[list[bytes]],
             started: Run | None) -> tuple[list[Any], int]:
    """Each command's reply, in order (its step's within a started run: Rule 5, else its
    handler's), and how many are errors."""
    step = fast.step
    handler = fast.handler
    replies: list[Any] = []
    failed = 0
    for argv in run:
        try:
            reply = SLOW if started is None or step is None else step(started, argv)
            if reply is SLOW:
                reply = handler(ctx, argv[1:])
        except Err as e:
            reply = e
        except TopicsError as e:
            reply = error_reply(e)
        except Exception:  # as the dispatcher: this command's reply only (dispatch Rule 2)
            reply = internal_error(ctx.front, f"command {fast.name}")
        if type(reply) is Err:
            failed += 1
        replies.append(reply)
    return replies, failed
