"""The trio adapter: the only HTTP code that touches sockets.

Rule 1: one task per connection runs read -> dispatch -> write, one request at a time, so
pipelined requests are answered in order and a connection never buffers more than one
request body (<= max_body_bytes) plus one response.
Rule 2: a peer that disconnects (mid-body, mid-response, mid-stream) only ends its own task;
errors never escape to the listener, so other connections are untouched. Any other exception
out of a connection is logged with its traceback and, when no byte of the answer was written
yet, answered with a hand-framed 500 `internal` (without the traceback) before closing.
Rule 3: a connection silent for IDLE_S (between requests or mid-request) is closed, so stalled
clients cannot pin connections forever.
Rule 4: an SSE stream (watch or job stream) runs beside a reader task that notices the peer
closing and cancels the stream at once, instead of at the next heartbeat; so does a request
that may long-poll (diff, claim).
Rule 5: a response is written piece by piece as `ServerProtocol.respond_pieces` yields it; each
`send_all` is a checkpoint, so a large body never holds the loop and is never copied whole.
Rule 6: with TLS (topicsrv/tls.py) every connection is an HTTPS one: its handshake runs in
the connection's task, counted as a connection, bounded by tls.HANDSHAKE_TIMEOUT_S; a failed
handshake just ends the task. Everything after it is the same code over the TLS stream.
Rule 7: a request that waited through the delivery scheduler (a long poll) ends its turn when
its response is written: the connection's `notify.Delivery` is told after each response, and
when the connection ends (topicsrv/notify.py Rule 8).
"""

from __future__ import annotations

import logging
from functools import partial
from http import HTTPStatus
from typing import TYPE_CHECKING

import orjson
import trio

from topicsrv import notify, tls
from topicsrv.admission import open_listeners
from topicsrv.errors import TopicsError
from topicsrv.http import sse
from topicsrv.http.app import dispatch
from topicsrv.http.metrics import http_stats
from topicsrv.http.protocol import (
    CLOSED,
    NEED_DATA,
    YIELD,
    Refusal,
    Request,
    Response,
    ServerProtocol,
)

if TYPE_CHECKING:
    from topicsrv.context import ServerContext

log = logging.getLogger("topicsrv.http")

RECEIVE_BYTES = 256 * 1024
LINGER_S = 1.0
PIPELINE_BYTES = 1 << 20  # read-ahead while a long-poll is pending
IDLE_S = 120.0  # a connection that sends nothing for this long (idle or mid-request) is closed
SSE_HEADERS = [(b"content-type", b"text/event-stream; charset=utf-8"),
               (b"cache-control", b"no-cache"), (b"x-accel-buffering", b"no")]
_GONE = (trio.BrokenResourceError, trio.ClosedResourceError)
LONG_POLLS = ("/diff", "/claim")  # POST routes that may wait (`wait_ms`)


async def serve_http(
    ctx: ServerContext, *, task_status: trio.TaskStatus[tuple[str, int]] = trio.TASK_STATUS_IGNORED
) -> None:
    listeners = await open_listeners(ctx.config.http_port or 0, ctx.config.bind,
                                     "--http-port")
    host, port = listeners[0].socket.getsockname()[:2]
    ctx.admission.register(lambda: http_stats(ctx).connections)
    activity = ctx.metrics.activity  # the status page's and /metrics' rates (activity.py)
    activity.slot_s = ctx.config.status_slot_s
    secure = None if ctx.tls is None else partial(tls.accept, context=ctx.tls)
    async with trio.open_nursery() as nursery:
        await nursery.start(partial(activity.run, ctx.engine, lambda: ctx.ready))
        nursery.start_soon(partial(
            ctx.admission.serve, listeners, partial(handle_connection, ctx),
            name="HTTPS" if secure else "HTTP", has_credential=lambda: bool(ctx.config.token),
            refuse=refusal, secure=secure))
        task_status.started((host, port))


def refusal(reason: str) -> bytes:
    """The whole response a refused connection gets before the close (topicsrv/admission.py):
    403 `denied` (protected mode) or 503 `too_many_clients`."""
    if reason == "denied":
        err = TopicsError("denied", "protected mode: this server has no --token, so it serves "
                          "loopback clients only; restart it with --token TOKEN (or "
                          "--protected-mode no on a trusted network)")
    else:
        err = TopicsError("too_many_clients", "max number of clients reached; retry later")
    body = orjson.dumps(err.to_json())
    head = (f"HTTP/1.1 {err.status} {HTTPStatus(err.status).phrase}\r\n"
            f"content-type: application/json\r\ncontent-length: {len(body)}\r\n"
            "connection: close\r\n\r\n")
    return head.encode() + body


async def handle_connection(ctx: ServerContext, stream: trio.SocketStream) -> None:
    stats = http_stats(ctx)
    stats.connections += 1  # from the accept on, the TLS handshake included (admission Rule 5)
    proto = ServerProtocol(ctx.config.max_body_bytes, local_host=_local_host(stream))
    conn: trio.abc.Stream = stream
    delivery = notify.delivery()  # Rule 7: a long poll's turn ends once its reply is written
    try:
        if ctx.tls is not None:
            secured = await tls.accept(stream, ctx.tls)
            if secured is None:
                return  # the handshake failed or timed out (topicsrv/tls.py Rule 4)
            conn = secured
        await _serve(ctx, proto, conn, delivery)
    except Exception as exc:  # never let one connection take the listener down
        if not _gone(exc):
            log.exception("HTTP connection failed")
            await _answer_internal(ctx, proto, conn)
    finally:
        delivery.done()
        stats.connections -= 1
        await conn.aclose()  # TLS is https_compatible: no close_notify, the socket closes


