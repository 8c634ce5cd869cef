"""Prometheus exposition through prometheus_client: one custom collector reads what the engine,
the fronts and storage already keep, so nothing is counted twice.

Rule 1: rendering reads counters only; it never mutates engine state (no expiry, no touch).
Rule 2: the HTTP front keeps its counters in `ctx.metrics.http` (`HttpStats`), plain ints
and dicts updated synchronously, so counting never awaits.
Rule 3: other layers add their own families by appending a callable that returns
prometheus_client metric families to `ctx.metrics.exporters`.
Rule 4: histograms are observed with topicsrv/latency.py (lock-free, ~0.5 us) and exported here
as prometheus_client histogram families: request latency by RESP command and by HTTP route,
the WAL's writev + fdatasync per batch and shard, the commit wait of HTTP mutations
(`topicsrv_fsync_wait_seconds`), the delivery scheduler's latency by band (notify.py Rule 7).
Rule 5: per-topic series are bounded: only the `ctx.config.top_topics` most active topics
(topicsrv/activity.py Rule 4) have their own series; the rest are summed under the label
`topic="_other"` (a name no topic can have: names start with a letter or a digit) where a sum
means something (records, bytes, rates); `topicsrv_topics` counts them all. Queue families
(jobs by state, lifecycle events) exist for the queues among those topics; router families for
the `top_topics` routers with the highest lag.
Rule 6: the text format is Prometheus 0.0.4, or OpenMetrics when the scraper asks for it
(`Accept`), chosen by prometheus_client.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any, cast

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import Collector, CollectorRegistry

from topicsrv.engine.keyspace import colls
from topicsrv.engine.queues import queues
from topicsrv.engine.routing import routers
from topicsrv.latency import Histogram, Latencies
from topicsrv.notify import BANDS, LATENCY_BUCKETS_S

if TYPE_CHECKING:
    from topicsrv.activity import Others
    from topicsrv.context import HttpStats, ServerContext
    from topicsrv.engine.log.topic import Topic

OTHER = "_other"

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

# topic attribute -> (metric name, help, summed under _other)
TOPIC_GAUGES: tuple[tuple[str, str, str, bool], ...] = (
    ("head_seq", "topicsrv_topic_head_seq", "Highest assigned seq of the topic.", False),
    ("earliest_seq", "topicsrv_topic_earliest_seq", "First live seq of the topic.", False),
    ("count", "topicsrv_topic_records", "Live records in the topic.", True),
    ("bytes", "topicsrv_topic_bytes", "Live record bytes in the topic.", True),
)

QUEUE_STATES = ("ready", "in_flight", "delayed")  # queues.stats keys of topicsrv_queue_jobs
QUEUE_EVENTS = ("claimed", "acked", "nacked", "expired", "extended", "dead_lettered",
                "dead_letter_errors")  # queues.counters keys of topicsrv_queue_events_total

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


def http_stats(ctx: ServerContext) -> HttpStats:
    """The HTTP front's counters (a typed slot of the context's metrics registry)."""
    return ctx.metrics.http


def observe_fsync(ctx: ServerContext, fsync_ms: float) -> None:
    """A mutation's commit wait (Rule 4), in ms as the handlers measure it."""
    http_stats(ctx).fsync_wait.observe(fsync_ms / 1000.0)


# ---- building families ----------------------------------------------------------------------


def histogram(name: str, help_text: str, labels: list[str],
              series: Iterable[tuple[list[str], Histogram]]) -> HistogramMetricFamily:
    fam = HistogramMetricFamily(name, help_text, labels=labels)
    for values, hist in series:
        fam.add_metric(values, hist.cumulative(), hist.total)
    return fam


def latency_family(name: str, help_text: str, label: str,
                   table: Latencies) -> HistogramMetricFamily:
    return histogram(name, help_text, [label], (([key], h) for key, h in table.items()))


def counter(name: str, help_text: str, value: float) -> CounterMetricFamily:
    return CounterMetricFamily(name, help_text, value=value)


def gauge(name: str, help_text: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, help_text, value=value)


