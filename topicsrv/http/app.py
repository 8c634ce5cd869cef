"""Dispatch: a parsed `Request` in, a `Response` (or a `StreamPlan` to stream: watch, work) out.

Rule 1: the guards run before routing, in this order: Host (403), Origin /
Sec-Fetch-Site (403, cross-site requests), bearer token (401, on every
path when a token is configured), then the route (404/405/400 name), then the token's role
(403 for the read-only token on a route that changes anything), then the body's media type
(415); see `topicsrv.http.guards`. Routing sees the raw path the guards saw (router Rule 5).
A query parameter given twice is 400 `invalid_request` naming it (after routing), never a
guess at which one counts.
Rule 2: every failure leaves here as the error shape of API.md section 0. A TopicsError keeps
its status and code; any other exception is logged with its traceback and answered 500
`internal` without it. The connection (and the server) keep serving.
Rule 3: no I/O here; handlers may await only engine-provided waits (commit tokens, notifier).
Rule 4: every answered request's latency is observed in `ctx.metrics.http_latency` by route
label (bounded: the routes of the table plus "other"), SSE streams excepted.
Rule 5 (busy script, as RESP's BUSY): while a Lua script runs past busy-reply-threshold
(`ctx.busy`, topicsrv/scripting/runner.py Rule 2), every request but health and metrics is
answered 503 `busy` with `Retry-After: 1`, after the guards (a bad token is still 401), reads
included (the script's writes are not all made yet); a stream is refused before it starts.
Before the threshold the loop thread runs the script and the request simply waits, as a
Redis client does.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from time import perf_counter
from typing import TYPE_CHECKING

from topicsrv.errors import TopicsError, invalid
from topicsrv.http import (
    channels,
    claims,
    guards,
    handlers,
    openapi,
    ops,
    routers,
    sse,
    status,
    work,
)
from topicsrv.http.handlers import Call
from topicsrv.http.protocol import Request, Response, error_response
from topicsrv.http.router import resolve, route_labels
from topicsrv.latency import OTHER
from topicsrv.memory import oom_error

if TYPE_CHECKING:
    from topicsrv.context import ServerContext

log = logging.getLogger("topicsrv.http")

Handler = Callable[[Call], Awaitable[Response]]

HANDLERS: dict[str, Handler] = {
    "status_page": status.page,
    "status": status.status,
    "health": ops.health,
    "ready": ops.ready,
    "metrics": ops.metrics,
    "openapi": openapi.openapi,
    "list_topics": handlers.list_topics,
    "get_topic": handlers.get_topic,
    "put_topic": handlers.put_topic,
    "delete_topic": handlers.delete_topic,
    "write": handlers.write,
    "diff": handlers.diff,
    "delete_records": handlers.delete_records,
    "claim": claims.claim,
    "ack": claims.ack,
    "nack": claims.nack,
    "extend": claims.extend,
    "put_router": routers.put_router,
    "get_router": routers.get_router,
    "list_routers": routers.list_routers,
    "delete_router": routers.delete_router,
    "publish": channels.publish,
}

ROUTE_LABELS = route_labels()
BUSY_EXEMPT = frozenset({"health", "metrics"})  # Rule 5
STREAMS = frozenset({"watch_topic", "watch_many", "work", "status_stream", "subscribe_channel",
                     "subscribe_patterns"})

# handlers refused with 507 `insufficient_memory` over --max-memory (topicsrv/memory.py)
ADDS_DATA = frozenset({"write", "put_topic"})


async def dispatch(ctx: ServerContext, req: Request) -> Response | sse.StreamPlan:
    """Rule 4: the time to a Response is observed by route (`ROUTE_LABELS`, "other" before a
    route matched); a stream is not (its life is the client's choice)."""
    t0 = perf_counter()
    label: str | None = OTHER
    try:
        guards.check_host(ctx.config, req)
        guards.check_origin(req, "http" if ctx.tls is None else "https")
        role = guards.check_auth(ctx.config, req)
        match = resolve(req.method, req.path)
        label = ROUTE_LABELS[match.handler]
        guards.check_role(role, match.handler, req)
        guards.check_replica(ctx.repl.master, match.handler, req)
        if req.repeated is not None:
            raise invalid(f"query parameter '{req.repeated}' is given more than once",
                          field=req.repeated)
        guards.check_content_type(req, raw_ok=match.handler == "publish")
        busy = ctx.busy
        if busy is not None and match.handler not in BUSY_EXEMPT:
            raise TopicsError("busy", busy.removeprefix("BUSY "), {"retry_after_s": 1})
        if match.handler in STREAMS:
            plan = _plan(ctx, match.handler, match.params, req)
            label = None
            return plan
        if match.handler in ADDS_DATA and not (
                match.handler == "put_topic" and match.params["topic"] in ctx.engine.topics):
            ctx.memory.check(len(req.body))  # an update (e.g. a smaller cap) may free memory
        return await HANDLERS[match.handler](Call(ctx, req, match.params, t0))
    except TopicsError as err:
        headers = []
        if err.code == "method_not_allowed" and err.detail:
            headers.append((b"allow", ", ".join(err.detail["allow"]).encode()))
        if err.code == "unauthorized":
            headers.append((b"www-authenticate", b'Bearer realm="topicsrv"'))
        if err.code == "busy":
            headers.append((b"retry-after", b"1"))
        return error_response(err, headers)
    except MemoryError:
        log.error("out of memory serving %s %s", req.method, req.path)
        return error_response(oom_error())
    except Exception:
        log.exception("internal error serving %s %s", req.method, req.path)
        return error_response(TopicsError("internal", "internal server error (logged)"))
    finally:
        if label is not None:
            ctx.metrics.http_latency.observe(label, perf_counter() - t0)


def _plan(ctx: ServerContext, handler: str, params: dict[str, str],
          req: Request) -> sse.StreamPlan:
    if handler == "watch_topic":
        return sse.plan_single(ctx, params["topic"], req)
    if handler == "watch_many":
        return sse.plan_many(ctx, req)
    if handler == "status_stream":
        return status.plan_stream(ctx, req)
    if handler == "subscribe_channel":
        return channels.plan_channel(ctx, params["channel"])
    if handler == "subscribe_patterns":
        return channels.plan_patterns(ctx, req)
    return work.plan_work(ctx, req)
