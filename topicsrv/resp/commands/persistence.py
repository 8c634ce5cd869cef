"""Persistence commands: SAVE, BGSAVE, LASTSAVE, and INFO's persistence section.

Rule 1: a "save" here is a checkpoint (storage/checkpoint.py): segments sealed, the keyspace
snapshot written by a forked child, as Redis's (storage/forksave.py; or in parts while the
server serves, `--checkpoint-fork no`: storage/keyspacesave.py), checkpoint.json
replaced, the WAL trimmed. Every acknowledged write is durable by its class whether or not a
save runs; a save bounds the next start's replay. BGSAVE asks for one now and answers at once;
SAVE runs one and answers when it is on disk (the server keeps serving meanwhile: unlike
Redis's SAVE it blocks only its caller); LASTSAVE is the unix time of the last one written.
Rule 2: a server started with `--no-storage` keeps nothing on disk: SAVE and BGSAVE answer an
error saying so.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from topicsrv.resp.commands.base import SYNTAX, CommandContext, Err, Simple, command

if TYPE_CHECKING:
    from topicsrv.storage.store import Storage

NO_STORAGE = "ERR this server keeps nothing on disk (started with --no-storage)"


def _storage(ctx: CommandContext) -> Storage:
    storage = ctx.server.storage
    if storage is None:
        raise Err(NO_STORAGE)
    return storage


@command("save", 1, ["admin", "noscript", "no_async_loading", "no_multi"], 0, 0, 0, "server",
         "Synchronously saves the database(s) to disk", "1.0.0")
async def save(ctx: CommandContext, args: list[bytes]) -> Any:
    storage = _storage(ctx)
    try:
        await storage.checkpoint()
    except OSError as exc:
        raise Err(f"ERR the checkpoint failed: {exc}") from None
    return Simple("OK")


@command("bgsave", -1, ["admin", "noscript", "no_async_loading"], 0, 0, 0, "server",
         "Asynchronously saves the database(s) to disk", "1.0.0", syntax="[SCHEDULE]")
def bgsave(ctx: CommandContext, args: list[bytes]) -> Any:
    if len(args) > 1 or (args and args[0].lower() != b"schedule"):
        raise Err(SYNTAX)
    storage = _storage(ctx)
    if not storage.request(schedule=bool(args)):
        raise Err("ERR Background save already in progress")
    return Simple("Background saving scheduled" if storage.ckpt_lock.locked() else
                  "Background saving started")


@command("lastsave", 1, ["loading", "stale", "fast"], 0, 0, 0, "server",
         "Returns the Unix timestamp of the last successful save to disk", "1.0.0")
def lastsave(ctx: CommandContext, args: list[bytes]) -> Any:
    storage = ctx.server.storage
    return storage.saves.last_save_time if storage is not None else int(ctx.server.started_at)


def persistence_section(ctx: CommandContext) -> list[tuple[str, Any]]:
    """INFO persistence: checkpoints as Redis's RDB saves, the WAL as its AOF."""
    storage = ctx.server.storage
    aof = 1 if storage is not None else 0
    if storage is not None:
        saves = storage.saves
        rdb: list[tuple[str, Any]] = [
            ("rdb_changes_since_last_save", 0), ("rdb_bgsave_in_progress", int(saves.in_progress)),
            ("rdb_last_save_time", saves.last_save_time),
            ("rdb_last_bgsave_status", "ok" if saves.last_ok else "err"),
            ("rdb_last_bgsave_time_sec", saves.last_seconds),
            ("rdb_current_bgsave_time_sec",
             int(time.monotonic() - saves.started) if saves.in_progress else -1),
            ("rdb_saves", saves.saves), ("rdb_last_cow_size", saves.cow_bytes),
        ]
    else:
        rdb = [("rdb_changes_since_last_save", 0), ("rdb_bgsave_in_progress", 0),
               ("rdb_last_save_time", int(ctx.server.started_at)), ("rdb_last_bgsave_status", "ok"),
               ("rdb_last_bgsave_time_sec", -1), ("rdb_current_bgsave_time_sec", -1),
               ("rdb_saves", 0), ("rdb_last_cow_size", 0)]
    return [
        ("loading", 0 if ctx.server.ready else 1), ("async_loading", 0), *rdb,
        ("aof_enabled", aof), ("aof_rewrite_in_progress", 0),
        ("aof_rewrite_scheduled", 0), ("aof_last_bgrewrite_status", "ok"), ("aof_rewrites", 0),
        ("aof_last_write_status", "ok"), ("module_fork_in_progress", 0),
        ("keyspace_durability", ctx.server.config.keyspace_durability if storage is not None else "none"),
    ]
