"""TOPIC.ROUTER: routers over RESP (seeds section 8, API.md sections 6 and 9).

  TOPIC.ROUTER SET name source dest [PRESERVE_NODE 0|1] [PRESERVE_TAG 0|1]
                   [FILTER EQ|GLOB pattern] [ALLOW_CYCLE 0|1] [MAX_HOPS n|AUTO]
                   [GUARANTEE AT_LEAST_ONCE|EXACTLY_ONCE] [CREATE_DEST 0|1]
                                        create (or update the options of) a router
  TOPIC.ROUTER DEL name                 :1 deleted, :0 no such router (as XGROUP DESTROY)
  TOPIC.ROUTER INFO name                the router's state (the HTTP GET object)
  TOPIC.ROUTER LIST                     every router's state, in name order
  TOPIC.ROUTER HELP

Rule 1: every argument is parsed with the argument cursor (resp/args.py) and turned into the
HTTP PUT body, which the engine's `routers.parse_spec` checks like an HTTP body: one
validation, one set of rules, for both fronts. A bad argument, a cycle or a fan-in changes
nothing. Options match case-insensitively; a repeated option's last value wins (Redis's
option loops); an option without its value, or an unknown one, is `ERR syntax error`.
Rule 2: booleans are `1|0` (also `true|false|yes|no`, as TOPIC.CREATE takes them), integers
in Redis's strict form (`ERR value is not an integer or out of range`).
Rule 3: replies are the HTTP JSON objects as RESP3 maps (flat key/value arrays under RESP2,
as XINFO answers); SET adds `created` (1 new, 0 updated). A nested value (`filter`,
`last_error`) nests the same way; JSON null is a null.
Rule 4: an engine refusal is `-ERR <message> (<code>)`, the HTTP error code appended so a
client can tell a cycle from a fan-in without parsing the text (`router_cycle`'s message
names the cycle, `a -> b -> a`); `topic_exists_incompatible` adds its reason
(`(topic_exists_incompatible: router_dest_fan_in)`).
"""

from __future__ import annotations

from typing import Any

from topicsrv.errors import TopicsError
from topicsrv.resp.args import Args
from topicsrv.resp.commands.base import (
    CommandContext,
    Err,
    Simple,
    command,
    committed,
    container,
    key_name,
    parse_int,
)

SINCE = "topicsrv 0.1"
GROUP = "topic"

HELP = (
    "TOPIC.ROUTER <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "SET <name> <source> <dest> [PRESERVE_NODE 0|1] [PRESERVE_TAG 0|1] [FILTER EQ|GLOB <pattern>]",
    "    [ALLOW_CYCLE 0|1] [MAX_HOPS <n>|AUTO] [GUARANTEE AT_LEAST_ONCE|EXACTLY_ONCE] [CREATE_DEST 0|1]",
    "    Create a router forwarding every record of <source> into <dest>, or update its options.",
    "DEL <name>",
    "    Delete a router (forwarding stops; copies already forwarded stay).",
    "INFO <name>",
    "    Show a router's state: cursor, lag, forwarded, status, last_error ...",
    "LIST",
    "    Show the state of every router.",
    "HELP",
    "    Prints this help.",
)

_BOOLS = {b"preserve_node": "preserve_node", b"preserve_tag": "preserve_tag",
          b"allow_cycle": "allow_cycle", b"create_dest": "create_dest"}
_FILTERS = {b"eq": "Eq", b"glob": "Glob"}
_GUARANTEES = {b"at_least_once": "at_least_once", b"exactly_once": "exactly_once"}

container("topic.router", GROUP, "Manage routers: forward a topic's records into another topic",
          SINCE)


def _sub(name: str, arity: int, flags: list[str], summary: str, syntax: str = "",
         keys: tuple[int, int, int] = (0, 0, 0)) -> Any:
    return command(f"topic.router|{name}", arity, flags, *keys, GROUP, summary, SINCE,
                   syntax=syntax)


