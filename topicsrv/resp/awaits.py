"""The async halves of the RESP session and dispatcher (kept out of those compiled modules:
topicsrv/buildinfo.py compiles only synchronous code).

Rule 1: `settle` waits for the commit tokens of the writes whose replies sit in the output
buffer, each distinct token once (a batched write's replies share one: EXEC of 300,000
XADDs is ~300 waits, not 300,000); a failed commit's reply is replaced in place by its error
(session.py Rule 4).
Rule 2: `guard` turns whatever a blocking command raises into an error reply (dispatch Rule 2).
"""

from __future__ import annotations

from collections.abc import Awaitable
from time import perf_counter
from typing import Any

from topicsrv.errors import TopicsError
from topicsrv.resp.commands.base import CommandContext, Err, Front
from topicsrv.resp.dispatch import count_call, error_reply, internal_error
from topicsrv.resp.encoder import encode_error

Mark = tuple[Any, int, int]  # (commit token, reply start, reply end) in `out`
Outcome = dict[int, "str | None"]  # id(token) -> None (durable) or its error's RESP line


async def settle(marks: list[Mark], out: bytearray, front: Front) -> None:
    """Wait for the commit tokens of the writes whose replies sit in `out`; a failed one's
    reply becomes the error, spliced in place, last first so earlier offsets stay valid."""
    outcome: Outcome = {}
    await wait_tokens(marks, outcome, front)
    apply_outcome(marks, out, outcome)


async def wait_tokens(marks: list[Mark], outcome: Outcome, front: Front) -> None:
    """Await each token of `marks` not yet in `outcome` once (Rule 1), recording how it
    ended. The tokens must stay referenced (by `marks`) while `outcome` is used: it is keyed
    by their ids. The reactor calls this once for the marks of every connection of a pass."""
    for token, _, _ in marks:
        key = id(token)
        if key not in outcome:
            try:
                await token.wait()
                outcome[key] = None
            except TopicsError as e:
                outcome[key] = e.resp_line()
            except Exception:
                outcome[key] = internal_error(front, "a commit wait").text


def apply_outcome(marks: list[Mark], out: bytearray, outcome: Outcome) -> None:
    """Replace the reply of every failed commit in `out` by its error, last first so that
    earlier offsets stay valid (session.py Rule 4)."""
    failed = [(start, end, text) for token, start, end in marks
              if (text := outcome[id(token)]) is not None]
    for start, end, text in reversed(failed):
        err = bytearray()
        encode_error(err, text)
        out[start:end] = err


async def guard(aw: Awaitable[Any], ctx: CommandContext, name: str, t0: float) -> Any:
    """An async handler's reply; its latency (dispatch Rule 8) and its call (Rule 10) are
    counted when it is done (a cancelled one as a call without error, as Redis counts a
    blocked client it unblocks)."""
    result: Any = None
    try:
        result = await aw
    except Err as e:
        result = e
    except TopicsError as e:
        result = error_reply(e)
    except Exception:
        result = internal_error(ctx.front, "blocking command")
    finally:
        dt = perf_counter() - t0
        ctx.server.metrics.resp_latency.observe(name, dt)
        count_call(ctx.front, name, dt, 1, 1 if isinstance(result, Err) else 0)
    return result
