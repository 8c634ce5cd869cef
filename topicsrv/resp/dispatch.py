"""Command dispatch: one argv -> one reply value (or a coroutine for a blocking command).

Rule 1: checks run in redis-server's order: unknown command, authentication (NOAUTH), unknown
subcommand, arity; then the handler parses its own arguments.
Rule 2: every failure becomes an error REPLY: `Err` as is, `TopicsError` via its RESP prefix,
anything unexpected as `ERR internal error` (logged). A client never sees a traceback and the
connection stays open.
Rule 3: over `--max-memory`, a command flagged `denyoom` is refused after the arity check with
Redis's `-OOM` text, before its handler runs (topicsrv/memory.py); a MemoryError is `-OOM` too.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable
from typing import Any

from topicsrv.errors import TopicsError
from topicsrv.memory import oom_error
from topicsrv.resp.commands.base import (
    CommandContext,
    Err,
    Pending,
    lookup,
    unknown_subcommand,
    wrong_args,
)
from topicsrv.resp.encoder import encode, encode_error

log = logging.getLogger("topicsrv.resp")

NO_AUTH = frozenset({"auth", "hello", "quit", "reset"})


def _text(b: bytes) -> str:
    return b.decode("utf-8", "surrogateescape")


def unknown_command(argv: list[bytes]) -> Err:
    args = ""
    for a in argv[1:]:
        if len(args) >= 128:
            break
        args += f"'{_text(a[: 128 - len(args)])}' "
    return Err(f"ERR unknown command '{_text(argv[0][:128])}', with args beginning with: {args}")


def execute(ctx: CommandContext, argv: list[bytes]) -> Any:
    """Run one command; returns a reply value or an awaitable (async handlers)."""
    front = ctx.front
    front.stats.total_commands += 1
    spec, used = lookup(argv)
    if spec is None:
        return unknown_command(argv)
    client = ctx.client
    if not client.authenticated and spec.name.partition("|")[0] not in NO_AUTH:
        return Err("NOAUTH Authentication required.")
    if spec.subcommands and used == 1 and (len(argv) > 1 or spec.handler is None):
        if len(argv) == 1:
            return wrong_args(spec.name)
        return unknown_subcommand(spec.name, argv[1])
    n = len(argv)
    if (spec.arity > 0 and n != spec.arity) or n < -spec.arity:
        return wrong_args(spec.name)
    client.last_cmd = spec.name
    handler = spec.handler
    assert handler is not None
    memory = ctx.server.memory
    if memory.limit and "denyoom" in spec.flags and memory.over(sum(map(len, argv))):
        return Err(oom_error().resp_line())
    try:
        result = handler(ctx, argv[used:])
    except Err as e:
        return e
    except TopicsError as e:
        return Err(e.resp_line())
    except MemoryError:
        log.error("command %s ran out of memory", spec.name)
        return Err(oom_error().resp_line())
    except Exception:
        front.stats.unexpected_errors += 1
        log.exception("command %s failed", spec.name)
        return Err("ERR internal error")
    if spec.is_async or inspect.isawaitable(result):
        return _guard(result, ctx)
    return result


async def _guard(aw: Awaitable[Any], ctx: CommandContext) -> Any:
    try:
        return await aw
    except Err as e:
        return e
    except TopicsError as e:
        return Err(e.resp_line())
    except Exception:
        ctx.front.stats.unexpected_errors += 1
        log.exception("blocking command failed")
        return Err("ERR internal error")


async def settle(marks: list[tuple[Any, int, int]], out: bytearray) -> None:
    """Wait for the commit tokens of the writes whose replies sit in `out` (each mark is
    (token, start, end) of its reply); a failed one's reply becomes the error, spliced in
    place, last first so earlier offsets stay valid. Shared by both I/O paths."""
    failed: list[tuple[int, int, str]] = []
    for token, start, end in marks:
        try:
            await token.wait()
        except TopicsError as e:
            failed.append((start, end, e.resp_line()))
    for start, end, text in reversed(failed):
        err = bytearray()
        encode_error(err, text)
        out[start:end] = err


def emit(out: bytearray, marks: list[tuple[Any, int, int]], reply: Any, resp3: bool) -> None:
    """Encode `reply` into `out`; a write waiting for its commit (Pending) leaves a mark so
    `settle` can wait for it and swap in the error if the commit fails."""
    if type(reply) is Pending:
        start = len(out)
        encode(out, reply.reply, resp3)
        marks.append((reply.token, start, len(out)))
    else:
        encode(out, reply, resp3)


def over_output_limit(stats: Any, client: Any, pending: int, limit: int) -> bool:
    """True (counted and logged) when a client's pending replies exceed its output limit:
    the connection is then closed instead of growing server memory."""
    if pending <= limit:
        return False
    stats.output_limit_disconnects += 1
    log.warning("client %d (%s) closed: %d bytes of pending output exceed client_output_limit %d",
                client.id, client.addr, pending, limit)
    return True
