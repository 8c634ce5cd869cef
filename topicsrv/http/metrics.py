"""Prometheus exposition of what the engine and the HTTP front count.

Rule 1: rendering reads counters only; it never mutates engine state (no expiry, no touch).
Rule 2: the HTTP front keeps its counters in `ctx.metrics.http` (`HttpStats`), plain ints
and dicts updated synchronously, so counting never awaits.
Rule 3: other layers add their own families by appending a callable that returns exposition
lines to `ctx.metrics.exporters`.
Rule 4: the fsync histogram observes every commit wait of an HTTP mutation (the time the
request waited for its durability class), in seconds, cumulative buckets as Prometheus wants.
Rule 5: queue topics add per-queue families with fixed label sets: jobs by state (gauges from
`queues.stats`) and lifecycle events (counters from `queues.counters`), so cardinality grows
with the number of queues only.
Rule 6: every router adds gauges (`lag`, `cursor`, `blocked` 0/1) and counters (`forwarded`,
`skipped`, `source_trimmed`, `retries`, counted since the router was created), labelled by
router name only (source and dest are in its state), read from the same `routers.state` the
HTTP GET answers.
Rule 7: the delivery scheduler's per-band latency histogram (topicsrv/notify.py Rule 7),
three fixed label values.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable
from typing import TYPE_CHECKING

from topicsrv.context import FSYNC_BUCKETS_S
from topicsrv.engine import queues, routers
from topicsrv.notify import BANDS, LATENCY_BUCKETS_S

if TYPE_CHECKING:
    from topicsrv.context import HttpStats, ServerContext

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

QUEUE_STATES = ("ready", "in_flight", "delayed")  # queues.stats keys of topicsrv_queue_jobs
QUEUE_EVENTS = ("claimed", "acked", "nacked", "expired", "extended", "dead_lettered",
                "dead_letter_errors")  # queues.counters keys of topicsrv_queue_events_total


def observe_fsync(ctx: ServerContext, fsync_ms: float) -> None:
    hist = http_stats(ctx)
    seconds = fsync_ms / 1000.0
    hist.fsync_counts[bisect_left(FSYNC_BUCKETS_S, seconds)] += 1
    hist.fsync_sum += seconds


def _fsync_family(ctx: ServerContext) -> list[str]:
    hist = http_stats(ctx)
    name = "topicsrv_fsync_wait_seconds"
    samples = []
    running = 0
    for bound, n in zip((*FSYNC_BUCKETS_S, float("inf")), hist.fsync_counts, strict=True):
        running += n
        le = "+Inf" if bound == float("inf") else repr(bound)
        samples.append(f'{name}_bucket{{le="{le}"}} {running}')
    samples += [f"{name}_sum {hist.fsync_sum:.6f}", f"{name}_count {running}"]
    return _family(name, "histogram",
                   "Time HTTP writes, deletes and topic changes waited for their commit "
                   "(fsync for the fsync class).", samples)


def _delivery_family(ctx: ServerContext) -> list[str]:
    """Rule 7: the scheduler's wait from ready (records arrived) to admitted, by P_eff band."""
    n = ctx.notifier
    name = "topicsrv_delivery_latency_seconds"
    samples = []
    for band, counts, total in zip(BANDS, n.latency, n.latency_sum, strict=True):
        running = 0
        for bound, k in zip((*LATENCY_BUCKETS_S, float("inf")), counts, strict=True):
            running += k
            le = "+Inf" if bound == float("inf") else repr(bound)
            samples.append(f'{name}_bucket{{band="{band}",le="{le}"}} {running}')
        samples += [f'{name}_sum{{band="{band}"}} {total:.6f}',
                    f'{name}_count{{band="{band}"}} {running}']
    return _family(name, "histogram",
                   "Time from a waiter's records arriving to the scheduler serving it, by the "
                   "band of its topic's effective priority (lt0: <0, 0to499, ge500).", samples)


def _queue_families(ctx: ServerContext) -> list[str]:
    engine = ctx.engine
    now = engine.now()
    jobs: list[str] = []
    age: list[str] = []
    events: list[str] = []
    for t in engine.topics.values():
        if t.type != "queue":
            continue
        label = _label(t.name)
        st = queues.stats(t, now)
        jobs += [f'topicsrv_queue_jobs{{topic="{label}",state="{s}"}} {st[s]}' for s in QUEUE_STATES]
        age.append(f'topicsrv_queue_oldest_ready_age_seconds{{topic="{label}"}} '
                   f"{st['oldest_ready_age_ms'] / 1000:.3f}")
        counts = queues.counters(t)
        events += [f'topicsrv_queue_events_total{{topic="{label}",event="{e}"}} {counts.get(e, 0)}'
                   for e in QUEUE_EVENTS]
    return [
        *_family("topicsrv_queue_jobs", "gauge",
                 "Jobs of a queue by state: ready (claimable now), in_flight (leased, deadline "
                 "not passed), delayed (nacked with a delay not over yet).", jobs),
        *_family("topicsrv_queue_oldest_ready_age_seconds", "gauge",
                 "Age of the oldest claimable job of a queue (0 when none).", age),
        *_family("topicsrv_queue_events_total", "counter",
                 "Lease lifecycle events of a queue since it was created: claimed, acked, "
                 "nacked, expired (reclaimed after the deadline), extended, dead_lettered, "
                 "dead_letter_errors (a dead-letter copy refused).", events),
    ]


