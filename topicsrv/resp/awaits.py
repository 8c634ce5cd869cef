"""The async halves of the RESP session and dispatcher (kept out of those compiled modules:
topicsrv/buildinfo.py compiles only synchronous code).

Rule 1: `settle` waits for the commit tokens of the writes whose replies sit in the output
buffer; a failed commit's reply is replaced in place by its error (session.py Rule 4).
Rule 2: `guard` turns whatever a blocking command raises into an error reply (dispatch Rule 2).
"""

from __future__ import annotations

from collections.abc import Awaitable
from time import perf_counter
from typing import Any

from topicsrv.errors import TopicsError
from topicsrv.resp.commands.base import CommandContext, Err, Front
from topicsrv.resp.dispatch import error_reply, internal_error
from topicsrv.resp.encoder import encode_error

Mark = tuple[Any, int, int]  # (commit token, reply start, reply end) in `out`


async def settle(marks: list[Mark], out: bytearray, front: Front) -> None:
    """Wait for the commit tokens of the writes whose replies sit in `out`; a failed one's
    reply becomes the error, spliced in place, last first so earlier offsets stay valid."""
    failed: list[tuple[int, int, str]] = []
    for token, start, end in marks:
        try:
            await token.wait()
        except TopicsError as e:
            failed.append((start, end, e.resp_line()))
        except Exception:
            failed.append((start, end, internal_error(front, "a commit wait").text))
    for start, end, text in reversed(failed):
        err = bytearray()
        encode_error(err, text)
        out[start:end] = err


async def guard(aw: Awaitable[Any], ctx: CommandContext, name: str, t0: float) -> Any:
    """An async handler's reply; its latency (dispatch Rule 8) is observed when it is done."""
    try:
        return await aw
    except Err as e:
        return e
    except TopicsError as e:
        return error_reply(e)
    except Exception:
        return internal_error(ctx.front, "blocking command")
    finally:
        ctx.server.metrics.resp_latency.observe(name, perf_counter() - t0)
