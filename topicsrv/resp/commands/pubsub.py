"""Pub/sub commands: SUBSCRIBE UNSUBSCRIBE PSUBSCRIBE PUNSUBSCRIBE SSUBSCRIBE SUNSUBSCRIBE
PUBLISH SPUBLISH PUBSUB *, on the server's one bus (topicsrv/bus/).

Rule 1 (reply shapes, redis-server 7.0's): (P|S)(UN)SUBSCRIBE answer one frame per channel
(`[kind, channel, count]`, an array in RESP2, a push in RESP3), spliced as one Pushed reply (sent even under CLIENT REPLY OFF);
count is channels + patterns for the plain and pattern kinds, shard channels for the shard
kind. An unsubscribe with no argument leaves every subscription of its kind, in subscription
order (redis-server's order is its dict's), and answers `[kind, nil, count]` when there was none.
Rule 2 (subscribed mode): in RESP2 a subscribed client may run only (P|S)SUBSCRIBE,
(P|S)UNSUBSCRIBE, PING, QUIT and RESET (dispatch.py refuses the rest with Redis's text);
its PING answers `["pong", message-or-""]`. RESP3 has no subscribed mode.
Rule 3 (permissions): channels are open to every user (`&*`: the users are fixed,
topicsrv/resp/acl.py); the `reader` user may subscribe but not PUBLISH/SPUBLISH.
Rule 4: PUBLISH answers the number of deliveries (topicsrv/bus/bus.py Rule 3).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from topicsrv.bus import Bus
from topicsrv.engine.glob import PatternTooLong
from topicsrv.resp.commands.base import (
    CommandContext,
    Err,
    Push,
    Pushed,
    Simple,
    command,
    container,
    subcommand_syntax,
)
from topicsrv.resp.encoder import encode
from topicsrv.resp.pubsub import RespSubscriber, subscriber

FLAGS_SUB = ["pubsub", "noscript", "loading", "stale"]
FLAGS_PUB = ["pubsub", "loading", "stale", "fast"]

Join = Callable[[Bus, RespSubscriber, bytes], bool]


def _frames(ctx: CommandContext, kind: bytes, names: list[bytes], act: Join,
            count: Callable[[RespSubscriber], int]) -> Pushed:
    """One `[kind, name, count]` frame per name, acting on each in turn (Rule 1)."""
    out = bytearray()
    resp3 = ctx.client.protocol == 3
    bus = ctx.server.bus
    sub = subscriber(ctx.client)
    for name in names:
        try:
            act(bus, sub, name)
        except PatternTooLong as e:
            raise Err(f"ERR {e}") from None
        encode(out, Push([kind, name, count(sub)]), resp3)
    return Pushed(out)


def _leave(ctx: CommandContext, kind: bytes, names: list[bytes], own: str, act: Join,
           count: Callable[[RespSubscriber], int]) -> Pushed:
    sub = subscriber(ctx.client)
    if not names:
        names = list(getattr(sub, own))
        if not names:
            out = bytearray()
            encode(out, Push([kind, None, count(sub)]), ctx.client.protocol == 3)
            return Pushed(out)
    return _frames(ctx, kind, names, act, count)


def _plain(sub: RespSubscriber) -> int:
    return sub.count()


def _shard(sub: RespSubscriber) -> int:
    return len(sub.shard_channels)


def _cmd(name: str, arity: int, flags: list[str], summary: str, syntax: str,
         since: str = "2.0.0", keys: tuple[int, int, int] = (0, 0, 0)) -> Any:
    return command(name, arity, flags, keys[0], keys[1], keys[2], "pubsub", summary, since,
                   syntax=syntax)


@_cmd("subscribe", -2, FLAGS_SUB, "Listen for messages published to the given channels",
      "channel:string...")
def subscribe(ctx: CommandContext, args: list[bytes]) -> Any:
    return _frames(ctx, b"subscribe", args, Bus.subscribe, _plain)


@_cmd("unsubscribe", -1, FLAGS_SUB, "Stop listening for messages posted to the given channels",
      "[channel:string...]")
def unsubscribe(ctx: CommandContext, args: list[bytes]) -> Any:
    return _leave(ctx, b"unsubscribe", args, "channels", Bus.unsubscribe, _plain)


@_cmd("psubscribe", -2, FLAGS_SUB, "Listen for messages published to channels matching the "
      "given patterns", "pattern:pattern...")
def psubscribe(ctx: CommandContext, args: list[bytes]) -> Any:
    return _frames(ctx, b"psubscribe", args, Bus.psubscribe, _plain)


@_cmd("punsubscribe", -1, FLAGS_SUB, "Stop listening for messages posted to channels matching "
      "the given patterns", "[pattern:pattern...]")
def punsubscribe(ctx: CommandContext, args: list[bytes]) -> Any:
    return _leave(ctx, b"punsubscribe", args, "patterns", Bus.punsubscribe, _plain)


@_cmd("ssubscribe", -2, FLAGS_SUB, "Listen for messages published to the given shard channels",
      "shardchannel:string...", "7.0.0", (1, -1, 1))
def ssubscribe(ctx: CommandContext, args: list[bytes]) -> Any:
    return _frames(ctx, b"ssubscribe", args, Bus.ssubscribe, _shard)


@_cmd("sunsubscribe", -1, FLAGS_SUB, "Stop listening for messages posted to the given shard "
      "channels", "[shardchannel:string...]", "7.0.0", (1, -1, 1))
def sunsubscribe(ctx: CommandContext, args: list[bytes]) -> Any:
    return _leave(ctx, b"sunsubscribe", args, "shard_channels", Bus.sunsubscribe, _shard)


@_cmd("publish", 3, FLAGS_PUB, "Post a message to a channel", "channel:string message:string")
def publish(ctx: CommandContext, args: list[bytes]) -> Any:
    return ctx.server.bus.publish(args[0], args[1])


@_cmd("spublish", 3, FLAGS_PUB, "Post a message to a shard channel",
      "shardchannel:string message:string", "7.0.0", (1, 1, 1))
def spublish(ctx: CommandContext, args: list[bytes]) -> Any:
    return ctx.server.bus.spublish(args[0], args[1])


# ---- PUBSUB --------------------------------------------------------------------------------

container("pubsub", "pubsub", "A container for Pub/Sub commands", "2.8.0")

HELP = [
    "PUBSUB <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CHANNELS [<pattern>]",
    "    Return the currently active channels matching a <pattern> (default: '*').",
    "NUMPAT",
    "    Return number of subscriptions to patterns.",
    "NUMSUB [<channel> ...]",
    "    Return the number of subscribers for the specified channels, excluding",
    "    pattern subscriptions(default: no channels).",
    "SHARDCHANNELS [<pattern>]",
    "    Return the currently active shard level channels matching a <pattern> "
    "(default: '*').",
    "SHARDNUMSUB [<shardchannel> ...]",
    "    Return the number of subscribers for the specified shard level channel(s)",
    "HELP",
    "    Prints this help.",
]


def _sub(name: str, arity: int, summary: str, syntax: str = "", since: str = "2.8.0") -> Any:
    return command(f"pubsub|{name}", arity, ["pubsub", "loading", "stale"], 0, 0, 0, "pubsub",
                   summary, since, syntax=syntax)


def _channels(ctx: CommandContext, args: list[bytes], shard: bool) -> Any:
    if len(args) > 1:
        name = "SHARDCHANNELS" if shard else "CHANNELS"
        raise subcommand_syntax("pubsub", name)
    try:
        return ctx.server.bus.active_channels(args[0] if args else None, shard)
    except PatternTooLong as e:
        raise Err(f"ERR {e}") from None


def _numsub(ctx: CommandContext, args: list[bytes], shard: bool) -> Any:
    bus = ctx.server.bus
    out: list[Any] = []
    for ch in args:
        out += [ch, bus.numsub(ch, shard)]
    return out


@_sub("channels", -2, "List active channels", "[pattern:pattern]")
def pubsub_channels(ctx: CommandContext, args: list[bytes]) -> Any:
    return _channels(ctx, args, False)


@_sub("shardchannels", -2, "List active shard channels", "[pattern:pattern]", "7.0.0")
def pubsub_shardchannels(ctx: CommandContext, args: list[bytes]) -> Any:
    return _channels(ctx, args, True)


@_sub("numsub", -2, "Get the count of subscribers for channels", "[channel:string...]")
def pubsub_numsub(ctx: CommandContext, args: list[bytes]) -> Any:
    return _numsub(ctx, args, False)


@_sub("shardnumsub", -2, "Get the count of subscribers for shard channels",
      "[shardchannel:string...]", "7.0.0")
def pubsub_shardnumsub(ctx: CommandContext, args: list[bytes]) -> Any:
    return _numsub(ctx, args, True)


@_sub("numpat", 2, "Get the count of unique patterns pattern subscriptions")
def pubsub_numpat(ctx: CommandContext, args: list[bytes]) -> Any:
    return ctx.server.bus.numpat()


@_sub("help", 2, "Show helpful text about the different subcommands", since="6.2.0")
def pubsub_help(ctx: CommandContext, args: list[bytes]) -> Any:
    return [Simple(line) for line in HELP]