def _gone(exc: BaseException) -> bool:
    """The peer went away (possibly reported from inside a nursery, as a group)."""
    if isinstance(exc, BaseExceptionGroup):
        return all(_gone(e) for e in exc.exceptions)
    return isinstance(exc, _GONE)


async def _answer_internal(ctx: ServerContext, proto: ServerProtocol,
                           stream: trio.abc.Stream) -> None:
    data = proto.internal_error()
    if data is None:
        return  # part of an answer is already out: closing is all that is left
    _count(ctx, 500)
    with trio.move_on_after(LINGER_S):
        try:
            await stream.send_all(data)
        except _GONE:
            pass


def _local_host(stream: trio.SocketStream) -> str | None:
    try:
        return str(stream.socket.getsockname()[0])
    except (OSError, AttributeError, IndexError):
        return None


def _count(ctx: ServerContext, status: int) -> None:
    requests = http_stats(ctx).requests
    requests[status] = requests.get(status, 0) + 1


async def _serve(ctx: ServerContext, proto: ServerProtocol, stream: trio.abc.Stream,
                 delivery: notify.Delivery) -> None:
    while True:
        event = proto.next_event()
        pending = proto.data_to_send()  # e.g. "100 Continue"
        if pending:
            await stream.send_all(pending)
        if event is NEED_DATA:
            with trio.move_on_after(IDLE_S):
                proto.receive_data(await stream.receive_some(RECEIVE_BYTES))
                continue
            return  # idle keep-alive or a stalled request: free the connection
        if event is CLOSED:
            return
        if event is YIELD:  # many small events parsed: let other connections run
            await trio.lowlevel.checkpoint()
            continue
        if isinstance(event, Refusal):
            _count(ctx, event.status)
            await stream.send_all(event.data)
            await _linger(stream)
            return
        assert isinstance(event, Request)
        with ctx.drain.request():  # in flight until the reply is sent (lifecycle Rule 1)
            if event.method == "POST" and event.path.endswith(LONG_POLLS):
                result = await _dispatch_watching_peer(ctx, proto, stream, event)
                if result is None:
                    return  # the peer left during a long-poll
            else:
                result = await dispatch(ctx, event)
            if isinstance(result, Response):
                _count(ctx, result.status)
                for piece in proto.respond_pieces(result):
                    await stream.send_all(piece)
                delivery.done()
                if proto.wants_close or ctx.shutting_down:
                    return
                continue
        _count(ctx, 200)
        await _stream(ctx, proto, stream, result)
        return


async def _dispatch_watching_peer(
    ctx: ServerContext, proto: ServerProtocol, stream: trio.abc.Stream, req: Request
) -> Response | sse.StreamPlan | None:
    """Dispatch a request that may long-poll, cancelling it if the peer disconnects. Bytes
    the peer pipelines meanwhile are handed to the protocol (at most PIPELINE_BYTES)."""
    result: Response | sse.StreamPlan | None = None
    async with trio.open_nursery() as nursery:

        async def until_peer_closes() -> None:
            buffered = 0
            try:
                while buffered < PIPELINE_BYTES:
                    data = await stream.receive_some(RECEIVE_BYTES)
                    if not data:
                        break
                    buffered += len(data)
                    proto.receive_data(data)
                else:
                    await trio.sleep_forever()  # enough buffered: stop reading, keep serving
            except _GONE:
                pass
            nursery.cancel_scope.cancel()

        async def serve() -> None:
            nonlocal result
            result = await dispatch(ctx, req)
            nursery.cancel_scope.cancel()

        nursery.start_soon(until_peer_closes)
        nursery.start_soon(serve)
    return result


async def _linger(stream: trio.abc.Stream) -> None:
    """After a refusal, stop writing and drain briefly, so the peer reads our answer instead of
    a connection reset caused by its unread body."""
    try:
        if isinstance(stream, trio.abc.HalfCloseableStream):  # not TLS
            await stream.send_eof()
        with trio.move_on_after(LINGER_S):
            while await stream.receive_some(RECEIVE_BYTES):
                pass
    except _GONE:
        pass


async def _stream(
    ctx: ServerContext, proto: ServerProtocol, stream: trio.abc.Stream, plan: sse.StreamPlan
) -> None:
    await stream.send_all(proto.start_stream(200, SSE_HEADERS))

    async def send(data: bytes) -> None:
        await stream.send_all(proto.stream_data(data))

    async with trio.open_nursery() as nursery:

        async def until_peer_closes() -> None:
            try:
                while await stream.receive_some(RECEIVE_BYTES):
                    pass  # a client sends nothing on an SSE stream; extra bytes are ignored
            except _GONE:
                pass
            nursery.cancel_scope.cancel()

        async def frames() -> None:
            try:
                await plan.run(ctx, send)
            except _GONE:
                pass
            except Exception:
                log.exception("SSE stream failed")
            nursery.cancel_scope.cancel()

        nursery.start_soon(until_peer_closes)
        nursery.start_soon(frames)
