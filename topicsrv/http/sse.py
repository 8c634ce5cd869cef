"""SSE watch (API.md section 5): resumable cursors, tombstone frames, heartbeats, backpressure.

Rule 1: every record/tombstone frame carries `id:` = base64url (no padding) of the JSON cursor
map {"topic": seq, ...} AFTER that frame, so `Last-Event-ID` resumes exactly: nothing lost,
nothing repeated. A tombstone frame moves its topic's cursor to the position the engine
continued from (`earliest_seq - 1` of the tombstone, i.e. `gap_to` for cap/ttl loss).
Rule 2: the first read of each topic on a connection is connect-time: a cap/ttl/mixed
tombstone there keeps the reason the diff gives and adds `variant: "from_seq_too_old"` (seeds
tombstones.txt; `Tombstone.at_connect`, whose reasons table says which reasons it applies to).
Rule 3: frames go out in batches; each batch is one awaited send, so a slow reader is paced by
its socket. Nothing is buffered beyond one batch (<= BATCH_LIMIT records, ~BATCH_BYTES) and
nothing is ever dropped.
Rule 4: a notifier event is taken before each round of reads and awaited only when every topic
was caught up; the wait is bounded by the heartbeat interval (`: hb`, no id).
Rule 5: a topic deleted while watched is waited for; when it is recreated the stale cursor
gets a "recreated" tombstone (the watch remembers the instance epoch it was reading).
Rule 6: Rules 3 and 4 are written once, in `Pacer`, which every SSE stream (this watch and the
job stream of topicsrv/http/work.py) sends through; a stream is a `StreamPlan` the connection
runs once the 200 head is out.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Protocol

import orjson
import trio

from topicsrv.engine.config import check_topic_name
from topicsrv.engine.log.tombstone import Tombstone
from topicsrv.errors import TopicsError, invalid
from topicsrv.http import params as p
from topicsrv.http.metrics import http_stats
from topicsrv.http.protocol import Request
from topicsrv.notify import Waiter

if TYPE_CHECKING:
    from topicsrv.context import ServerContext

BATCH_LIMIT = 1000
BATCH_BYTES = 1 << 20
MAX_WATCH_TOPICS = 256
HEARTBEAT = b": hb\n\n"

Send = Callable[[bytes], Awaitable[None]]


class StreamPlan(Protocol):
    """A validated SSE request: `run` streams frames until cancelled or `send` fails."""

    async def run(self, ctx: ServerContext, send: Send) -> None: ...


@dataclass(slots=True)
class WatchPlan:
    topics: list[str]
    cursors: dict[str, int]
    nodes: list[str] | None

    async def run(self, ctx: ServerContext, send: Send) -> None:
        await run_watch(ctx, self, send)


class Pacer:
    """Rules 3, 4 and 6: a stream's frames go out as one awaited send per batch, and a
    heartbeat when nothing was sent for the heartbeat interval. As a context manager it counts
    the stream in /metrics (`topicsrv_sse_streams`)."""

    def __init__(self, ctx: ServerContext, send: Send) -> None:
        self.stats = http_stats(ctx)
        self._send = send
        self.hb_s = max(0.01, ctx.config.heartbeat_s)
        self.last_sent = trio.current_time()

    def __enter__(self) -> Pacer:
        self.stats.sse_streams += 1
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stats.sse_streams -= 1

    async def frames(self, out: list[bytes]) -> None:
        self.stats.sse_frames += len(out)
        await self._send(b"".join(out))
        self.last_sent = trio.current_time()

    async def wait(self, waiter: Waiter, timeout_s: float | None = None) -> bool:
        """Wait for the waiter's topics to change, at most `timeout_s` and never past the next
        heartbeat, which is sent when it is due. True if woken (and admitted by the scheduler)."""
        until_beat = self.last_sent + self.hb_s - trio.current_time()
        limit = until_beat if timeout_s is None else min(until_beat, timeout_s)
        if limit > 0 and await waiter.wait(limit):
            return True
        if self.last_sent + self.hb_s <= trio.current_time():
            await self._send(HEARTBEAT)
            self.last_sent = trio.current_time()
        return False


# ---- cursors and frames (pure) ---------------------------------------------------------


def encode_id(cursors: dict[str, int]) -> bytes:
    return base64.urlsafe_b64encode(orjson.dumps(cursors)).rstrip(b"=")


def decode_id(text: str) -> dict[str, int]:
    """A Last-Event-ID back into its cursor map; 400 if it is not one of ours."""
    try:
        raw = base64.urlsafe_b64decode(text.strip() + "=" * (-len(text.strip()) % 4))
        value = orjson.loads(raw)
    except (binascii.Error, ValueError):
        raise invalid("Last-Event-ID is not a cursor issued by this server",
                      field="Last-Event-ID") from None
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) and v >= 0
        for k, v in value.items()
    ):
        raise invalid("Last-Event-ID must encode a map of topic to seq", field="Last-Event-ID")
    return value


def frame(event: bytes, data: bytes, cursors: dict[str, int]) -> bytes:
    return b"id: %b\n%b" % (encode_id(cursors), event_frame(event, data))


def event_frame(event: bytes, data: bytes) -> bytes:
    """A frame without `id:` (`data` is one line of JSON)."""
    return b"event: %b\ndata: %b\n\n" % (event, data)


def record_data(topic_json: bytes, blob: bytes) -> bytes:
    """The stored record JSON with "topic" first; the record bytes are not re-encoded."""
    return b'{"topic":' + topic_json + b"," + blob[1:]


def tombstone_data(topic: str, tomb: Tombstone) -> bytes:
    return orjson.dumps({"topic": topic, **tomb.to_json()})


# ---- planning a watch (pure, raises 4xx) -----------------------------------------------


def _last_event_id(req: Request) -> dict[str, int] | None:
    text = req.headers.get("last-event-id")
    return decode_id(text) if text else None


def plan_single(ctx: ServerContext, topic: str, req: Request) -> WatchPlan:
    return _plan(ctx, [topic], {topic: p.query_int(req.query, "from_seq")}, req)


def plan_many(ctx: ServerContext, req: Request) -> WatchPlan:
    names = [t for t in req.query.get("topics", "").split(",") if t]
    if not names:
        raise invalid("query parameter 'topics' must name at least one topic", field="topics")
    if len(names) > MAX_WATCH_TOPICS:
        raise invalid(f"at most {MAX_WATCH_TOPICS} topics per watch", field="topics")
    names = list(dict.fromkeys(names))
    starts: dict[str, int | None] = {}
    for part in (x for x in req.query.get("from", "").split(",") if x):
        name, sep, seq = part.rpartition(":")
        start = p.digits(seq)
        if not sep or start is None:
            raise invalid("'from' must look like topic:seq,topic:seq", field="from")
        starts[name] = start
    unknown = sorted(set(starts) - set(names))
    if unknown:
        raise invalid(f"'from' names topic '{unknown[0]}' that is not in 'topics'", field="from")
    return _plan(ctx, names, starts, req)


def _plan(ctx: ServerContext, names: list[str], starts: dict[str, int | None],
          req: Request) -> WatchPlan:
    resume = _last_event_id(req) or {}
    cursors: dict[str, int] = {}
    for name in names:
        check_topic_name(name)
        topic = ctx.engine.get(name)  # 404 topic_not_found before the stream starts
        if name in resume:
            cursors[name] = resume[name]
        else:
            start = starts.get(name)
            cursors[name] = topic.head_seq if start is None else start
    return WatchPlan(names, cursors, p.nodes(req.query.get("node")))


# ---- the stream ------------------------------------------------------------------------


async def run_watch(ctx: ServerContext, plan: WatchPlan, send: Send) -> None:
    """Stream frames until cancelled (the client left) or `send` fails."""
    engine = ctx.engine
    stats = http_stats(ctx)
    cursors = dict(plan.cursors)
    epochs: dict[str, int] = {}
    for name in plan.topics:
        topic = engine.topics.get(name)
        if topic is not None:
            epochs[name] = topic.epoch
    names_json = {name: orjson.dumps(name) for name in plan.topics}
    connect_time = set(plan.topics)
    watch_cursors = stats.watch_cursors
    me = object()
    try:
        with Pacer(ctx, send) as pacer, ctx.notifier.waiter(plan.topics) as waiter:
            while True:
                waiter.arm()
                out: list[bytes] = []
                more = False
                for name in plan.topics:
                    try:
                        res = engine.diff(name, cursors[name], BATCH_LIMIT, max_bytes=BATCH_BYTES,
                                          nodes=plan.nodes, epoch=epochs.get(name))
                    except TopicsError as err:
                        if err.code not in ("topic_not_found", "key_type_conflict"):
                            raise
                        continue  # deleted: wait for it to come back (Rule 5)
                    topic = engine.topics.get(name)
                    if topic is not None:
                        epochs[name] = topic.epoch
                    tomb = res.tombstone
                    if tomb is not None:
                        if name in connect_time:
                            tomb = tomb.at_connect()
                        cursors[name] = tomb.resume_after
                        out.append(frame(b"tombstone", tombstone_data(name, tomb), cursors))
                    connect_time.discard(name)
                    tj = names_json[name]
                    for seq, blob in zip(res.seqs, res.records, strict=True):
                        cursors[name] = seq
                        out.append(frame(b"record", record_data(tj, blob), cursors))
                    cursors[name] = res.next_from_seq
                    watch_cursors.setdefault(name, {})[me] = res.next_from_seq
                    more = more or not res.caught_up
                if out:
                    await pacer.frames(out)
                    waiter.delivered()  # the turn ends once its frames are sent (notify Rule 8)
                if more:
                    await trio.lowlevel.checkpoint()
                    continue
                await pacer.wait(waiter)
    finally:
        for name in plan.topics:
            per_topic = watch_cursors.get(name)
            if per_topic is not None:
                per_topic.pop(me, None)
                if not per_topic:
                    del watch_cursors[name]