class ServerCollector(Collector):
    """Every family of /metrics, computed from `ctx` at scrape time (Rule 1)."""

    def __init__(self, ctx: ServerContext) -> None:
        self.ctx = ctx

    def collect(self) -> Iterator[Metric]:
        ctx = self.ctx
        engine = ctx.engine
        for key, name, help_text in ENGINE_COUNTERS:
            yield counter(name, help_text, int(engine.stats.get(key, 0)))
        yield gauge("topicsrv_topics", "Topics that exist.", len(engine.topics))
        top, others = ctx.metrics.activity.top(engine, max(1, ctx.config.top_topics))
        yield from topic_families(ctx, top, others)
        yield from http_families(ctx)
        yield from resp_families(ctx)
        yield from storage_families(ctx)
        yield from keyspace_families(ctx)
        yield delivery_family(ctx)
        yield from queue_families(ctx, top)
        yield from router_families(ctx)
        yield from pubsub_families(ctx)
        for exporter in ctx.metrics.exporters:
            yield from cast("Iterable[Metric]", exporter())


def topic_families(ctx: ServerContext, top: list[Topic], others: Others) -> Iterator[Metric]:
    """Rule 5: the top topics by name, the rest as `_other`."""
    for attr, name, help_text, summed in TOPIC_GAUGES:
        fam = GaugeMetricFamily(name, help_text + (" The topics without a series of their own "
                                                   "are summed under topic=\"_other\"."
                                                   if summed else ""), labels=["topic"])
        for t in top:
            fam.add_metric([t.name], int(getattr(t, attr)))
        if summed and others.topics:
            fam.add_metric([OTHER], getattr(others, attr))
        yield fam
    activity = ctx.metrics.activity
    for which, name in (("write", "topicsrv_topic_write_rate"), ("read", "topicsrv_topic_read_rate")):
        what = "appended" if which == "write" else "delivered (reads and claims)"
        fam = GaugeMetricFamily(name, f"Records/s {what} over the last sampling slot; the "
                                "topics without a series of their own summed under "
                                "topic=\"_other\".", labels=["topic"])
        attr = f"{which}_rate"
        for t in top:
            fam.add_metric([t.name], getattr(activity.rates(t), attr))
        if others.topics:
            fam.add_metric([OTHER], getattr(others, attr))
        yield fam
    fam = GaugeMetricFamily("topicsrv_topic_effective_priority",
                            "The topic's effective delivery priority P_eff.", labels=["topic"])
    for t in top:
        fam.add_metric([t.name], effective_priority(ctx, t))
    yield fam
    watch = http_stats(ctx).watch_cursors
    fam = GaugeMetricFamily("topicsrv_topic_watch_lag",
                            "head_seq minus the slowest connected SSE watcher's cursor.",
                            labels=["topic"])
    for t in top:
        cursors = watch.get(t.name)
        if cursors:
            fam.add_metric([t.name], max(0, t.head_seq - min(cursors.values())))
    yield fam


def effective_priority(ctx: ServerContext, topic: Topic) -> int:
    from topicsrv.engine.queues import priority

    engine = ctx.engine
    cfg = topic.config
    ready = engine.ready_since(topic.name) if engine.ready_since is not None else None
    return priority.components(cfg.priority, cfg.auto_priority, topic.last_consumed_at,
                               engine.now(), ready).total


def http_families(ctx: ServerContext) -> Iterator[Metric]:
    stats = http_stats(ctx)
    fam = CounterMetricFamily("topicsrv_http_requests_total", "HTTP requests answered, by status "
                              "code.", labels=["code"])
    for code, n in sorted(stats.requests.items()):
        fam.add_metric([str(code)], n)
    yield fam
    yield gauge("topicsrv_http_connections", "Open HTTP connections.", stats.connections)
    yield gauge("topicsrv_sse_streams", "Open SSE streams (watch, work and status).",
                stats.sse_streams)
    yield counter("topicsrv_sse_frames_total",
                  "SSE frames sent (watch records and tombstones, work jobs, status).",
                  stats.sse_frames)
    yield histogram("topicsrv_fsync_wait_seconds",
                    "Time HTTP writes, deletes and topic changes waited for their commit "
                    "(fsync for the fsync class).", [], [([], stats.fsync_wait)])
    yield latency_family("topicsrv_http_request_duration_seconds",
                         "Time from a parsed HTTP request to its response (long-polls include "
                         "their wait; SSE streams are not observed), by route: 'METHOD /path "
                         "pattern', 'other' for requests refused before routing.", "route",
                         ctx.metrics.http_latency)