ROUTER_GAUGES: tuple[tuple[str, str, str], ...] = (
    ("lag", "topicsrv_router_lag", "Source records not yet handled: source head_seq - cursor."),
    ("cursor", "topicsrv_router_cursor", "The last source seq the router handled."),
)
ROUTER_COUNTERS: tuple[tuple[str, str, str], ...] = (
    ("forwarded", "topicsrv_router_forwarded_total", "Records copied into the dest."),
    ("skipped", "topicsrv_router_skipped_total",
     "Source records not copied: filtered out or at the hop cap."),
    ("source_trimmed", "topicsrv_router_source_trimmed_total",
     "Source seqs evicted before they were forwarded (a source_trim gap in the dest)."),
    ("retries", "topicsrv_router_retries_total",
     "Forward attempts refused by the dest (discard reject, full) and retried."),
)


def _router_families(ctx: ServerContext) -> list[str]:
    engine = ctx.engine
    states = [routers.state(engine, r) for _, r in sorted(engine.routers.items())]
    lines: list[str] = []
    for key, name, help_text in ROUTER_GAUGES:
        lines += _family(name, "gauge", help_text,
                         [f'{name}{{router="{_label(s["name"])}"}} {int(s[key])}' for s in states])
    lines += _family("topicsrv_router_blocked", "gauge",
                     "1 while the router cannot forward (dest full with discard reject), else 0.",
                     [f'topicsrv_router_blocked{{router="{_label(s["name"])}"}} '
                      f'{int(s["status"] == "blocked")}' for s in states])
    for key, name, help_text in ROUTER_COUNTERS:
        lines += _family(name, "counter", help_text,
                         [f'{name}{{router="{_label(s["name"])}"}} {int(s[key])}' for s in states])
    return lines


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _family(name: str, kind: str, help_text: str, samples: Iterable[str]) -> list[str]:
    return [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}", *samples]


def http_stats(ctx: ServerContext) -> HttpStats:
    """The HTTP front's counters (a typed slot of the context's metrics registry)."""
    return ctx.metrics.http


def render(ctx: ServerContext) -> str:
    engine = ctx.engine
    lines: list[str] = []
    for key, name, help_text in ENGINE_COUNTERS:
        lines += _family(name, "counter", help_text,
                         [f"{name} {int(engine.stats.get(key, 0))}"])
    lines += _family("topicsrv_topics", "gauge", "Topics that exist.",
                     [f"topicsrv_topics {len(engine.topics)}"])
    for attr, name, help_text in TOPIC_GAUGES:
        samples = [f'{name}{{topic="{_label(t.name)}"}} {int(getattr(t, attr))}'
                   for t in engine.topics.values()]
        lines += _family(name, "gauge", help_text, samples)
    stats = http_stats(ctx)
    lag = []
    for topic, cursors in stats.watch_cursors.items():
        t = engine.find(topic)
        if t is not None and cursors:
            lag.append(f'topicsrv_topic_watch_lag{{topic="{_label(topic)}"}} '
                       f"{max(0, t.head_seq - min(cursors.values()))}")
    lines += _family("topicsrv_topic_watch_lag", "gauge",
                     "head_seq minus the slowest connected SSE watcher's cursor.", lag)
    requests = [f'topicsrv_http_requests_total{{code="{code}"}} {n}'
                for code, n in sorted(stats.requests.items())]
    lines += _family("topicsrv_http_requests_total", "counter",
                     "HTTP requests answered, by status code.", requests)
    lines += _family("topicsrv_http_connections", "gauge", "Open HTTP connections.",
                     [f"topicsrv_http_connections {stats.connections}"])
    lines += _family("topicsrv_sse_streams", "gauge", "Open SSE streams (watch and work).",
                     [f"topicsrv_sse_streams {stats.sse_streams}"])
    lines += _family("topicsrv_sse_frames_total", "counter",
                     "SSE frames sent (watch records and tombstones, work jobs).",
                     [f"topicsrv_sse_frames_total {stats.sse_frames}"])
    lines += _fsync_family(ctx)
    lines += _delivery_family(ctx)
    lines += _queue_families(ctx)
    lines += _router_families(ctx)
    for exporter in ctx.metrics.exporters:
        lines += list(exporter())
    return "\n".join(lines) + "\n"
