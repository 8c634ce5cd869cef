"""The shared runtime handle: configuration, engine, storage, clock, notifier, metrics, gates.

Rule 1: arrows run one way: `server.py` builds a `ServerContext` and hands it to the fronts;
the fronts, the background tasks and the ops code read it. Nothing here imports a front or
`server.py`; the storage type is named for the type checker only.
Rule 2: every field is typed. A front keeps its counters in `Metrics` (its own typed slot),
and other layers add Prometheus families through `Metrics.exporters`.
"""

from __future__ import annotations

import ssl
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from topicsrv.activity import Activity
from topicsrv.admission import Admission
from topicsrv.bus import Bus, OutputLimits
from topicsrv.clock import Clock, SystemClock
from topicsrv.engine import Engine
from topicsrv.latency import Histogram, Latencies
from topicsrv.lazyfree import LazyFree
from topicsrv.lifecycle import Drain
from topicsrv.memory import MemoryGuard
from topicsrv.notify import Notifier
from topicsrv.repl.primary import Primary
from topicsrv.repl.state import ReplState
from topicsrv.tasks.claims import Claims
from topicsrv.tasks.routers import Routers
from topicsrv.tls import server_context

if TYPE_CHECKING:
    from topicsrv.storage.store import Storage

FSYNC_BUCKETS_S = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)


@dataclass(slots=True)
class HttpStats:
    """What the HTTP front counts (rendered by /metrics)."""

    requests: dict[int, int] = field(default_factory=dict)  # status -> answered
    connections: int = 0
    sse_streams: int = 0
    sse_frames: int = 0
    watch_cursors: dict[str, dict[object, int]] = field(default_factory=dict)  # topic -> watcher -> seq
    fsync_wait: Histogram = field(default_factory=lambda: Histogram(FSYNC_BUCKETS_S))


@dataclass(slots=True)
class Metrics:
    """The registry every layer counts into."""

    http: HttpStats = field(default_factory=HttpStats)
    resp: object | None = None  # the RESP front's shared state (resp/commands/base.Front)
    exporters: list[Callable[[], Iterable[object]]] = field(default_factory=list)
    http_latency: Latencies = field(default_factory=Latencies)  # by "METHOD /route/{pattern}"
    resp_latency: Latencies = field(default_factory=Latencies)  # by command spec name
    activity: Activity = field(default_factory=Activity)  # rates per topic (status page)
    status_cache: dict[int, tuple[float, bytes]] = field(default_factory=dict)  # http/status.py


@dataclass(slots=True)
class ServerConfig:
    data_dir: Path = Path("./data")
    bind: str = "127.0.0.1"
    http_port: int | None = 7070
    resp_port: int | None = 6379
    token: str | None = None
    allowed_hosts: tuple[str, ...] = ()  # extra HTTP Host names ("*" = any); see http/guards.py
    requirepass: str | None = None
    read_token: str | None = None  # HTTP read-only bearer token; RESP user `reader`'s password
    tls_cert: Path | None = None  # PEM certificate chain: TLS on HTTP and on tls_port
    tls_key: Path | None = None  # PEM private key of tls_cert
    tls_ca: Path | None = None  # PEM CA bundle: client certificates required and verified
    tls_port: int | None = None  # RESP over TLS (0 = a free port; None = no TLS RESP listener)
    heartbeat_s: float = 15.0
    max_body_bytes: int = 64 << 20
    proto_max_bulk_len: int = 512 << 20
    keyspace_durability: str = "disk"  # the string keys' one class (storage/keyspacelog.py)
    client_output_limit: int = 64 << 20
    wal_shards: int = 4
    cold_dir: Path | None = None
    checkpoint_interval_s: float = 60.0
    checkpoint_fork: bool = True  # the keyspace file by a forked child (storage/forksave.py)
    storage: bool = True
    resp_io: str = "reactor"  # RESP I/O path: "reactor" (one epoll task) or "tasks" (per connection)
    maxclients: int = 10000  # client connections over both fronts (sized to RLIMIT_NOFILE at start)
    protected_mode: bool = True  # a front without password/token serves loopback clients only
    trusted_nets: tuple[str, ...] | None = None  # tests: networks that count as local
    max_memory: int = 0  # bytes of RSS past which writes are refused (0 = no limit)
    forward_share: float = 0.1  # loop share router forwarding may take while clients write
    shutdown_grace_s: float = 5.0  # how long a stop waits for requests in flight (lifecycle.py)
    status_slot_s: float = 5.0  # one slot of the status page's rate rings (topicsrv/activity.py)
    top_topics: int = 100  # topics with series of their own in /metrics, routers too (http/metrics.py)
    pubsub_limits: OutputLimits = field(default_factory=OutputLimits)  # slow subscribers (bus/limits.py)
    # replication (topicsrv/repl/): `serve --replicaof HOST:PORT`, the primary's credentials,
    # the backlog's size, Sentinel's replica-priority, min-replicas-to-write / -max-lag
    replicaof: tuple[str, int] | None = None
    masteruser: str | None = None
    masterauth: str | None = None
    repl_backlog_size: int = 1 << 20
    replica_priority: int = 100
    min_replicas_to_write: int = 0
    min_replicas_max_lag: int = 10
    min_replicas_to_ack: int = 0  # synchronous replication (repl/primary.py Rule 6)


