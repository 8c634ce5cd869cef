"""Redis 7 functions: FCALL, FCALL_RO and FUNCTION LOAD|LIST|DELETE|FLUSH|STATS|KILL|HELP
(DUMP and RESTORE refused, as DUMP is: topicsrv has no RDB format).

The libraries are topicsrv/scripting/functions.py; running one is scripts.py's path (Rules
1-4 there). Rule 1: every change of the library set is stored before it is acknowledged
(topicsrv/storage/functions.py), so functions survive a restart; a store that fails (a full
disk) answers the error and leaves the libraries in memory as they were, as on disk.
Rule 2: FCALL_RO refuses a function without the `no-writes` flag; a `no-writes` function runs
read-only under FCALL too.
Rule 3: while the stored file is damaged (storage/functions.py Rule 3, Storage.damaged) no
library is loaded, and FCALL, FCALL_RO, FUNCTION LOAD, DELETE and LIST answer an error naming
the file rather than act on an empty set that would overwrite it; FUNCTION FLUSH replaces it
with an empty set (its bytes kept beside it) and everything works again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, TypeVar

from topicsrv.errors import TopicsError
from topicsrv.resp.commands.admin import DUMP_REFUSED
from topicsrv.resp.commands.base import (
    CommandContext,
    Err,
    Simple,
    command,
    container,
    subcommand_syntax,
)
from topicsrv.resp.commands.scripts import (
    EVAL_FLAGS,
    kill,
    new_run,
    refuse_flagged,
    run_script,
    split_keys,
    work,
)
from topicsrv.scripting.functions import FLAGS, Libraries
from topicsrv.scripting.lua import ScriptError
from topicsrv.scripting.service import scripting_of
from topicsrv.storage import functions as stored

log = logging.getLogger("topicsrv.scripting")
T = TypeVar("T")
OK = Simple("OK")
FUNCTION_HELP = [
    "FUNCTION <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "LOAD [REPLACE] <FUNCTION CODE>",
    "    Create a new library with the given library name and code.",
    "DELETE <LIBRARY NAME>",
    "    Delete the given library.",
    "LIST [LIBRARYNAME PATTERN] [WITHCODE]",
    "    Return general information on all the libraries:",
    "    * Library name",
    "    * The engine used to run the Library",
    "    * Library description",
    "    * Functions list",
    "    * Library code (if WITHCODE is given)",
    "    It also possible to get only function that matches a pattern using LIBRARYNAME",
    "    argument.",
    "STATS",
    "    Return information about the current function running:",
    "    * Function name",
    "    * Command used to run the function",
    "    * Duration in MS that the function is running",
    "    If no function is running, return nil",
    "    In addition, returns a list of available engines.",
    "KILL",
    "    Kill the current running function.",
    "FLUSH [ASYNC|SYNC]",
    "    Delete all the libraries.",
    "    When called without the optional mode argument, the behavior is determined by the",
    "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
    "    * ASYNC: Asynchronously flush the libraries.",
    "    * SYNC: Synchronously flush the libraries.",
    "DUMP",
    "    Return a serialized payload representing the current libraries, can be restored "
    "using FUNCTION RESTORE command",
    "RESTORE <PAYLOAD> [FLUSH|APPEND|REPLACE]",
    "    Restore the libraries represented by the given payload, it is possible to give a "
    "restore policy to",
    "    control how to handle existing libraries (default APPEND):",
    "    * FLUSH: delete all existing libraries.",
    "    * APPEND: appends the restored libraries to the existing libraries. On collision, "
    "abort.",
    "    * REPLACE: appends the restored libraries to the existing libraries, On collision, "
    "replace the old",
    "      libraries with the new libraries (notice that even on this option there is a "
    "chance of failure",
    "      in case of functions name collision with another library).",
    "HELP",
    "    Prints this help.",
]


def _refuse_damaged(ctx: CommandContext) -> None:
    """Rule 3."""
    storage = ctx.server.storage
    problem = None if storage is None else storage.damaged.get(stored.NAME)
    if problem is not None:
        raise Err(f"ERR {stored.NAME} in the data dir is damaged ({problem}): no function "
                  f"library is loaded; {stored.REPAIR} replaces it with an empty set")


def _not_stored(exc: OSError) -> TopicsError:
    reason = exc.strerror or str(exc)
    return TopicsError("insufficient_storage", f"the function libraries could not be stored in "
                       f"{stored.NAME} ({reason}); nothing was changed", {"reason": reason})


def _stored_change(ctx: CommandContext, change: Callable[[Libraries], T]) -> T:
    """Rule 1: `change` the libraries, then store them; when the store fails they are put
    back as they were (the Lua state too: FLUSH replaces it) and the command answers 507's
    text."""
    _refuse_damaged(ctx)
    sc = scripting_of(ctx.server)
    libs = sc.libraries
    state, libraries, functions = libs.state, dict(libs.libraries), dict(libs.functions)
    try:
        out = change(libs)
    except ScriptError as e:
        raise Err(e.text) from None
    try:
        sc.persist()
    except OSError as exc:
        libs.state = state
        libs.libraries.clear()
        libs.libraries.update(libraries)
        libs.functions.clear()
        libs.functions.update(functions)
        log.error("FUNCTION: %s could not be written (%s); the libraries are as they were",
                  stored.NAME, exc)
        raise _not_stored(exc) from None
    return out


def _fcall(ctx: CommandContext, args: list[bytes], read_only: bool, name: str) -> Any:
    _refuse_damaged(ctx)
    libs = scripting_of(ctx.server).libraries
    fn = libs.find(args[0].decode("latin-1"))
    if fn is None:
        raise Err("ERR Function not found")
    refuse_flagged(ctx, fn.flags)
    keys, argv = split_keys(args[1:], "ERR Bad number of keys provided")
    run = new_run(ctx, fn.name, True, read_only, fn.flags)
    return run_script(ctx, run, [name.encode(), *args], work(ctx, name, libs.state, run, fn.callback, keys, argv, True))


@command("fcall", -3, EVAL_FLAGS, 0, 0, 0, "scripting", "Invokes a function.", "7.0.0",
         syntax="function:string numkeys:integer [key:key...] [arg:string...]")
def fcall(ctx: CommandContext, args: list[bytes]) -> Any:
    return _fcall(ctx, args, False, "fcall")


@command("fcall_ro", -3, [*EVAL_FLAGS, "readonly"], 0, 0, 0, "scripting",
         "Invokes a read-only function.", "7.0.0",
         syntax="function:string numkeys:integer [key:key...] [arg:string...]")
def fcall_ro(ctx: CommandContext, args: list[bytes]) -> Any:
    return _fcall(ctx, args, True, "fcall_ro")


container("function", "scripting", "A container for function commands", "7.0.0")


def _fn(name: str, arity: int, flags: list[str], summary: str, syntax: str = "") -> Any:
    return command(f"function|{name}", arity, flags, 0, 0, 0, "scripting", summary, "7.0.0",
                   syntax=syntax)


@_fn("load", -3, ["write", "denyoom", "noscript"], "Creates a library.",
     "[REPLACE] function-code:string")
def function_load(ctx: CommandContext, args: list[bytes]) -> Any:
    replace = False
    if len(args) > 1:
        if len(args) != 2 or args[0].lower() != b"replace":
            raise Err(f"ERR Unknown option given: {args[0].decode('latin-1')}")
        replace = True
    return _stored_change(ctx, lambda libs: libs.load(args[-1], replace))


@_fn("delete", 3, ["write", "noscript"], "Deletes a library and its functions.",
     "library-name:string")
def function_delete(ctx: CommandContext, args: list[bytes]) -> Any:
    _stored_change(ctx, lambda libs: libs.delete(args[0].decode("latin-1")))
    return OK


@_fn("flush", -2, ["write", "noscript"], "Deletes all libraries and functions.",
     "[(ASYNC|SYNC)]")
def function_flush(ctx: CommandContext, args: list[bytes]) -> Any:
    if len(args) > 1:
        raise subcommand_syntax("function", "flush")
    if args and args[0].lower() not in (b"async", b"sync"):
        raise Err("ERR FUNCTION FLUSH only supports SYNC|ASYNC option")
    storage = ctx.server.storage
    if storage is not None and stored.NAME in storage.damaged:  # Rule 3
        try:
            copy = stored.replace_damaged(ctx.server.config.data_dir)
        except OSError as exc:
            raise _not_stored(exc) from None
        del storage.damaged[stored.NAME]
        sc = scripting_of(ctx.server)
        sc.libraries.flush()
        sc.stored = []
        log.warning("FUNCTION FLUSH replaced the damaged %s with an empty set (its bytes are "
                    "kept as %s)", stored.NAME, copy)
        return OK
    _stored_change(ctx, lambda libs: libs.flush())
    return OK


def _flags(ctx: CommandContext, flags: tuple[str, ...]) -> Any:
    """Redis's flag order (its flag table's) under RESP2; a set under RESP3."""
    ordered = [Simple(x) for x in FLAGS if x in flags]
    return set(ordered) if ctx.resp3 else ordered


def _glob(pattern: bytes, text: bytes) -> bool:
    from fnmatch import fnmatchcase

    return fnmatchcase(text.decode("latin-1"), pattern.decode("latin-1"))


@_fn("list", -2, ["noscript"], "Returns information about all libraries.",
     "[LIBRARYNAME:library-name-pattern:string] [WITHCODE]")
def function_list(ctx: CommandContext, args: list[bytes]) -> Any:
    pattern: bytes | None = None
    withcode = False
    i = 0
    while i < len(args):
        word = args[i].lower()
        if word == b"withcode" and not withcode:
            withcode = True
        elif word == b"libraryname" and pattern is None:
            if i + 1 >= len(args):
                raise Err("ERR library name argument was not given")
            pattern = args[i + 1]
            i += 1
        else:
            raise Err(f"ERR Unknown argument {args[i].decode('latin-1')}")
        i += 1
    _refuse_damaged(ctx)
    out = []
    for lib in scripting_of(ctx.server).libraries.libraries.values():
        if pattern is not None and not _glob(pattern, lib.name.encode("latin-1")):
            continue
        entry: dict[str, Any] = {
            "library_name": lib.name, "engine": "LUA",
            "functions": [{"name": f.name, "description": f.description,
                           "flags": _flags(ctx, f.flags)} for f in lib.functions.values()],
        }
        if withcode:
            entry["library_code"] = lib.code
        out.append(entry)
    return out


@_fn("stats", 2, ["noscript", "allow_busy"], "Returns information about a function during "
     "execution.")
def function_stats(ctx: CommandContext, args: list[bytes]) -> Any:
    sc = scripting_of(ctx.server)
    running: Any = None
    run, job = sc.running, sc.runner.current
    if run is not None and run.function and job is not None:
        running = {"name": run.name, "command": sc.running_command,
                   "duration_ms": int((time.monotonic() - job.started) * 1000)}
    libs = sc.libraries
    return {"running_script": running,
            "engines": {"LUA": {"libraries_count": len(libs.libraries),
                                "functions_count": len(libs.functions)}}}


@_fn("kill", 2, ["noscript", "allow_busy"], "Terminates a function during execution.")
def function_kill(ctx: CommandContext, args: list[bytes]) -> Any:
    return kill(ctx, True)


@_fn("help", 2, ["loading", "stale"], "Returns helpful text about the different subcommands.")
def function_help(ctx: CommandContext, args: list[bytes]) -> Any:
    return [Simple(line) for line in FUNCTION_HELP]


@_fn("dump", 2, ["noscript"], "Dumps all libraries into a serialized binary payload "
     "(topicsrv: refused).")
def function_dump(ctx: CommandContext, args: list[bytes]) -> Any:
    raise Err(DUMP_REFUSED)


@_fn("restore", -3, ["write", "denyoom", "noscript"], "Restores all libraries from a payload "
     "(topicsrv: refused).", "serialized-value:string [(FLUSH|APPEND|REPLACE)]")
def function_restore(ctx: CommandContext, args: list[bytes]) -> Any:
    """Its arguments are checked as Redis 7.0 checks them; then refused (no RDB payload)."""
    if len(args) > 2:
        raise subcommand_syntax("function", "restore")
    if len(args) == 2 and args[1].lower() not in (b"flush", b"append", b"replace"):
        raise Err("ERR Wrong restore policy given, value should be either FLUSH, APPEND or "
                  "REPLACE.")
    raise Err(DUMP_REFUSED)
