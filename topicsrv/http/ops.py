"""Operations routes (API.md section 8): liveness, readiness and Prometheus metrics.

Rule 1: /v0/health answers 200 whenever the process serves HTTP; /v0/ready answers 503
`not_ready` until recovery finished (`ctx.ready`) and 503 `shutting_down` once a shutdown began.
Rule 2: /metrics renders what the engine and the fronts already count (`engine.stats`,
`ctx.metrics`); rendering never mutates engine state (no expiry, no touch).
Rule 3: other layers add their own families by putting a callable returning exposition lines
into `ctx.metrics["prometheus"]` (a list), e.g. storage's fsync latency histogram.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from topicsrv import __version__
from topicsrv.errors import TopicsError
from topicsrv.http.handlers import Call, json_response
from topicsrv.http.protocol import Response

if TYPE_CHECKING:
    from topicsrv.server import ServerContext

PROM_TYPE = b"text/plain; version=0.0.4; charset=utf-8"

# engine.stats key -> (metric name, help)
ENGINE_COUNTERS: tuple[tuple[str, str, str], ...] = (
    ("writes", "topicsrv_writes_total", "Write requests appended (HTTP and RESP)."),
    ("records_written", "topicsrv_records_written_total", "Records appended."),
    ("bytes_written", "topicsrv_bytes_written_total", "Record data+meta bytes appended."),
    ("reads", "topicsrv_reads_total", "Diff/SSE/XREAD reads served by the engine."),
    ("records_read", "topicsrv_records_read_total", "Records delivered by reads."),
    ("deletes", "topicsrv_deletes_total", "Permanent delete requests."),
    ("records_deleted", "topicsrv_records_deleted_total", "Records permanently deleted."),
)

TOPIC_GAUGES: tuple[tuple[str, str, str], ...] = (
    ("head_seq", "topicsrv_topic_head_seq", "Highest assigned seq of the topic."),
    ("earliest_seq", "topicsrv_topic_earliest_seq", "First live seq of the topic."),
    ("count", "topicsrv_topic_records", "Live records in the topic."),
    ("bytes", "topicsrv_topic_bytes", "Live record bytes in the topic."),
)


async def health(call: Call) -> Response:
    return json_response(call, {"status": "ok", "version": __version__,
                                "uptime_s": round(time.time() - call.ctx.started_at, 3)})


async def ready(call: Call) -> Response:
    ctx = call.ctx
    if ctx.shutting_down:
        raise TopicsError("shutting_down", "the server is shutting down")
    if not ctx.ready:
        raise TopicsError("not_ready", "the server is still recovering; retry shortly")
    return json_response(call, {"ready": True})


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _family(name: str, kind: str, help_text: str, samples: Iterable[str]) -> list[str]:
    return [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}", *samples]


def http_stats(ctx: ServerContext) -> dict[str, Any]:
    """The HTTP front's counters, kept in ctx.metrics["http"]."""
    stats: dict[str, Any] = ctx.metrics.setdefault(
        "http", {"requests": {}, "connections": 0, "sse_streams": 0, "sse_frames": 0,
                 "watch_cursors": {}})
    return stats


def render(ctx: ServerContext) -> str:
    engine = ctx.engine
    lines: list[str] = []
    for key, name, help_text in ENGINE_COUNTERS:
        lines += _family(name, "counter", help_text, [f"{name} {int(engine.stats.get(key, 0))}"])
    lines += _family("topicsrv_topics", "gauge", "Topics that exist.",
                     [f"topicsrv_topics {len(engine.topics)}"])
    for attr, name, help_text in TOPIC_GAUGES:
        samples = [f'{name}{{topic="{_label(t.name)}"}} {int(getattr(t, attr))}'
                   for t in engine.topics.values()]
        lines += _family(name, "gauge", help_text, samples)
    stats = http_stats(ctx)
    lag = []
    for topic, cursors in stats["watch_cursors"].items():
        t = engine.find(topic)
        if t is not None and cursors:
            lag.append(f'topicsrv_topic_watch_lag{{topic="{_label(topic)}"}} '
                       f"{max(0, t.head_seq - min(cursors.values()))}")
    lines += _family("topicsrv_topic_watch_lag", "gauge",
                     "head_seq minus the slowest connected SSE watcher's cursor.", lag)
    requests = [f'topicsrv_http_requests_total{{code="{code}"}} {n}'
                for code, n in sorted(stats["requests"].items())]
    lines += _family("topicsrv_http_requests_total", "counter",
                     "HTTP requests answered, by status code.", requests)
    lines += _family("topicsrv_http_connections", "gauge", "Open HTTP connections.",
                     [f"topicsrv_http_connections {stats['connections']}"])
    lines += _family("topicsrv_sse_streams", "gauge", "Open SSE watch streams.",
                     [f"topicsrv_sse_streams {stats['sse_streams']}"])
    lines += _family("topicsrv_sse_frames_total", "counter", "SSE record/tombstone frames sent.",
                     [f"topicsrv_sse_frames_total {stats['sse_frames']}"])
    for extra in ctx.metrics.get("prometheus", []):
        render_extra: Callable[[], Iterable[str]] = extra
        lines += list(render_extra())
    return "\n".join(lines) + "\n"


async def metrics(call: Call) -> Response:
    return Response(200, render(call.ctx).encode(), content_type=PROM_TYPE)
