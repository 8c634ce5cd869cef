"""The command framework of the RESP front: reply value types, per-connection state, registry.

A command family is one module under `topicsrv/resp/commands/` that registers handlers with
the `@command(...)` decorator. A handler receives `(ctx, args)` where `args` excludes the
command name (and, for a subcommand, the subcommand name too), parses its own arguments,
executes against the engine and RETURNS a reply value; it never touches the socket. The
connection loop encodes the value (RESP2 or RESP3 per `ctx.client.protocol`) and writes it.

Reply values:
  None -> null (RESP2 `$-1`, RESP3 `_`)        int -> `:n`
  bytes/str -> bulk string                      list/tuple -> array
  dict -> RESP3 map (flat array in RESP2)       set/frozenset -> RESP3 set (array in RESP2)
  float -> RESP3 double (bulk in RESP2)         bool -> RESP3 boolean (`:1`/`:0` in RESP2)
  Simple("OK") -> `+OK`                         Raw(b"...") -> spliced verbatim
  Verbatim(text) -> RESP3 verbatim `=` (bulk in RESP2)
  Push([...]) -> RESP3 push `>` (array in RESP2)
  NullArray() -> RESP2 `*-1` / RESP3 `_`        (XREAD timeout, Redis's null array)
  NO_REPLY -> nothing at all                    (a connection closed without an answer)
  Err("ERR text") -> `-ERR text` (raise it or return it; the connection stays open).
  committed(token, reply) -> `reply` once the engine's commit token is durable (writes).
A `TopicsError` raised by the engine becomes `-<resp_prefix> <message>` at the edge.

Handlers may be `async`, or return an awaitable (blocking commands such as XREAD BLOCK return
a coroutine only when they really have to wait); the connection loop awaits it, and cancels it
when the client is killed or disconnects.

Rule 1: `REGISTRY` maps the lower-case command name to its `CommandSpec`. A subcommand is
registered as `"parent|sub"` (Redis's own naming in COMMAND DOCS); the parent is created as a
container automatically and dispatches on its first argument (case-insensitive).
Rule 2: arity follows Redis: positive = exact argument count including the command name
(and subcommand name), negative = at least that many. The dispatcher checks arity before
calling the handler and replies `wrong_args(name)`.
Rule 3: key names are bytes on the wire; `key_name(b)` turns one into the engine's `str`
topic name (latin-1, so any byte string round-trips; the engine validates the name).

Decision on XINFO (shared between streams.py and groups_info.py): the container `xinfo` is shared.
streams.py registers `xinfo|stream` and `xinfo|help`; groups_info.py registers `xinfo|groups` and
`xinfo|consumers`. `XINFO STREAM` asks the hooks below for group data, so groups_info.py extends it
without editing streams.py:
  HOOKS["xinfo_stream_groups_count"](ctx, topic) -> int            (non-FULL "groups" field)
  HOOKS["xinfo_stream_full_groups"](ctx, topic, count) -> list      (FULL "groups" array;
        each element a dict reply value exactly as Redis's XINFO STREAM FULL group entry)
Defaults answer 0 and [] until groups_info.py installs its functions (assign into HOOKS at import).
"""

from __future__ import annotations

import inspect
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# the per-connection and per-front state, compiled (resp/state.py), re-exported here
from topicsrv.resp.state import Client as Client
from topicsrv.resp.state import CommandContext as CommandContext
from topicsrv.resp.state import CommandSpec as CommandSpec
from topicsrv.resp.state import Front as Front
from topicsrv.resp.state import FrontStats as FrontStats
from topicsrv.resp.state import Handler as Handler


class Simple(str):
    """A simple string reply (`+OK`)."""

    __slots__ = ()


class Verbatim(str):
    """A RESP3 verbatim string (`=len\\r\\ntxt:...`); a bulk string under RESP2."""

    __slots__ = ()


class Raw(bytes):
    """Pre-encoded RESP bytes spliced into the reply verbatim (stream entries)."""

    __slots__ = ()


class Pushed(Raw):
    """Pre-encoded pub/sub frames ((P|S)(UN)SUBSCRIBE confirmations): spliced like Raw, and
    sent even under CLIENT REPLY OFF/SKIP, as redis-server sends them (session.emit)."""

    __slots__ = ()


# CLIENT REPLY (Client.reply_mode): ON answers every command; OFF none; SKIP_NEXT is set by
# CLIENT REPLY SKIP (its own reply is not sent) and becomes SKIP, which drops the reply of the
# next command and turns back to ON. Pushed frames and bus deliveries are always sent.
REPLY_ON, REPLY_OFF, REPLY_SKIP_NEXT, REPLY_SKIP = 0, 1, 2, 3


