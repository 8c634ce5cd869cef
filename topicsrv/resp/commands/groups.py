"""XGROUP: the consumer-group lifecycle (CREATE, SETID, DESTROY, CREATECONSUMER, DELCONSUMER,
HELP). Delivery (XREADGROUP, XACK, XPENDING) is in groups_ack.py, XCLAIM/XAUTOCLAIM in
groups_claim.py, XINFO GROUPS|CONSUMERS in groups_info.py; shared helpers in group_args.py.

Rule 1: a handler parses ALL its arguments (in redis-server's order, with its error texts)
before it touches state; the state change is one `Engine.group_*` call, which changes the
group and journals the change in one step (a definition change survives a crash).
Rule 2: `$`/ID positions follow group_args.py Rule 1; `$` on an empty stream names its head.
"""

from __future__ import annotations

from typing import Any

from topicsrv.engine import groups as eg
from topicsrv.engine.log.topic import Topic
from topicsrv.resp import ids
from topicsrv.resp.args import Args
from topicsrv.resp.commands.base import (
    CommandContext,
    Err,
    Simple,
    committed,
    container,
    key_name,
    parse_int,
    subcommand_syntax,
)
from topicsrv.resp.commands.group_args import command, stream, text

NO_KEY = ("ERR The XGROUP subcommand requires the key to exist. Note that for CREATE you may "
          "want to use the MKSTREAM option to create an empty stream automatically.")
BUSYGROUP = "BUSYGROUP Consumer Group name already exists"
ENTRIESREAD_RANGE = "ERR value for ENTRIESREAD must be positive or -1"
XGROUP_HELP = [
    "XGROUP <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CREATE <key> <groupname> <id|$> [option]",
    "    Create a new consumer group. Options are:",
    "    * MKSTREAM",
    "      Create the empty stream if it does not exist.",
    "    * ENTRIESREAD entries_read",
    "      Set the group's entries_read counter (internal use).",
    "CREATECONSUMER <key> <groupname> <consumer>",
    "    Create a new consumer in the specified group.",
    "DELCONSUMER <key> <groupname> <consumer>",
    "    Remove the specified consumer.",
    "DESTROY <key> <groupname>",
    "    Remove the specified group.",
    "SETID <key> <groupname> <id|$> [ENTRIESREAD entries_read]",
    "    Set the current group ID and entries_read counter.",
    "HELP",
    "    Prints this help.",
]


def group_position(topic: Topic | None, raw: bytes) -> tuple[int, int]:
    """(last_seq, last_ms) for XGROUP CREATE/SETID `$`/ID (`-` is `0-0`, as in Redis)."""
    if raw == b"-":
        raw = b"0"
    if raw == b"$":
        if topic is None or topic.head_seq < topic.seq_base:
            return (topic.head_seq if topic else 0), 0
        return topic.head_seq, topic.last_ts
    sid = ids.parse_id(raw, 0)
    if topic is not None and ids.mapped(topic) and (sid.ms or sid.seq):
        return ids.id_cursor(topic, (sid.ms, sid.seq)), sid.ms
    if sid.seq > 0:
        return sid.seq, sid.ms
    if sid.ms == 0:
        return (max(0, topic.front - 1) if topic else 0), 0
    return ids.time_floor(topic, sid.ms) - 1, sid.ms


def parse_entries_read(raw: bytes) -> int | None:
    n = parse_int(raw)
    if n < -1:
        raise Err(ENTRIESREAD_RANGE)
    return None if n == -1 else n


# ---- XGROUP ---------------------------------------------------------------------------------

container("xgroup", "stream", "A container for consumer groups commands.", "5.0.0")


@command("xgroup|create", -5, ["write", "denyoom"], 2, 2, 1, "Creates a consumer group.",
         "key:key group:string (id:string|$) [MKSTREAM] [ENTRIESREAD:entries-read:integer]")