def _bool(raw: bytes, option: str) -> bool:
    low = raw.lower()
    if low in (b"1", b"true", b"yes"):
        return True
    if low in (b"0", b"false", b"no"):
        return False
    raise Err(f"ERR value for {option.upper()} must be 1 or 0")


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "surrogateescape")


def parse_set(args: list[bytes]) -> tuple[str, dict[str, Any]]:
    """`name source dest [option value ...]` -> (router name, the HTTP PUT body) (Rule 1)."""
    body: dict[str, Any] = {"source": key_name(args[1]), "dest": key_name(args[2])}
    a = Args(args, 3)
    while a:
        if opt := a.option(*_BOOLS):
            field = _BOOLS[opt]
            body[field] = _bool(a.next(), field)
        elif a.option(b"filter", nargs=2):
            kind = _FILTERS.get(a.next().lower())
            if kind is None:
                raise Err("ERR FILTER takes EQ or GLOB")
            body["filter"] = ["tag", kind, a.next_text()]
        elif a.option(b"max_hops"):
            raw = a.next()
            body["max_hops"] = None if raw.lower() == b"auto" else parse_int(raw)
        elif a.option(b"guarantee"):
            raw = a.next()
            guarantee = _GUARANTEES.get(raw.lower())
            if guarantee is None:
                raise Err("ERR GUARANTEE takes AT_LEAST_ONCE or EXACTLY_ONCE")
            body["guarantee"] = guarantee
        else:
            raise a.syntax_error()
    return _text(args[0]), body


def _refused(e: TopicsError) -> Err:
    """Rule 4: the engine's message (a cycle names itself there) with its HTTP code and, for a
    409 `topic_exists_incompatible`, its reason."""
    if e.code == "insufficient_memory":
        return Err(e.resp_line())  # Redis's -OOM text as is, as TOPIC.CREATE answers it
    reason = (e.detail or {}).get("reason")
    extra = f"{e.code}: {reason}" if reason else e.code
    return Err(f"{e.resp_prefix} {e.message} ({extra})")


@_sub("set", -5, ["write"], "Create a router from source to dest, or update its options",
      "name:string source:key dest:key [PRESERVE_NODE:preserve_node:integer] "
      "[PRESERVE_TAG:preserve_tag:integer] [FILTER (EQ|GLOB) pattern:string] "
      "[ALLOW_CYCLE:allow_cycle:integer] [MAX_HOPS:max_hops:integer] "
      "[GUARANTEE (AT_LEAST_ONCE|EXACTLY_ONCE)] [CREATE_DEST:create_dest:integer]",
      keys=(3, 4, 1))
def router_set(ctx: CommandContext, args: list[bytes]) -> Any:
    name, body = parse_set(args)
    try:
        state, created, token = ctx.engine.router_put(name, body, ctx.server.memory.check)
    except TopicsError as e:
        raise _refused(e) from None
    return committed(token, {**state, "created": created})


@_sub("del", 3, ["write"], "Delete a router; records it already forwarded stay", "name:string")
def router_del(ctx: CommandContext, args: list[bytes]) -> Any:
    name = _text(args[0])
    if name not in ctx.engine.routers:
        return 0
    try:
        token = ctx.engine.router_delete(name)
    except TopicsError as e:
        raise _refused(e) from None
    return committed(token, 1)


@_sub("info", 3, ["readonly", "fast"], "A router's state: cursor, lag, counters, status",
      "name:string")
def router_info(ctx: CommandContext, args: list[bytes]) -> Any:
    try:
        return ctx.engine.router_get(_text(args[0]))
    except TopicsError as e:
        raise _refused(e) from None


@_sub("list", 2, ["readonly"], "The state of every router, in name order")
def router_list(ctx: CommandContext, args: list[bytes]) -> Any:
    return sorted(ctx.engine.router_list(), key=lambda s: s["name"])


@_sub("help", 2, ["loading", "stale"], "Show helpful text about the different subcommands")
def router_help(ctx: CommandContext, args: list[bytes]) -> Any:
    return [Simple(line) for line in HELP]