class Push(list[Any]):
    """A RESP3 push frame (`>`); a plain array under RESP2."""


class Members(list[Any]):
    """A RESP3 set (`~`) in the order given (an intset answers sorted, as Redis); a plain
    array under RESP2."""


class NullArray:
    """Redis's null array: `*-1` under RESP2, `_` under RESP3."""

    __slots__ = ()


NULL_ARRAY = NullArray()


class NoReply:
    """Nothing is sent (the connection is being closed: POST/Host: protection)."""

    __slots__ = ()


NO_REPLY = NoReply()


@dataclass(slots=True)
class Pending:
    """A reply to send only once `token` (a storage CommitToken) is durable.

    Return `committed(token, reply)` from a handler after an engine write: the connection
    awaits the token before the reply goes out (a failure replies the TopicsError instead),
    without treating the command as blocking; a pipeline of writes waits once per flush.
    """

    token: Any
    reply: Any


def committed(token: Any, reply: Any) -> Any:
    return reply if token is None else Pending(token, reply)


class Err(Exception):
    """An error reply. The text starts with its prefix: `Err("ERR syntax error")`."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text.replace("\r", " ").replace("\n", " ")


class CountedErr(Err):
    """An error reply already counted in INFO errorstats: a script's reply that is the error a
    command inside it answered (topicsrv/scripting/lua.py Rule 5); encoded without counting."""


class Refused(Err):
    """An error a handler raises for a command refused before it runs, on grounds that depend
    on its arguments (a script whose shebang flags deny it under maxmemory): dispatch counts
    a rejected call, not a failed one, as redis-server's processCommand."""


def wrong_args(name: str) -> Err:
    return Err(f"ERR wrong number of arguments for '{name.lower()}' command")


# error replies sent, by their first word (`ERR`, `WRONGTYPE`, ...): INFO errorstats. Counted
# where errors are encoded (encoder.py), so process-wide: one RESP front per server process.
ERROR_STATS: Counter[str] = Counter()

SYNTAX = "ERR syntax error"
NOT_INT = "ERR value is not an integer or out of range"
WRONGTYPE = "WRONGTYPE Operation against a key holding the wrong kind of value"


def key_name(key: bytes) -> str:
    return key.decode("latin-1")


def looked_up(ctx: CommandContext, found: bool) -> None:
    """A key lookup Redis counts in INFO keyspace_hits / keyspace_misses (its lookupKeyRead):
    a hit when the key exists, of any type."""
    stats = ctx.front.stats
    if found:
        stats.keyspace_hits += 1
    else:
        stats.keyspace_misses += 1


def kind_of(ctx: CommandContext, key: bytes) -> str | None:
    """The kind of a key ("string", "stream", None), a counted lookup (`looked_up`)."""
    kind = ctx.engine.keyspace.kind(key_name(key))
    looked_up(ctx, kind is not None)
    return kind


_QUOTE_ESCAPES = {"\\": "\\\\", "'": "\\'", "\n": "\\n", "\r": "\\r", "\t": "\\t",
                  "\a": "\\a", "\b": "\\b"}


def quote_bytes(raw: bytes) -> str:
    """A key for an error text, readable like redis-cli shows it: single-quoted UTF-8, with
    `\\xHH` for each byte that is not valid UTF-8 or not printable, and `\\'` `\\\\`
    `\\n` ... escaped, so the text is unambiguous and stays on one line."""
    out = ["'"]
    for ch in raw.decode("utf-8", "surrogateescape"):
        cp = ord(ch)
        if 0xDC80 <= cp <= 0xDCFF:  # an undecodable byte
            out.append(f"\\x{cp - 0xDC00:02x}")
        elif ch in _QUOTE_ESCAPES:
            out.append(_QUOTE_ESCAPES[ch])
        elif ch.isprintable():
            out.append(ch)
        else:
            out.append("".join(f"\\x{b:02x}" for b in ch.encode("utf-8")))
    out.append("'")
    return "".join(out)


