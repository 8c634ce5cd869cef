"""Per-connection and per-front state of the RESP front: `Client` (one connection: CLIENT
LIST/INFO/KILL), `FrontStats` and `Front` (shared by the front's connections: INFO stats,
commandstats), `CommandContext` (what a handler gets) and `CommandSpec` (a command of the
table: its name, arity, flags and handler). Re-exported by resp/commands/base.py,
where the command framework lives.

Rule 1: these are compiled (buildinfo.HOT_MODULES): every request reads and updates a dozen of
their fields, and the compiled request path (session, batch, dispatch) then reads a field as a
struct member instead of a generic attribute lookup (docs/performance.md, "Fourth pass").
Rule 2: they stay plain data: no behaviour beyond what a field needs, no attribute outside the
declared ones (a compiled class, like a slotted one, refuses new attributes).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from topicsrv.context import ServerContext  # at run time: a compiled dataclass resolves its fields

if TYPE_CHECKING:
    from topicsrv.engine import Engine


def _no_kill() -> None:
    return None


@dataclass(slots=True)
class Client:
    """Per-connection state, visible to CLIENT LIST / INFO / KILL."""

    id: int
    addr: str = ""
    laddr: str = ""
    name: bytes | None = None
    protocol: int = 2
    authenticated: bool = True
    user: str = "default"  # the ACL user (topicsrv/resp/acl.py): "default" or "reader"
    db: int = 0
    lib_name: bytes | None = None
    lib_ver: bytes | None = None
    created_at: float = field(default_factory=time.monotonic)
    last_interaction: float = field(default_factory=time.monotonic)
    last_cmd: str = "NULL"
    blocked: bool = False  # inside an async (blocking) handler
    paused: bool = False  # input paused because replies are not being read
    out_pending: int = 0  # bytes queued/unsent
    close_after_reply: bool = False  # QUIT
    killed: bool = False
    kill: Callable[[], None] = field(default=_no_kill, repr=False)
    fd: int = -1
    tx: Any = None  # MULTI/WATCH state (topicsrv/resp/multi.py); None when neither is used
    pubsub: Any = None  # its RespSubscriber (topicsrv/resp/pubsub.py) once it subscribed
    session: Any = field(default=None, repr=False)  # the Session serving it (its output)
    script: bool = False  # the client a script's redis.call runs as: never answered BUSY
    reply_mode: int = 0  # CLIENT REPLY: REPLY_ON / REPLY_OFF / REPLY_SKIP_NEXT / REPLY_SKIP
    repl: Any = None  # a replica's link (topicsrv/repl/primary.py) once it sent PSYNC

    def subscribed(self) -> bool:
        """In Redis's subscribed mode: at least one channel, pattern or shard channel."""
        sub = self.pubsub
        return sub is not None and sub.subscribed()

    @property
    def resp3(self) -> bool:
        return self.protocol == 3


@dataclass(slots=True)
class FrontStats:
    total_connections: int = 0
    total_commands: int = 0
    rejected_connections: int = 0
    net_input_bytes: int = 0
    net_output_bytes: int = 0
    unexpected_errors: int = 0
    keyspace_hits: int = 0
    keyspace_misses: int = 0
    output_limit_disconnects: int = 0
    output_limit_refusals: int = 0  # replies refused with -ERR for exceeding the output limit
    security_attacks: int = 0  # connections closed on a POST / Host: command


@dataclass(slots=True)
class Front:
    """State of the RESP front shared by all its connections."""

    clients: dict[int, Client] = field(default_factory=dict)
    stats: FrontStats = field(default_factory=FrontStats)
    next_id: int = 1
    started_at: float = field(default_factory=time.time)
    port: int = 0
    io: str = "tasks"  # the I/O path serving the connections: "reactor" or "tasks"
    security_logged_at: float = float("-inf")  # last POST/Host: warning (logged once a minute)
    settings: dict[str, str] = field(default_factory=dict)  # CONFIG SET values (server.py)
    # INFO commandstats (dispatch.py Rule 10): spec name -> [calls, seconds, rejected_calls,
    # failed_calls]; CONFIG RESETSTAT empties it
    cmdstats: dict[str, list[float]] = field(default_factory=dict)

    def new_client(self, addr: str, laddr: str) -> Client:
        c = Client(id=self.next_id, addr=addr, laddr=laddr)
        self.next_id += 1
        self.clients[c.id] = c
        self.stats.total_connections += 1
        return c


@dataclass(slots=True)
class CommandContext:
    server: ServerContext
    client: Client
    front: Front
    scripts: Any = None  # the redis.call bridge of its scripts (resp/commands/scripts.py)

    @property
    def engine(self) -> Engine:
        return self.server.engine

    @property
    def resp3(self) -> bool:
        return self.client.protocol == 3


Handler = Callable[[CommandContext, list[bytes]], Any]  # a reply, or an awaitable of one


@dataclass(slots=True)
class CommandSpec:
    """A command of the table (resp/commands/base.py `command`): what the dispatcher and the
    script bridge read of it on every call (Rule 1)."""

    name: str  # lower case; "parent|sub" for a subcommand
    arity: int
    flags: list[str]
    first_key: int
    last_key: int
    step: int
    group: str
    summary: str
    since: str = "5.0.0"
    arguments: list[dict[str, Any]] | None = None
    complexity: str | None = None
    doc_flags: list[str] | None = None
    handler: Handler | None = None
    is_async: bool = False
    subcommands: dict[str, CommandSpec] = field(default_factory=dict)

    @property
    def display_name(self) -> str:
        return self.name.split("|")[-1]
