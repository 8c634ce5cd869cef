"""Connection commands: HELLO AUTH PING ECHO QUIT RESET SELECT CLIENT *.

Rule 1: texts and reply shapes are redis-server 7's (HELLO's map is what redis-py checks).
Rule 2: users are topicsrv/resp/acl.py's (`default`, and `reader` with `--read-token`); with
`--requirepass` a connection starts unauthenticated and every command but AUTH/HELLO/QUIT/RESET
answers `NOAUTH`; otherwise it starts as `default`. RESET makes it `default` again.
Rule 3: CLIENT KILL of another connection cancels it (a blocked XREAD included); killing
oneself replies first, then closes, like Redis.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from topicsrv.notify import NOTHING
from topicsrv.notify.blocks import Block
from topicsrv.resp import acl
from topicsrv.resp.args import Args
from topicsrv.resp.commands.base import (
    REPLY_OFF,
    REPLY_ON,
    REPLY_SKIP_NEXT,
    SYNTAX,
    Client,
    CommandContext,
    Err,
    Simple,
    Verbatim,
    command,
    container,
    parse_int,
)
from topicsrv.resp.pubsub import leave

REDIS_VERSION = "7.0.15"
WRONGPASS = "WRONGPASS invalid username-password pair or user is disabled."


def _cmd(name: str, arity: int, flags: list[str], summary: str, syntax: str = "",
         since: str = "1.0.0", first: int = 0) -> Any:
    return command(name, arity, flags, first, first, 1 if first else 0, "connection", summary,
                   since, syntax=syntax)


def log_in(ctx: CommandContext, user: bytes | None, password: bytes) -> None:
    """AUTH / HELLO AUTH: become `user` (`default` when None), or WRONGPASS (acl.py Rule 1)."""
    found = acl.authenticate(ctx.server.config, b"default" if user is None else user, password)
    if found is None:
        raise Err(WRONGPASS)
    ctx.client.user = found.name
    ctx.client.authenticated = True


def _valid_name(name: bytes) -> bool:
    return all(33 <= c <= 126 for c in name)


def hello_map(ctx: CommandContext) -> dict[str, Any]:
    return {
        "server": "redis",
        "version": REDIS_VERSION,
        "proto": ctx.client.protocol,
        "id": ctx.client.id,
        "mode": "standalone",
        "role": "master",
        "modules": [],
    }


@_cmd("hello", -1, ["noscript", "loading", "stale", "fast", "no-auth", "allow_busy"],
      "Handshakes with the Redis server.",
      "[protover:integer [AUTH:username:string password:string] [SETNAME:clientname:string]]",
      since="6.0.0")
def hello(ctx: CommandContext, args: list[bytes]) -> Any:
    client = ctx.client
    proto = client.protocol
    if args:
        try:
            proto = parse_int(args[0])
        except Err:
            raise Err("ERR Protocol version is not an integer or out of range") from None
        if proto not in (2, 3):
            raise Err("NOPROTO unsupported protocol version")
    auth: tuple[bytes, bytes] | None = None
    setname: bytes | None = None
    a = Args(args, 1)
    while a:
        if a.option(b"auth", nargs=2):
            auth = (a.next(), a.next())
        elif a.option(b"setname"):
            setname = a.next()
        else:
            raise Err(f"ERR Syntax error in HELLO option '{a.peek().decode('utf-8', 'replace')}'")
    if auth is not None:
        log_in(ctx, auth[0], auth[1])
    if not client.authenticated:
        raise Err("NOAUTH HELLO must be called with the client already authenticated, otherwise "
                  "the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the "
                  "client and select the RESP protocol version at the same time")
    if setname is not None:
        if not _valid_name(setname):
            raise Err("ERR Client names cannot contain spaces, newlines or special characters.")
        client.name = setname or None
    client.protocol = proto
    return hello_map(ctx)


@_cmd("auth", -2, ["noscript", "loading", "stale", "fast", "no-auth", "allow_busy"],
      "Authenticate to the server", "[username:string] password:string")
def auth(ctx: CommandContext, args: list[bytes]) -> Any:
    if len(args) > 2:
        raise Err(SYNTAX)
    user = args[0] if len(args) == 2 else None
    if user is None and not ctx.server.config.requirepass:
        raise Err("ERR AUTH <password> called without any password configured for the default "
                  "user. Are you sure your configuration is correct?")
    log_in(ctx, user, args[-1])
    return Simple("OK")


@_cmd("ping", -1, ["fast", "sentinel"], "Ping the server", "[message:string]")
def ping(ctx: CommandContext, args: list[bytes]) -> Any:
    if len(args) > 1:
        raise Err("ERR wrong number of arguments for 'ping' command")
    if ctx.client.protocol == 2 and ctx.client.subscribed():  # subscribed mode (pubsub.py)
        return [b"pong", args[0] if args else b""]
    return args[0] if args else Simple("PONG")


@_cmd("echo", 2, ["fast"], "Echo the given string", "message:string")
def echo(ctx: CommandContext, args: list[bytes]) -> Any:
    return args[0]


@_cmd("quit", -1, ["allow_busy", "noscript", "loading", "stale", "fast", "no-auth"],
      "Close the connection")
def quit_(ctx: CommandContext, args: list[bytes]) -> Any:
    ctx.client.close_after_reply = True
    return Simple("OK")


@_cmd("reset", 1, ["noscript", "loading", "stale", "fast", "no-auth", "allow_busy"],
      "Reset the connection", since="6.2.0")
def reset(ctx: CommandContext, args: list[bytes]) -> Any:
    c = ctx.client
    leave(ctx.server.bus, c)
    c.protocol = 2
    c.name = None
    c.db = 0
    c.authenticated = not ctx.server.config.requirepass
    c.user = acl.DEFAULT
    c.reply_mode = REPLY_ON
    return Simple("RESET")


@_cmd("select", 2, ["loading", "stale", "fast"], "Change the selected database for the current connection",
      "index:integer")
def select(ctx: CommandContext, args: list[bytes]) -> Any:
    if parse_int(args[0]) != 0:
        raise Err("ERR DB index is out of range")
    return Simple("OK")


# ---- CLIENT ------------------------------------------------------------------------------

container("client", "connection", "A container for client connection commands.", "2.4.0")


ADMIN_SUBCOMMANDS = frozenset({"kill", "list", "pause", "unpause", "no-evict", "unblock"})  # as Redis 7.0


def _client_cmd(sub: str, arity: int, summary: str, syntax: str = "", since: str = "2.4.0") -> Any:
    flags = ["noscript", "loading", "stale"]
    if sub in ADMIN_SUBCOMMANDS:
        flags.insert(0, "admin")
    return command(f"client|{sub}", arity, flags, 0, 0, 0, "connection", summary, since,
                   syntax=syntax)


def client_line(ctx: CommandContext, c: Client) -> str:
    now = time.monotonic()
    tx = c.tx
    in_multi = tx is not None and tx.multi
    # redis-server's order: x (in MULTI), b (blocked), d (a watched key changed), c (close
    # after reply); N when none
    sub = c.pubsub
    flags = ("x" if in_multi else "") + ("b" if c.blocked else "") + (
        "d" if tx is not None and tx.dirty else "") + ("c" if c.close_after_reply else "") + (
        "P" if sub is not None and sub.subscribed() else "") + ("S" if c.repl is not None else "") or "N"
    nsub, npsub, nssub = ((len(sub.channels), len(sub.patterns), len(sub.shard_channels))
                          if sub is not None else (0, 0, 0))
    parts = [
        f"id={c.id}", f"addr={c.addr}", f"laddr={c.laddr}", f"fd={c.fd}",
        f"name={(c.name or b'').decode('utf-8', 'replace')}",
        f"age={int(now - c.created_at)}", f"idle={int(now - c.last_interaction)}",
        f"flags={flags}", f"db={c.db}", f"sub={nsub}", f"psub={npsub}", f"ssub={nssub}",
        f"multi={len(tx.queued) if in_multi else -1}",
        "qbuf=0", "qbuf-free=0", "argv-mem=0", "multi-mem=0", "rbs=0", "rbp=0",
        f"obl={min(c.out_pending, 16384)}", "oll=0", f"omem={c.out_pending}",
        f"tot-mem={c.out_pending}", "events=" + ("w" if c.paused else "r"),
        f"cmd={c.last_cmd}", f"user={c.user}", "redir=-1", f"resp={c.protocol}",
        f"lib-name={(c.lib_name or b'').decode('utf-8', 'replace')}",
        f"lib-ver={(c.lib_ver or b'').decode('utf-8', 'replace')}",
    ]
    return " ".join(parts)


@_client_cmd("id", 2, "Returns the client ID for the current connection", since="5.0.0")
def client_id(ctx: CommandContext, args: list[bytes]) -> Any:
    return ctx.client.id


@_client_cmd("setname", 3, "Set the current connection name", "connection-name:string")
def client_setname(ctx: CommandContext, args: list[bytes]) -> Any:
    if not _valid_name(args[0]):
        raise Err("ERR Client names cannot contain spaces, newlines or special characters.")
    ctx.client.name = args[0] or None
    return Simple("OK")


@_client_cmd("getname", 2, "Get the current connection name", since="2.6.9")
def client_getname(ctx: CommandContext, args: list[bytes]) -> Any:
    return ctx.client.name


@_client_cmd("setinfo", 4, "Set client or connection specific info",
             "(LIB-NAME:libname:string|LIB-VER:libver:string)", since="7.2.0")
def client_setinfo(ctx: CommandContext, args: list[bytes]) -> Any:
    attr = args[0].lower()
    if attr not in (b"lib-name", b"lib-ver"):
        raise Err(f"ERR Unrecognized option '{args[0].decode('utf-8', 'replace')}'")
    if not all(33 <= c <= 126 for c in args[1]):
        raise Err(f"ERR {attr.decode()} cannot contain spaces, newlines or special characters.")
    if attr == b"lib-name":
        ctx.client.lib_name = args[1] or None
    else:
        ctx.client.lib_ver = args[1] or None
    return Simple("OK")


@_client_cmd("info", 2, "Returns information about the current client connection.", since="6.2.0")
def client_info(ctx: CommandContext, args: list[bytes]) -> Any:
    return Verbatim(client_line(ctx, ctx.client) + "\n")


@_client_cmd("list", -2, "Get the list of client connections",
             "[TYPE:type:string] [ID:client-id:integer...]")
def client_list(ctx: CommandContext, args: list[bytes]) -> Any:
    clients = list(ctx.front.clients.values())
    a = Args(args)
    while a:
        if a.option(b"type"):
            kind = _client_type(a.next())
            clients = [c for c in clients if type_of(c) == kind]
        elif a.option(b"id"):
            wanted = set()
            for raw in a.rest():
                cid = parse_int(raw, "ERR Invalid client ID")
                if cid <= 0:
                    raise Err("ERR Invalid client ID")
                wanted.add(cid)
            clients = [c for c in clients if c.id in wanted]
        else:
            raise a.syntax_error()
    return Verbatim("".join(client_line(ctx, c) + "\n" for c in clients))


@_client_cmd("kill", -3, "Kill the connection of a client",
             "(ip-port:string|[ID:client-id:integer] [TYPE:type:string] [ADDR:ip:port:string] "
             "[LADDR:ip:port:string] [SKIPME:yes/no:string] [USER:username:string])")
def client_kill(ctx: CommandContext, args: list[bytes]) -> Any:
    clients = list(ctx.front.clients.values())
    if len(args) == 1:  # old form: CLIENT KILL addr
        addr = args[0].decode("utf-8", "replace")
        victims = [c for c in clients if c.addr == addr]
        if not victims:
            raise Err("ERR No such client")
        _kill(ctx, victims)
        return Simple("OK")
    if len(args) % 2:  # (every option takes a value)
        raise Err(SYNTAX)
    skipme = True
    preds: list[Callable[[Client], bool]] = []
    a = Args(args)
    while a:
        opt = a.option(b"id", b"addr", b"laddr", b"type", b"user", b"skipme")
        if opt == b"id":
            cid = a.next_int("ERR client-id should be greater than 0")
            if cid <= 0:
                raise Err("ERR client-id should be greater than 0")
            preds.append(_field_is("id", cid))
        elif opt == b"addr" or opt == b"laddr":
            preds.append(_field_is(opt.decode(), a.next().decode("utf-8", "replace")))
        elif opt == b"type":
            preds.append(_type_is(_client_type(a.next())))
        elif opt == b"user":
            preds.append(_field_is("user", a.next().decode("utf-8", "surrogateescape")))
        elif opt == b"skipme":
            val = a.next().lower()
            if val not in (b"yes", b"no"):
                raise Err(SYNTAX)
            skipme = val == b"yes"
        else:
            raise a.syntax_error()
    victims = [c for c in clients if all(p(c) for p in preds)]
    if skipme:
        victims = [c for c in victims if c is not ctx.client]
    _kill(ctx, victims)
    return len(victims)


def _field_is(name: str, value: Any) -> Callable[[Client], bool]:
    return lambda c: bool(getattr(c, name) == value)


def _type_is(kind: bytes) -> Callable[[Client], bool]:
    return lambda c: type_of(c) == kind


def _client_type(raw: bytes) -> bytes:
    kind = raw.lower()
    if kind not in (b"normal", b"master", b"replica", b"slave", b"pubsub"):
        raise Err(f"ERR Unknown client type '{raw.decode('utf-8', 'replace')}'")
    return b"replica" if kind == b"slave" else kind


def type_of(c: Client) -> bytes:
    """Redis's client types: a replica's link (repl/primary.py), a client in subscribed mode,
    or normal. (A replica's own link to its primary is not a client of its front.)"""
    if c.repl is not None:
        return b"replica"
    if c.subscribed():
        return b"pubsub"
    return b"normal"


def _kill(ctx: CommandContext, victims: list[Client]) -> None:
    for c in victims:
        if c is ctx.client:
            c.close_after_reply = True
        else:
            c.kill()


@_client_cmd("unblock", -3, "Unblock a client blocked in a blocking command from a different "
             "connection", "client-id:integer [TIMEOUT|ERROR]", since="5.0.0")
def client_unblock(ctx: CommandContext, args: list[bytes]) -> Any:
    """A client waiting in a Block (topicsrv/notify/blocks.py) gets its timeout reply, or
    `-UNBLOCKED ...` with ERROR, and leaves its lines (its turn passes on); 1, or 0 when it is
    not blocked (a claim waiting for its cohort's window is not a Block: 0)."""
    if len(args) > 2:
        raise Err(SYNTAX)
    error = False
    if len(args) == 2:
        reason = args[1].lower()
        if reason not in (b"timeout", b"error"):
            raise Err("ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR")
        error = reason == b"error"
    target = ctx.front.clients.get(parse_int(args[0]))
    hold = getattr(getattr(target, "session", None), "hold", None)
    if target is None or not target.blocked or not isinstance(hold, Block):
        return 0
    unblocked = Err("UNBLOCKED client unblocked via CLIENT UNBLOCK") if error else NOTHING
    return 1 if hold.unblock(unblocked) else 0


def _on_off(raw: bytes) -> bool:
    word = raw.lower()
    if word not in (b"on", b"off"):
        raise Err(SYNTAX)
    return word == b"on"


@_client_cmd("no-evict", 3, "Set client eviction mode for the current connection", "(ON|OFF)",
             since="7.0.0")
def client_no_evict(ctx: CommandContext, args: list[bytes]) -> Any:
    _on_off(args[0])  # clients are never evicted (no maxmemory-clients): both hold
    return Simple("OK")


@_client_cmd("no-touch", 3, "Controls whether commands sent by the client will alter the "
             "LRU/LFU of the keys they access.", "(ON|OFF)", since="7.2.0")
def client_no_touch(ctx: CommandContext, args: list[bytes]) -> Any:
    _on_off(args[0])  # reads never touch a topic's idle time (only writes do): both hold
    return Simple("OK")


@_client_cmd("pause", -3, "Stop processing commands from clients for some time",
             "timeout:integer [(WRITE|ALL)]", since="3.0.0")
def client_pause(ctx: CommandContext, args: list[bytes]) -> Any:
    ms = parse_int(args[0], "ERR timeout is not an integer or out of range")
    if ms < 0:
        raise Err("ERR timeout is negative")
    if len(args) > 2 or (len(args) == 2 and args[1].lower() not in (b"write", b"all")):
        raise Err(SYNTAX)
    raise Err("ERR CLIENT PAUSE is not supported: topicsrv has no replicas to fail over to")


@_client_cmd("unpause", 2, "Resume processing of clients that were paused", since="6.2.0")
def client_unpause(ctx: CommandContext, args: list[bytes]) -> Any:
    return Simple("OK")  # nothing is ever paused


@_client_cmd("reply", 3, "Instruct the server whether to reply to commands", "(ON|OFF|SKIP)",
             since="3.2.0")
def client_reply(ctx: CommandContext, args: list[bytes]) -> Any:
    mode = args[0].lower()
    if mode == b"on":
        ctx.client.reply_mode = REPLY_ON
    elif mode == b"off":
        ctx.client.reply_mode = REPLY_OFF  # this reply is the first one not sent
    elif mode == b"skip":
        if ctx.client.reply_mode != REPLY_OFF:  # Redis: SKIP while OFF changes nothing
            ctx.client.reply_mode = REPLY_SKIP_NEXT
    else:
        raise Err(SYNTAX)
    return Simple("OK")


@_client_cmd("tracking", -3, "Enable or disable server assisted client side caching support",
             "(ON|OFF) [REDIRECT:client-id:integer] [PREFIX:prefix:string...] [BCAST] [OPTIN] "
             "[OPTOUT] [NOLOOP]", since="6.0.0")
def client_tracking(ctx: CommandContext, args: list[bytes]) -> Any:
    if _on_off(args[0]):
        raise Err("ERR CLIENT TRACKING is not supported: topicsrv sends no invalidations")
    return Simple("OK")  # off: the state every connection is in


@_client_cmd("trackinginfo", 2, "Return information about server assisted client side caching "
             "for the current connection", since="6.2.0")
def client_trackinginfo(ctx: CommandContext, args: list[bytes]) -> Any:
    return {"flags": {b"off"}, "redirect": -1, "prefixes": []}


@_client_cmd("help", 2, "Show helpful text about the different subcommands", since="5.0.0")
def client_help(ctx: CommandContext, args: list[bytes]) -> Any:
    lines = [
        "CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "GETNAME", "    Return the name of the current connection.",
        "ID", "    Return the ID of the current connection.",
        "NO-EVICT (ON|OFF)", "    Accepted: clients are never evicted.",
        "NO-TOUCH (ON|OFF)", "    Accepted: reads never alter a key's idle time.",
        "REPLY (ON|OFF|SKIP)",
        "    Control the replies sent to the current connection.",
        "TRACKING OFF", "    Accepted (ON is not supported).",
        "TRACKINGINFO", "    Report tracking status (always off).",
        "UNPAUSE", "    Accepted (CLIENT PAUSE is not supported).",
        "INFO", "    Return information about the current client connection.",
        "KILL <ip:port>", "    Kill connection made from <ip:port>.",
        "KILL <option> <value> [<option> <value> [...]]",
        "    Kill connections. Options are: ID, TYPE, ADDR, LADDR, USER, SKIPME.",
        "UNBLOCK <clientid> [TIMEOUT|ERROR]",
        "    Unblock the specified blocked client.",
        "LIST [TYPE (NORMAL|MASTER|REPLICA|PUBSUB)] [ID <id> [<id> ...]]",
        "    Return information about client connections.",
        "SETINFO <LIB-NAME|LIB-VER> <value>", "    Set client library name or version.",
        "SETNAME <name>", "    Assign the name <name> to the current connection.",
        "HELP", "    Prints this help.",
    ]
    return [Simple(x) for x in lines]

