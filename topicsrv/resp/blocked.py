"""A blocking RESP command that found nothing: a `Block` (topicsrv/notify/blocks.py) whose
attempt answers in RESP values, counted like any other call.

Rule 1: the command's handler makes the Block with its attempt (the same synchronous read it
just made, returning NOTHING when it finds nothing) and returns it as its reply; the session
treats it as any awaitable (WAIT_COMMAND) and the I/O adapter either attaches to it (the
reactor: no task) or awaits it (a connection's task).
Rule 2: an attempt's error is its reply, as `awaits.guard` makes it for a coroutine: `Err` as
it is, an engine error through `error_reply`, anything else an internal error (logged).
Rule 3: the call is counted (latency histogram, INFO commandstats) once it ends: served,
timed out, or cancelled (a cancelled one as a call without error, as Redis counts a blocked
client it unblocks). `guarded` gives the Block the dispatcher's name and start time.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from time import perf_counter
from typing import Any

from topicsrv.errors import TopicsError
from topicsrv.notify.blocks import Block
from topicsrv.notify.lines import Line
from topicsrv.resp.commands.base import NULL_ARRAY, CommandContext, Err
from topicsrv.resp.dispatch import count_call, error_reply, internal_error


class RespBlock(Block):
    __slots__ = ("ctx", "name", "t0")

    def __init__(self, ctx: CommandContext, attempt: Callable[[], Any], *,
                 topics: Sequence[str] = (), lines: Sequence[Line] = (), demand: int = 1,
                 timeout_s: float | None = None,
                 recheck: Callable[[], float | None] | None = None) -> None:
        self.ctx = ctx
        self.name = ""  # set by `guarded` (a Block made outside the dispatcher is not counted)
        self.t0 = perf_counter()
        super().__init__(ctx.server.notifier, attempt, topics=topics, lines=lines, demand=demand,
                         timeout_s=timeout_s, timeout_result=NULL_ARRAY, recheck=recheck)

    def guarded(self, ctx: CommandContext, name: str, t0: float) -> RespBlock:
        """Rule 3: the dispatcher's name for the call and its start."""
        self.name = name
        self.t0 = t0
        return self

    def _attempt(self) -> Any:
        try:
            return Block._attempt(self)
        except Err as e:  # Rule 2
            return e
        except TopicsError as e:
            return error_reply(e)
        except Exception:
            return internal_error(self.ctx.front, "blocking command")

    def finished(self) -> None:
        Block.finished(self)
        self._count(isinstance(self.result, Err))

    def finished_unserved(self) -> None:
        self._count(False)

    def _count(self, failed: bool) -> None:
        if not self.name:
            return
        ctx = self.ctx
        dt = perf_counter() - self.t0
        ctx.server.metrics.resp_latency.observe(self.name, dt)
        count_call(ctx.front, self.name, dt, 1, 1 if failed else 0)