def xgroup_create(ctx: CommandContext, args: list[bytes]) -> Any:
    key, name, raw_id, opts = args[0], args[1], args[2], args[3:]
    if len(args) > 6:
        raise subcommand_syntax("xgroup", "CREATE")
    mkstream, entries_read = False, None
    a = Args(opts)
    while a:
        if a.flag(b"mkstream"):
            mkstream = True
        elif a.option(b"entriesread"):
            entries_read = parse_entries_read(a.next())
        else:
            raise subcommand_syntax("xgroup", "CREATE")
    topic = stream(ctx, key)
    if raw_id != b"$":  # (`-` is refused here, as Redis 7.0 does; SETID takes it)
        ids.parse_id(raw_id, 0)
    if topic is None:
        if not mkstream:
            raise Err(NO_KEY)
        topic = ctx.engine.put_topic(key_name(key), {})[0]
    last_seq, last_ms = group_position(topic, raw_id)
    group, token = ctx.engine.group_create(topic, text(name), last_seq, last_ms, entries_read)
    if group is None:
        raise Err(BUSYGROUP)
    return committed(token, Simple("OK"))


@command("xgroup|setid", -5, ["write"], 2, 2, 1, "Sets the last-delivered ID of a consumer group.",
         "key:key group:string (id:string|$) [ENTRIESREAD:entries-read:integer]")
def xgroup_setid(ctx: CommandContext, args: list[bytes]) -> Any:
    key, name, raw_id = args[0], args[1], args[2]
    entries_read = None
    if len(args) == 5 and args[3].upper() == b"ENTRIESREAD":
        entries_read = parse_entries_read(args[4])
    elif len(args) != 3:
        raise subcommand_syntax("xgroup", "SETID")
    topic, group = _existing_group(ctx, key, name)
    if raw_id not in (b"$", b"-"):
        ids.parse_id(raw_id, 0)
    last_seq, last_ms = group_position(topic, raw_id)
    token = ctx.engine.group_setid(topic, group, last_seq, last_ms, entries_read)
    return committed(token, Simple("OK"))


def _existing_group(ctx: CommandContext, key: bytes, name: bytes) -> tuple[Topic, eg.Group]:
    topic = stream(ctx, key)
    if topic is None:
        raise Err(NO_KEY)
    group = eg.find(topic, text(name))
    if group is None:
        raise Err(f"NOGROUP No such consumer group '{text(name)}' for key name '{text(key)}'")
    return topic, group


@command("xgroup|destroy", 4, ["write"], 2, 2, 1, "Destroys a consumer group.",
         "key:key group:string")
def xgroup_destroy(ctx: CommandContext, args: list[bytes]) -> Any:
    topic = stream(ctx, args[0])
    if topic is None:
        raise Err(NO_KEY)
    ok, token = ctx.engine.group_destroy(topic, text(args[1]))
    if not ok:
        return 0
    ctx.server.notifier.changed(topic.name)  # blocked XREADGROUPs wake and answer NOGROUP
    return committed(token, 1)


@command("xgroup|createconsumer", 5, ["write", "denyoom"], 2, 2, 1,
         "Creates a consumer in a consumer group.", "key:key group:string consumer:string", "6.2.0")
def xgroup_createconsumer(ctx: CommandContext, args: list[bytes]) -> Any:
    topic, group = _existing_group(ctx, args[0], args[1])
    ok, token = ctx.engine.group_create_consumer(topic, group, text(args[2]))
    if not ok:
        return 0
    return committed(token, 1)


@command("xgroup|delconsumer", 5, ["write"], 2, 2, 1, "Deletes a consumer from a consumer group.",
         "key:key group:string consumer:string")
def xgroup_delconsumer(ctx: CommandContext, args: list[bytes]) -> Any:
    topic, group = _existing_group(ctx, args[0], args[1])
    pending, token = ctx.engine.group_delete_consumer(topic, group, text(args[2]))
    return committed(token, pending)


@command("xgroup|help", 2, ["loading", "stale"], 0, 0, 0,
         "Returns helpful text about the different subcommands.", "")
def xgroup_help(ctx: CommandContext, args: list[bytes]) -> Any:
    return [Simple(line) for line in XGROUP_HELP]