@dataclass(slots=True)
class ServerContext:
    config: ServerConfig
    engine: Engine
    notifier: Notifier
    started_at: float = field(default_factory=time.time)
    ready: bool = False
    shutting_down: bool = False
    addresses: dict[str, tuple[str, int]] = field(default_factory=dict)
    storage: Storage | None = None
    metrics: Metrics = field(default_factory=Metrics)
    admission: Admission = field(default_factory=lambda: Admission(10000))
    memory: MemoryGuard = field(default_factory=lambda: MemoryGuard(0))
    claims: Claims | None = None  # claim cohorts, long polls, the dead-letter mover
    routers: Routers | None = None  # one forwarding worker per router
    request_shutdown: Callable[[], None] | None = None  # a clean stop, as SIGTERM (SHUTDOWN)
    drain: Drain = field(default_factory=Drain)  # requests in flight, for a graceful stop
    tls: ssl.SSLContext | None = None  # --tls-cert/--tls-key (topicsrv/tls.py); None: no TLS
    bus: Bus = field(default_factory=Bus)  # pub/sub, both fronts (topicsrv/bus/)
    scripting: Any = None  # topicsrv/scripting/service.py, made on first use
    busy: str | None = None  # the BUSY text while a script runs past its threshold
    lazyfree: LazyFree = field(default_factory=LazyFree)  # topicsrv/lazyfree.py
    repl: ReplState = field(default_factory=ReplState)  # role and link (topicsrv/repl/state.py)
    primary: Primary = field(default_factory=lambda: Primary(ReplState()))  # repl/primary.py

    def claims_service(self) -> Claims:
        if self.claims is None:
            self.claims = Claims(self.engine, self.notifier)
        return self.claims

    def routers_service(self) -> Routers:
        if self.routers is None:
            self.routers = Routers(self.engine, share=self.config.forward_share,
                                   notifier=self.notifier)
            self.routers.acting = self.repl.acting
        return self.routers


def make_context(config: ServerConfig, clock: Clock | None = None) -> ServerContext:
    engine = Engine(clock=clock or SystemClock())
    notifier = Notifier(engine)
    engine.listen(notifier.changed, notifier.armed_names())
    engine.ready_since = notifier.ready_since
    admission = Admission(config.maxclients, protected_mode=config.protected_mode,
                          trusted_nets=config.trusted_nets)
    bus = Bus(engine.clock, config.pubsub_limits)
    engine.keyspace.on_expired = bus.keyspace.expired  # `expired` events (bus/keyspace.py)
    engine.keyspace.on_hexpired = bus.keyspace.hash_fields_expired  # `hexpired` events
    repl = ReplState(data_dir=config.data_dir if config.storage else None,
                     master=config.replicaof, masteruser=config.masteruser,
                     masterauth=config.masterauth, priority=config.replica_priority,
                     backlog_size=config.repl_backlog_size,
                     min_replicas_to_write=config.min_replicas_to_write,
                     min_replicas_max_lag=config.min_replicas_max_lag,
                     min_replicas_to_ack=config.min_replicas_to_ack)
    return ServerContext(config=config, engine=engine, notifier=notifier, admission=admission,
                         memory=MemoryGuard(config.max_memory), claims=Claims(engine, notifier),
                         tls=server_context(config.tls_cert, config.tls_key,
                                            config.tls_ca, config.tls_port),
                         bus=bus, repl=repl, primary=Primary(repl))


