"""The live status page: `GET /` (one static HTML file), `GET /v0/status` (a JSON snapshot) and
`GET /v0/status/stream` (the same snapshot as SSE `status` events).

Rule 1: the page is static and carries no data: it is the one route served without the token
(topicsrv/http/guards.py Rule 2), still behind the Host check. Everything it shows comes from
/v0/status/stream, which needs the token like every other route. The page keeps the token in
sessionStorage and sends it as `Authorization: Bearer` on a fetch() whose body it reads as a
stream (EventSource cannot send headers): the token never appears in a URL, and the page's
Content-Security-Policy (`form-action 'none'`, scripts and styles allowed by hash only,
`connect-src 'self'`) keeps a failed script from putting it there or sending it elsewhere.
Rule 2: a snapshot is bounded: the `top` most active topics (topicsrv/activity.py Rule 4;
default TOP_DEFAULT, at most TOP_MAX) with their rings, at most GROUPS_MAX consumer groups per
topic (highest lag first) and TOP_MAX routers (highest lag first); the rest are counted in
`others` / `*_total`, never listed.
Rule 3: reading never mutates (no expiry, no touch): counts are as of the topic's last
operation; a topic whose key TTL passed is not listed (the expiry tick deletes it), and the key
counts (`keys` = strings + topics, `strings`, `expires`) are as of the last expiry tick. A snapshot is built at most once per CACHE_S for each `top`, however many pages
watch; a stream sends one every `interval_ms` (default 1000, from MIN_INTERVAL_MS).
"""

from __future__ import annotations

import base64
import hashlib
import re
import time
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING, Any

import orjson
import trio

from topicsrv import __version__
from topicsrv.engine import groups
from topicsrv.engine.keyspace import colls
from topicsrv.engine.queues import queues
from topicsrv.engine.routing import routers
from topicsrv.http import params as p
from topicsrv.http.handlers import Call
from topicsrv.http.metrics import effective_priority, http_stats
from topicsrv.http.protocol import Request, Response
from topicsrv.http.sse import Pacer, Send, event_frame
from topicsrv.latency import SYNC_BUCKETS_S, Histogram

if TYPE_CHECKING:
    from topicsrv.context import ServerContext
    from topicsrv.engine.log.topic import Topic

TOP_DEFAULT = 25
TOP_MAX = 200
GROUPS_MAX = 10
CACHE_S = 0.25
MIN_INTERVAL_MS = 250
MAX_INTERVAL_MS = 60_000


def _load_page() -> tuple[bytes, bytes]:
    """The HTML and its Content-Security-Policy (the inline script and style by hash)."""
    html = resources.files("topicsrv.http").joinpath("status.html").read_bytes()

    def digest(tag: bytes) -> str:
        m = re.search(rb"<" + tag + rb">(.*?)</" + tag + rb">", html, re.S)
        assert m is not None, f"status.html has no <{tag.decode()}>"
        return "'sha256-" + base64.b64encode(hashlib.sha256(m.group(1)).digest()).decode() + "'"

    csp = (f"default-src 'none'; script-src {digest(b'script')}; style-src {digest(b'style')}; "
           "connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; "
           "frame-ancestors 'none'")
    return html, csp.encode()


PAGE, CSP = _load_page()
PAGE_HEADERS = [(b"content-security-policy", CSP), (b"x-content-type-options", b"nosniff"),
                (b"x-frame-options", b"DENY"), (b"referrer-policy", b"no-referrer"),
                (b"cache-control", b"no-store")]


async def page(call: Call) -> Response:
    return Response(200, PAGE, content_type=b"text/html; charset=utf-8", headers=PAGE_HEADERS)


async def status(call: Call) -> Response:
    body = snapshot_bytes(call.ctx, _top(call.req))
    return Response(200, body, headers=[(b"cache-control", b"no-store")])


def _top(req: Request) -> int:
    return p.query_int(req.query, "top", 1, TOP_MAX) or TOP_DEFAULT


@dataclass(slots=True)
class StatusPlan:
    top: int
    interval_s: float

    async def run(self, ctx: ServerContext, send: Send) -> None:
        with Pacer(ctx, send) as pacer:
            while True:
                await pacer.frames([event_frame(b"status", snapshot_bytes(ctx, self.top))])
                await trio.sleep(self.interval_s)


def plan_stream(ctx: ServerContext, req: Request) -> StatusPlan:
    interval = p.query_int(req.query, "interval_ms", MIN_INTERVAL_MS, MAX_INTERVAL_MS) or 1000
    return StatusPlan(_top(req), interval / 1000.0)


# ---- the snapshot (pure reads) ----------------------------------------------------------------


def snapshot_bytes(ctx: ServerContext, top: int) -> bytes:
    """Rule 3: one JSON line, rebuilt at most every CACHE_S per `top`."""
    cache = ctx.metrics.status_cache
    now = time.monotonic()
    hit = cache.get(top)
    if hit is not None and now - hit[0] < CACHE_S:
        return hit[1]
    if len(cache) > 8:
        cache.clear()
    body = orjson.dumps(snapshot(ctx, top))
    cache[top] = (now, body)
    return body