def resp_families(ctx: ServerContext) -> Iterator[Metric]:
    yield latency_family("topicsrv_resp_command_duration_seconds",
                         "Time a RESP command took in its handler (blocking reads and commit "
                         "waits included), by command name ('parent|sub' for subcommands).",
                         "command", ctx.metrics.resp_latency)
    front: Any = ctx.metrics.resp  # resp/commands/base.Front (the http front does not import resp)
    if front is not None:
        yield gauge("topicsrv_resp_connections", "Open RESP client connections.",
                    len(front.clients))
        yield counter("topicsrv_resp_commands_total", "RESP commands received.",
                      front.stats.total_commands)


def pubsub_families(ctx: ServerContext) -> Iterator[Metric]:
    """The pub/sub bus (topicsrv/bus/), both fronts' subscribers together."""
    bus = ctx.bus
    st = bus.stats
    yield gauge("topicsrv_pubsub_channels", "Pub/sub channels with at least one subscriber.",
                len(bus.channels))
    yield gauge("topicsrv_pubsub_patterns", "Distinct pub/sub patterns subscribed to.",
                len(bus.patterns))
    yield gauge("topicsrv_pubsub_shard_channels", "Shard channels with a subscriber.",
                len(bus.shard_channels))
    yield counter("topicsrv_pubsub_messages_published_total",
                  "PUBLISH / SPUBLISH / HTTP publish calls.", st.published)
    yield counter("topicsrv_pubsub_messages_delivered_total",
                  "Deliveries queued to a subscriber (one per subscriber and match).",
                  st.delivered)
    yield counter("topicsrv_pubsub_messages_dropped_total",
                  "Deliveries dropped because the subscriber was over its output limit.",
                  st.dropped)
    yield counter("topicsrv_pubsub_slow_subscriber_disconnects_total",
                  "Subscribers disconnected by the pubsub output-buffer limits.",
                  st.slow_disconnects)


def storage_families(ctx: ServerContext) -> Iterator[Metric]:
    storage = ctx.storage
    if storage is None:
        return
    yield histogram("topicsrv_wal_sync_seconds", "Time of one WAL batch's writev + fdatasync, by "
                    "shard.", ["shard"], (([str(sh.index)], sh.sync_latency)
                                          for sh in storage.shards))
    rec = storage.recovered
    yield gauge("topicsrv_recovery_seconds", "How long the last startup recovery took (0 until "
                "it finished).", rec.seconds if rec is not None else 0.0)
    yield gauge("topicsrv_recovery_records", "Records the last startup recovery restored.",
                rec.records if rec is not None else 0)
    yield gauge("topicsrv_wal_writable", "1 while every WAL shard accepts writes, else 0.",
                int(all(sh.unwritable is None for sh in storage.shards)))
    yield counter("topicsrv_checkpoints_total", "Checkpoints written since start.",
                  storage.checkpoints)


def keyspace_families(ctx: ServerContext) -> Iterator[Metric]:
    """The one keyspace (engine/keyspace): keys of both kinds, TTLs, expiries; as of the last
    expiry tick (a scrape never expires anything)."""
    ks = ctx.engine.keyspace
    fam = GaugeMetricFamily("topicsrv_keyspace_keys", "Keys in the keyspace (DBSIZE), by kind: "
                            "strings, lists, hashes and topics (streams).", labels=["kind"])
    for kind, n in colls.counts(ks).items():
        fam.add_metric([kind], n)
    fam.add_metric(["stream"], len(ctx.engine.topics))
    yield fam
    yield gauge("topicsrv_keyspace_expires", "Keys with a TTL (INFO keyspace `expires`).", len(ks.expiry))
    yield gauge("topicsrv_keyspace_string_bytes", "Bytes of string keys: names plus values "
                "(counted in INFO used_memory).", ks.nbytes)
    yield counter("topicsrv_keyspace_expired_keys_total", "Keys deleted because their TTL passed "
                  "(INFO stats `expired_keys`), strings and topics.", ks.stats["expired_keys"])
    yield counter("topicsrv_keyspace_evicted_keys_total", "Keys evicted to stay under "
                  "--max-memory (INFO stats `evicted_keys`): the policy is noeviction, writes "
                  "are refused instead (see topicsrv_memory_refused_total).", 0)
    yield counter("topicsrv_memory_refused_total", "Writes refused over --max-memory (RESP "
                  "-OOM, HTTP 507 insufficient_memory).", ctx.memory.refused)


