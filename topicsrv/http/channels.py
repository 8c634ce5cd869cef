"""Pub/sub over HTTP (API.md section 10): publish, and SSE subscriptions on the server's one bus.

`POST /v0/channels/{channel}/publish` publishes the request body: with
`Content-Type: application/json` the body must be JSON and its bytes are the message; with
`application/octet-stream` the bytes are the message as they are. It answers
`{"receivers": n}` (n as PUBLISH counts it). `GET /v0/channels/{channel}/subscribe` and
`GET /v0/channels/subscribe?patterns=p1,p2[&channels=c1,c2]` stream one
`event: message` frame per delivery, `data: {"channel", "pattern", "message"}`, where
`message` is the JSON value when the message bytes are JSON and the UTF-8 text otherwise.

Rule 1 (the same bus): RESP and HTTP publish to and subscribe on `ctx.bus`; an HTTP publish
reaches RESP subscribers and the reverse, counted the same.
Rule 2 (bounded, as RESP): an SSE subscriber's queue is bounded by the bus's pubsub limits
(topicsrv/bus/limits.py): the bytes queued plus the batch being sent. Past them the stream
ends (the connection closes), and the bus counts and logs it. Nothing is buffered elsewhere.
Rule 3 (at-most-once): the subscription starts when the 200 head is out; there is no cursor,
no `id:` and no replay (`Last-Event-ID` is ignored).
Rule 4: heartbeats (`: hb`) as the watch streams (sse.Pacer); frames of the deliveries queued
since the last send go out as one send.
Rule 5: channel names are any bytes: a `{channel}` path segment is percent-decoded to bytes
(router.py); in `data` the channel and the pattern are shown as UTF-8 text.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson
import trio

from topicsrv.bus import Message, Subscriber
from topicsrv.engine.glob import PatternTooLong, compile_glob
from topicsrv.errors import TopicsError, invalid
from topicsrv.http.handlers import Call, json_response
from topicsrv.http.protocol import Request, Response
from topicsrv.http.sse import Pacer, Send, event_frame

if TYPE_CHECKING:
    from topicsrv.context import ServerContext

MAX_SUBSCRIPTIONS = 256  # channels + patterns of one SSE stream


def channel_bytes(param: str) -> bytes:
    """A `{channel}` path parameter (percent-decoded to latin-1 text by router.py) as bytes."""
    return param.encode("latin-1")


async def publish(call: Call) -> Response:
    body = call.req.body
    mime = (call.req.headers.get("content-type") or "").split(";", 1)[0].strip().lower()
    if mime == "application/json":
        try:
            orjson.loads(body)
        except orjson.JSONDecodeError as e:
            raise TopicsError("invalid_json", f"the body is not JSON: {e}") from None
    n = call.ctx.bus.publish(channel_bytes(call.params["channel"]), body)
    return json_response(call, {"receivers": n})


def _text(b: bytes) -> str:
    return b.decode("utf-8", "replace")


def message_json(payload: bytes) -> Any:
    """The `message` field: the JSON value the bytes encode, else their text."""
    try:
        return orjson.loads(payload)
    except orjson.JSONDecodeError:
        return _text(payload)


class SseSubscriber(Subscriber):
    """One SSE stream's end of the bus: frames queue in `frames` until the stream sends them."""

    def __init__(self) -> None:
        super().__init__()
        self.frames: deque[bytes] = deque()
        self.queued = 0  # bytes in `frames`
        self.in_flight = 0  # bytes of the batch being sent
        self.ready = trio.Event()
        self.cut_reason: str | None = None

    def encode(self, msg: Message, pattern: bytes | None) -> bytes:
        key = ("sse", pattern)
        data = msg.cache.get(key)
        if data is None:
            doc = {"channel": _text(msg.channel),
                   "pattern": None if pattern is None else _text(pattern),
                   "message": message_json(msg.payload)}
            data = msg.cache[key] = event_frame(b"message", orjson.dumps(doc))
        return data

    def pending(self) -> int:
        return self.queued + self.in_flight

    def enqueue(self, data: bytes) -> None:
        self.frames.append(data)
        self.queued += len(data)
        self.ready.set()

    def cut(self, reason: str) -> None:
        self.cut_reason = reason
        self.frames.clear()
        self.queued = 0
        self.ready.set()

    async def wait(self, limit: float | None = None) -> bool:
        """For sse.Pacer.wait: True when frames are queued (or the stream was cut)."""
        if not self.ready.is_set():
            with trio.move_on_after(limit if limit is not None else float("inf")):
                await self.ready.wait()
        return self.ready.is_set()


@dataclass(slots=True)
class ChannelPlan:
    channels: list[bytes]
    patterns: list[bytes]

    async def run(self, ctx: ServerContext, send: Send) -> None:
        bus = ctx.bus
        sub = SseSubscriber()
        try:
            for ch in self.channels:
                bus.subscribe(sub, ch)
            for pat in self.patterns:
                bus.psubscribe(sub, pat)
            with Pacer(ctx, send) as pacer:
                while sub.cut_reason is None:
                    if not sub.frames:
                        await pacer.wait(sub)  # type: ignore[arg-type]  # a Waiter's shape
                        continue
                    batch = list(sub.frames)
                    sub.frames.clear()
                    sub.in_flight, sub.queued = sub.queued, 0
                    sub.ready = trio.Event()
                    try:
                        await pacer.frames(batch)
                    finally:
                        sub.in_flight = 0
        finally:
            bus.leave_all(sub)
            sub.gone = True


def _names(req: Request, field: str) -> list[bytes]:
    return [x.encode("utf-8", "surrogateescape") for x in req.query.get(field, "").split(",")
            if x]


def plan_channel(ctx: ServerContext, channel: str) -> ChannelPlan:
    return ChannelPlan([channel_bytes(channel)], [])


def plan_patterns(ctx: ServerContext, req: Request) -> ChannelPlan:
    patterns, channels = _names(req, "patterns"), _names(req, "channels")
    if not patterns and not channels:
        raise invalid("query parameter 'patterns' (or 'channels') must name at least one",
                      field="patterns")
    if len(patterns) + len(channels) > MAX_SUBSCRIPTIONS:
        raise invalid(f"at most {MAX_SUBSCRIPTIONS} channels and patterns per stream",
                      field="patterns")
    for pat in patterns:  # a pattern the matcher refuses is a 400, before the 200 head
        try:
            compile_glob(pat)
        except PatternTooLong as e:
            raise invalid(str(e), field="patterns") from None
    return ChannelPlan(list(dict.fromkeys(channels)), list(dict.fromkeys(patterns)))