def snapshot(ctx: ServerContext, top: int) -> dict[str, Any]:
    engine = ctx.engine
    ks = engine.keyspace
    activity = ctx.metrics.activity
    best, others = activity.top(engine, top)
    now = engine.now()
    deadlines = ks.expiry.deadlines
    if deadlines:  # Rule 3: a topic whose key TTL passed is left out, not expired here
        best = [t for t in best if deadlines.get(t.name, now + 1) > now]
    server_rates = activity.server_rates()
    stats = http_stats(ctx)
    front: Any = ctx.metrics.resp
    return {
        "version": __version__,
        "generated_ms": now,
        "server": {
            "uptime_s": round(time.time() - ctx.started_at, 1),
            "ready": ctx.ready,
            "shutting_down": ctx.shutting_down,
            "topics": len(engine.topics),
            "keys": len(engine.topics) + len(ks.strings) + len(ks.colls),  # DBSIZE
            "strings": len(ks.strings),
            "lists": colls.counts(ks)["list"],
            "expires": len(ks.expiry),
            "routers": len(engine.routers),
            "http_connections": stats.connections,
            "sse_streams": stats.sse_streams,
            "resp_clients": len(front.clients) if front is not None else 0,
            "pubsub": _pubsub(ctx),
            "write_rate": round(server_rates.write_rate, 2),
            "read_rate": round(server_rates.read_rate, 2),
            "writes": server_rates.writes,
            "reads": server_rates.reads,
            "slot_s": activity.slot_s,
        },
        "storage": _storage(ctx),
        "topics": [_topic(ctx, t, now) for t in best],
        "others": {"topics": others.topics, "count": others.count, "bytes": others.bytes,
                   "write_rate": round(others.write_rate, 2),
                   "read_rate": round(others.read_rate, 2)},
        **_routers(ctx),
    }


def _pubsub(ctx: ServerContext) -> dict[str, int]:
    bus = ctx.bus
    st = bus.stats
    return {"channels": len(bus.channels) + len(bus.shard_channels),
            "patterns": len(bus.patterns), "published": st.published,
            "delivered": st.delivered, "dropped": st.dropped,
            "slow_disconnects": st.slow_disconnects}


def _topic(ctx: ServerContext, t: Topic, now: int) -> dict[str, Any]:
    rates = ctx.metrics.activity.rates(t)
    watchers = http_stats(ctx).watch_cursors.get(t.name) or {}
    out: dict[str, Any] = {
        "name": t.name, "type": t.type, "durability": t.config.durability,
        "head_seq": t.head_seq, "earliest_seq": t.earliest_seq, "count": t.count,
        "bytes": t.bytes, "effective_priority": effective_priority(ctx, t),
        "write_rate": round(rates.write_rate, 2), "read_rate": round(rates.read_rate, 2),
        "writes": rates.writes, "reads": rates.reads,
        "watchers": len(watchers),
        "watch_lag": max(0, t.head_seq - min(watchers.values())) if watchers else None,
        "groups": [], "groups_total": 0, "queue": None,
    }
    gs = groups.groups_of(t)
    if gs is not None and len(gs):
        listed: list[dict[str, Any]] = [
            {"name": g.name, "lag": groups.lag(t, g), "pending": len(g.pel),
             "consumers": len(g.consumers)} for g in gs]
        listed.sort(key=lambda g: (-(g["lag"] or 0), g["name"]))
        out["groups"], out["groups_total"] = listed[:GROUPS_MAX], len(listed)
    if t.type == "queue":
        st = queues.stats(t, now)
        out["queue"] = {k: st[k] for k in ("ready", "in_flight", "delayed", "dead_lettered",
                                           "oldest_ready_age_ms")}
    return out


def _routers(ctx: ServerContext) -> dict[str, Any]:
    engine = ctx.engine
    states = [routers.state(engine, r) for _, r in sorted(engine.routers.items())]
    states.sort(key=lambda s: -int(s["lag"]))
    keep = ("name", "source", "dest", "lag", "status", "forwarded", "last_error")
    return {"routers": [{k: s.get(k) for k in keep} for s in states[:TOP_MAX]],
            "routers_total": len(states)}


def _storage(ctx: ServerContext) -> dict[str, Any] | None:
    storage = ctx.storage
    if storage is None or not storage.opened:
        return None if storage is None else {"opened": False}
    merged = Histogram(SYNC_BUCKETS_S)
    for sh in storage.shards:
        merged.counts = [a + b for a, b in zip(merged.counts, sh.sync_latency.counts, strict=True)]
        merged.total += sh.sync_latency.total
    st = storage.stats()
    rec = storage.recovered

    def ms(q: float) -> float | None:
        v = merged.quantile(q)
        return None if v is None else (None if v == float("inf") else v * 1000.0)

    return {
        "opened": True, "wal_shards": st["wal_shards"], "writable": st["writable"],
        "wal_syncs": st["wal_syncs"], "records_per_sync": round(st["records_per_sync"], 2),
        "sync_ms_avg": round(st["sync_ms_avg"], 3), "sync_ms_p50": ms(0.5),
        "sync_ms_p99": ms(0.99), "checkpoints": st["checkpoints"],
        "recovery_s": round(rec.seconds, 3) if rec is not None else None,
        "recovered_records": rec.records if rec is not None else None,
    }