def parse_int(value: bytes, error: str = NOT_INT) -> int:
    """A signed 64-bit integer argument as Redis parses it (no spaces, no '+', no leading 0s)."""
    try:
        s = value.decode("ascii")
    except UnicodeDecodeError:
        raise Err(error) from None
    if not s or s != s.strip() or s.startswith("+") or (len(s) > 1 and s[0] == "0"):
        raise Err(error)
    if s.startswith("-0") or s.startswith("-+"):
        raise Err(error)
    try:
        n = int(s)
    except ValueError:
        raise Err(error) from None
    if not -(1 << 63) <= n < (1 << 63):
        raise Err(error)
    return n


def parse_int_config(value: str) -> int:
    """A CONFIG SET value of one of Redis 7.0's int settings (0 .. INT_MAX: `timeout`,
    `replica-priority`, `min-replicas-*`), with config.c's texts (CONFIG SET wraps them)."""
    try:
        n = int(value)
    except ValueError:
        raise ValueError("argument couldn't be parsed into an integer") from None
    if not 0 <= n <= 2147483647:
        raise ValueError("argument must be between 0 and 2147483647 inclusive")
    return n


REGISTRY: dict[str, CommandSpec] = {}

# Extension points (see the module docstring); groups_info.py assigns its own functions.
HOOKS: dict[str, Callable[..., Any]] = {
    "xinfo_stream_groups_count": lambda ctx, topic: 0,
    "xinfo_stream_full_groups": lambda ctx, topic, count: [],
}


def _container(name: str, group: str) -> CommandSpec:
    spec = REGISTRY.get(name)
    if spec is None:
        spec = CommandSpec(name, -2, [], 0, 0, 0, group, f"A container for {name.upper()} commands.")
        REGISTRY[name] = spec
    return spec


def container(
    name: str, group: str, summary: str, since: str = "5.0.0", flags: list[str] | None = None
) -> CommandSpec:
    """Declare (or re-describe) a container command such as CLIENT or XINFO."""
    spec = _container(name, group)
    spec.summary, spec.since, spec.group = summary, since, group
    spec.flags = flags or []
    return spec


def command(
    name: str,
    arity: int,
    flags: list[str],
    first_key: int,
    last_key: int,
    step: int,
    group: str,
    summary: str,
    since: str = "5.0.0",
    arguments: list[dict[str, Any]] | None = None,
    subcommands: dict[str, CommandSpec] | None = None,
    complexity: str | None = None,
    doc_flags: list[str] | None = None,
    syntax: str | None = None,
) -> Callable[[Handler], Handler]:
    """Register a handler as `name` ("xadd", or "xinfo|stream" for a subcommand).

    `syntax` is the compact argument grammar of topicsrv/resp/argspec.py (e.g.
    "key:key [COUNT:count:integer]"); when given it fills `arguments` for COMMAND DOCS.
    """
    name = name.lower()
    if arguments is None and syntax is not None:
        from topicsrv.resp.argspec import parse

        arguments = parse(syntax)

    def deco(fn: Handler) -> Handler:
        spec = CommandSpec(
            name, arity, list(flags), first_key, last_key, step, group, summary, since,
            arguments, complexity, doc_flags, fn, inspect.iscoroutinefunction(fn),
            dict(subcommands or {}),
        )
        if "|" in name:
            parent, _, _sub = name.partition("|")
            _container(parent, group).subcommands[name] = spec
        else:
            old = REGISTRY.get(name)
            if old is not None:
                spec.subcommands.update(old.subcommands)
            REGISTRY[name] = spec
        return fn

    return deco


def lookup(argv: list[bytes]) -> tuple[CommandSpec | None, int]:
    """(spec, number of argv items naming it) for a command line; (None, 0) if unknown.

    For a container with a known subcommand returns the subcommand spec and 2. For a container
    whose subcommand is unknown returns the container spec and 1 (the caller answers with
    Redis's "unknown subcommand" error).
    """
    spec = REGISTRY.get(argv[0].decode("latin-1").lower())
    if spec is None:
        return None, 0
    if spec.subcommands and len(argv) >= 2:
        sub = spec.subcommands.get(f"{spec.name}|{argv[1].decode('latin-1').lower()}")
        if sub is not None:
            return sub, 2
    return spec, 1


def subcommand_syntax(parent: str, name: str) -> Err:
    """Redis's addReplySubcommandSyntaxError: a known subcommand given the wrong arguments."""
    return Err(f"ERR unknown subcommand or wrong number of arguments for '{name}'. "
               f"Try {parent.upper()} HELP.")


def unknown_subcommand(parent: str, sub: bytes) -> Err:
    text = sub.decode("utf-8", "replace")
    return Err(
        f"ERR unknown subcommand '{text[:128]}'. Try {parent.upper()} HELP."
    )