def delivery_family(ctx: ServerContext) -> Metric:
    """The scheduler's wait from ready (records arrived) to admitted, by P_eff band."""
    n = ctx.notifier
    series = []
    for band, counts, total in zip(BANDS, n.latency, n.latency_sum, strict=True):
        h = Histogram(LATENCY_BUCKETS_S)
        h.counts, h.total = list(counts), float(total)
        series.append(([band], h))
    return histogram("topicsrv_delivery_latency_seconds",
                     "Time from a waiter's records arriving to the scheduler serving it, by the "
                     "band of its topic's effective priority (lt0: <0, 0to499, ge500).",
                     ["band"], series)


def queue_families(ctx: ServerContext, top: list[Topic]) -> Iterator[Metric]:
    now = ctx.engine.now()
    jobs = GaugeMetricFamily(
        "topicsrv_queue_jobs", "Jobs of a queue by state: ready (claimable now), in_flight "
        "(leased, deadline not passed), delayed (nacked with a delay not over yet).",
        labels=["topic", "state"])
    age = GaugeMetricFamily("topicsrv_queue_oldest_ready_age_seconds",
                            "Age of the oldest claimable job of a queue (0 when none).",
                            labels=["topic"])
    events = CounterMetricFamily(
        "topicsrv_queue_events_total", "Lease lifecycle events of a queue since it was "
        "created: claimed, acked, nacked, expired (reclaimed after the deadline), extended, "
        "dead_lettered, dead_letter_errors (a dead-letter copy refused).",
        labels=["topic", "event"])
    for t in top:
        if t.type != "queue":
            continue
        st = queues.stats(t, now)
        for s in QUEUE_STATES:
            jobs.add_metric([t.name, s], st[s])
        age.add_metric([t.name], st["oldest_ready_age_ms"] / 1000)
        counts = queues.counters(t)
        for e in QUEUE_EVENTS:
            events.add_metric([t.name, e], counts.get(e, 0))
    yield from (jobs, age, events)


def router_families(ctx: ServerContext) -> Iterator[Metric]:
    engine = ctx.engine
    states = [routers.state(engine, r) for _, r in sorted(engine.routers.items())]
    yield gauge("topicsrv_routers", "Routers that exist.", len(states))
    states.sort(key=lambda s: -int(s["lag"]))  # stable: ties stay in name order
    states = states[:max(1, ctx.config.top_topics)]
    for key, name, help_text in ROUTER_GAUGES:
        fam = GaugeMetricFamily(name, help_text, labels=["router"])
        for s in states:
            fam.add_metric([s["name"]], int(s[key]))
        yield fam
    fam = GaugeMetricFamily("topicsrv_router_blocked", "1 while the router cannot forward (dest "
                            "full with discard reject), else 0.", labels=["router"])
    for s in states:
        fam.add_metric([s["name"]], int(s["status"] == "blocked"))
    yield fam
    for key, name, help_text in ROUTER_COUNTERS:
        cfam = CounterMetricFamily(name, help_text, labels=["router"])
        for s in states:
            cfam.add_metric([s["name"]], int(s[key]))
        yield cfam


def render(ctx: ServerContext, accept: str = "") -> tuple[bytes, str]:
    """The exposition (body, content type) in the format `accept` asks for (Rule 6)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ServerCollector(ctx))
    encoder, content_type = choose_encoder(accept)
    return encoder(registry), content_type


def render_text(ctx: ServerContext) -> str:
    """The Prometheus text format (tests, debugging)."""
    return render(ctx)[0].decode()

