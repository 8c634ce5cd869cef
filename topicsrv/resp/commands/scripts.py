"""Scripting: EVAL, EVALSHA, EVAL_RO, EVALSHA_RO and SCRIPT LOAD|EXISTS|FLUSH|KILL|HELP, and
the bridge every script (and function: functions.py) uses to call commands.

The Lua side (sandbox, conversions, the runner) is topicsrv/scripting/.

Rule 1 (one dispatch): `redis.call` runs its command through `dispatch.invoke`, the fronts'
own way to a handler (dispatch.py Rule 13), as a client of its own with the caller's ACL user
and the script's `setresp` protocol, with `nowait` (a blocking command answers at once, as
Redis runs them from scripts). Before it, the checks a call from a script gets, in Redis's
order and texts: unknown command, arity (a container without a known subcommand included),
`noscript` commands (MULTI/EXEC/WATCH/SUBSCRIBE/EVAL...), the calling user's permission
(acl.py Rule 5), writes from a read-only script, maxmemory (below), a write on a replica or
short of good replicas (dispatch.py Rule 11). The dispatcher's other checks cannot apply to
the script's client (authenticated, never in MULTI or subscribed, never answered BUSY).
Rule 2 (atomic, topicsrv/scripting/runner.py): the script runs inline on the loop thread (in
a greenlet) and every command it calls runs there while nothing else runs; past
busy-reply-threshold others read -BUSY and SCRIPT KILL may stop it if it wrote nothing.
Rule 3 (durable as a reply, one commit group): the commit tokens of every write of a script are
gathered (the writes are one commit group, topicsrv/scripting/service.py Rule 3); the
script's reply goes out only once all of them are durable (an fsync-class write inside a
script is acknowledged only on disk), and a failed commit turns the reply into its error.
Rule 4: a script's reply is encoded for the caller's protocol by the Lua side, bounded by the
client output limit; a top-level error reply stays an error (INFO errorstats counts it).
Rule 5 (stats, as Redis 7.0's scriptCall): a command the script rules refuse counts a rejected
call of that command (commandstats); every error a `redis.call`/`pcall` gets is counted in
errorstats when it happens, even if the script swallows it, and a script whose reply is that
error (raised or returned) is not counted again (`CountedErr`, scripting/lua.py Rule 5).
Rule 6 (script flags: a `#!lua flags=...` shebang, or a function's flags): without a shebang
an EVAL runs in Redis's compatibility mode (EVAL_RO is read-only, its writes over maxmemory
are refused one by one); with one, `no-writes` makes the script read-only (and EVAL_RO
refuses a script without it), and a script that may write and lacks `allow-oom` is refused
before it runs when the server is over maxmemory; `allow-oom` lets its writes pass. A script
that may write is refused before it runs on a replica (READONLY) and short of good replicas
(NOREPLICAS), as a write command. A
script's writes over maxmemory are refused only until its first write (it cannot stop half
way), as Redis's scriptVerifyOOM.
Rule 7 (compiled, buildinfo.HOT_MODULES): every EVALSHA and every `redis.call` runs through
this module; what waits (a busy script's end, the commit of its writes) is async and lives
in script_waits.py.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Collection
from typing import Any

from topicsrv.engine.keyspace.values import parse_i64
from topicsrv.memory import OOM_MESSAGE
from topicsrv.resp import acl
from topicsrv.resp.commands.base import (
    ERROR_STATS,
    NOT_INT,
    Client,
    CommandContext,
    CountedErr,
    Err,
    Pending,
    Raw,
    Refused,
    Simple,
    command,
    container,
    parse_int,
)
from topicsrv.resp.commands.script_waits import Tokens, finish_later
from topicsrv.resp.commands.server import SETTERS, parse_count
from topicsrv.resp.dispatch import (
    count_call,
    count_rejected,
    find,
    invoke,
    is_awaitable,
    write_refused,
)
from topicsrv.resp.encoder import encode
from topicsrv.scripting.convert import ReplyTooBig
from topicsrv.scripting.functions import FLAGS
from topicsrv.scripting.lua import PLAIN, Run, ScriptError
from topicsrv.scripting.service import scripting_of
from topicsrv.splitargs import split_args

OK = Simple("OK")
OOM_TEXT = f"OOM {OOM_MESSAGE}"
NO_WRITES = "ERR Write commands are not allowed from read-only scripts."
# Redis 7.0's text (script.c scriptVerifyACL): ERR, not NOPERM, inside a script.
SCRIPT_NOPERM = b"ERR The user executing the script can't run this command or subcommand"
# the command flags of every command that runs a script (EVAL*, EVALSHA*, FCALL*: Redis 7's)
EVAL_FLAGS = ["noscript", "skip_monitor", "may_replicate", "no_mandatory_keys", "stale",
              "movablekeys"]
SCRIPT_HELP = [
    "SCRIPT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "DEBUG (YES|SYNC|NO)",
    "    Set the debug mode for subsequent scripts executed.",
    "EXISTS <sha1> [<sha1> ...]",
    "    Return information about the existence of the scripts in the script cache.",
    "FLUSH [ASYNC|SYNC]",
    "    Flush the Lua scripts cache. Very dangerous on replicas.",
    "    When called without the optional mode argument, the behavior is determined by the",
    "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
    "    * ASYNC: Asynchronously flush the scripts cache.",
    "    * SYNC: Synchronously flush the scripts cache.",
    "KILL",
    "    Kill the currently executing Lua script.",
    "LOAD <script>",
    "    Load a script into the scripts cache without executing it.",
    "HELP",
    "    Prints this help.",
]


class Bridge:
    """The `redis.call` bridge of the scripts one client runs (Rules 1, 5): the client its
    commands run as (the caller's ACL user, `script`, never answered BUSY) and what each call
    reads. Made on the client's first script and kept on its context while its user stays
    (`caller_of`): the script client's fields no script command can change (CLIENT, HELLO,
    AUTH, SELECT, MULTI, WATCH and SUBSCRIBE are `noscript`), but its protocol, set per call.
    A call returns (PLAIN, value) for a reply Lua takes as it is (an integer, a bulk string,
    a null: no RESP round trip, scripting/lua.py Rule 6), (True, RESP bytes) for any other
    reply, or (False, error text)."""

    __slots__ = ("user", "client", "sctx", "front", "memory", "limit")

    def __init__(self, ctx: CommandContext) -> None:
        me = ctx.client
        self.user = me.user
        self.client = Client(id=0, addr=me.addr, laddr=me.laddr, user=me.user,
                             authenticated=True, script=True)
        self.sctx = CommandContext(ctx.server, self.client, ctx.front)
        self.front = ctx.front
        self.memory = ctx.server.memory
        self.limit = ctx.server.config.client_output_limit

    def _refuse(self, name: str, text: bytes) -> tuple[int, Any]:  # a rejected call (Rule 5)
        count_rejected(self.front, name)
        return False, text

    def _run(self, argv: list[bytes], run: Run) -> tuple[int, Any]:
        run.tick()  # past the threshold: hand the loop back first (runner.py Rule 2)
        spec, used = find(argv)
        if spec is None:
            return False, b"ERR Unknown Redis command called from script"
        n = len(argv)
        if (spec.arity > 0 and n != spec.arity) or n < -spec.arity or \
                (spec.subcommands and used == 1):
            return self._refuse(spec.name, b"ERR Wrong number of args calling Redis command "
                                           b"from script")
        flags = spec.flags
        if "noscript" in flags:
            return self._refuse(spec.name, b"ERR This Redis command is not allowed from script")
        client = self.client
        if client.user != acl.DEFAULT and not acl.permitted(client.user, spec):
            return self._refuse(spec.name, SCRIPT_NOPERM)
        write = "write" in flags
        if write and run.read_only:
            return self._refuse(spec.name, NO_WRITES.encode())
        # Redis's scriptVerifyOOM: not with allow-oom, and never once the script has written
        # (it cannot stop half way)
        memory = self.memory
        if memory.limit and "denyoom" in flags and not run.allow_oom and not run.wrote and \
                memory.over(sum(map(len, argv))):
            return self._refuse(spec.name, OOM_TEXT.encode())
        sctx = self.sctx
        if write:  # on a replica, or short of good replicas (dispatch.py Rule 11)
            refusal = write_refused(sctx)
            if refusal is not None:
                return self._refuse(spec.name, refusal.encode())
        resp = run.resp
        client.protocol = resp
        self.front.stats.total_commands += 1
        client.last_cmd = spec.name
        reply = invoke(sctx, spec, argv[used:], None, True)  # the checks above are Rule 1's
        if write:
            run.wrote = True
        t = type(reply)
        if t is Pending:
            run.tokens.append(reply.token)
            reply = reply.reply
            t = type(reply)
        if t is int:
            return PLAIN, reply
        if t is bytes and len(reply) < self.limit - 32:
            return PLAIN, reply
        if reply is None:
            return PLAIN, None if resp == 3 else False
        if is_awaitable(reply):
            if inspect.iscoroutine(reply):
                reply.close()
            return False, b"ERR this command cannot run inside a script (it would wait)"
        if isinstance(reply, Err):
            return False, reply.text.encode("utf-8", "surrogateescape")
        out = bytearray()
        encode(out, reply, resp == 3)
        if len(out) > self.limit:
            return False, b"ERR reply of the command is over the client output limit"
        return True, bytes(out)

    def permits(self, argv: list[bytes]) -> bool | None:
        """`redis.acl_check_cmd`: may the script's user run argv? None for an unknown
        command (the script gets Redis's error)."""
        spec, _ = find(argv)
        if spec is None:
            return None
        return acl.permitted(self.user, spec)

    def __call__(self, argv: list[bytes], run: Run) -> tuple[int, Any]:
        ok, data = self._run(argv, run)
        if not ok:  # counted where it happens; the script's reply will not count it again
            ERROR_STATS[data.partition(b" ")[0].decode("utf-8", "replace")] += 1
        return ok, data


def caller_of(ctx: CommandContext) -> Bridge:
    """The bridge of `ctx`'s client (made on its first script, again after AUTH changed its
    user)."""
    b = ctx.scripts
    if b is None or b.user != ctx.client.user:
        b = ctx.scripts = Bridge(ctx)
    assert isinstance(b, Bridge)
    return b


def refuse_flagged(ctx: CommandContext, flags: Collection[str] | None) -> None:
    """A script with flags (shebang, function) that may write is a `write` command, and
    without `allow-oom` a `denyoom` one: refused before it runs over maxmemory (Rule 6), then
    on a replica (READONLY) or short of min-replicas-to-write (NOREPLICAS), in the order of
    Redis's processCommand (dispatch.py Rules 6 and 11)."""
    if flags is None or "no-writes" in flags:
        return
    memory = ctx.server.memory
    if "allow-oom" not in flags and memory.limit and memory.over():
        raise Refused(OOM_TEXT)
    refusal = write_refused(ctx)
    if refusal is not None:
        raise Refused(refusal)


def new_run(ctx: CommandContext, name: str, function: bool, read_only: bool,
            flags: Collection[str] | None) -> Run:
    """The Run of a script or function called by `ctx`'s client (Rule 1: its user), under
    its flags (Rule 6: None for a script without a shebang)."""
    no_writes = flags is not None and "no-writes" in flags
    if read_only and flags is not None and not no_writes:
        raise Err("ERR Can not execute a script with write flag using *_ro command.")
    bridge = caller_of(ctx)
    return Run(name, function, read_only or no_writes, bridge,
               allow_oom=flags is not None and "allow-oom" in flags,
               acl_check=bridge.permits)


def run_script(ctx: CommandContext, run: Run, command: list[bytes],
               work: Callable[[], Any]) -> Any:
    """Run `work` (the Lua call) as the running script; the reply value (Rules 2-4)."""
    sc = scripting_of(ctx.server)
    result = sc.execute(run, command, work)
    if is_awaitable(result):
        return finish_later(result, run, sc, reply_of)
    return reply_of(result, run)


def reply_of(result: Any, run: Run) -> Any:
    """The reply of a script that returned `result`: after its writes are durable (Rule 3)."""
    if isinstance(result, Err):
        return result  # an error reply need not wait for the writes before it
    reply: Any = Raw(result)
    if run.tokens:
        return Pending(Tokens(run.tokens), reply)
    return reply


def _error(text: str, counted: bool) -> Err:
    """The script's error reply; `counted`: a command inside it answered this error and it
    was counted then (Rule 5)."""
    return CountedErr(text) if counted else Err(text)


def work(ctx: CommandContext, name: str, state: Any, run: Run, f: Any, keys: list[bytes],
         args: list[bytes], function_args: bool) -> Callable[[], Any]:
    """The job that runs the script `name` (eval, fcall, ...) called and encodes its reply."""
    resp3 = ctx.client.protocol == 3
    limit = ctx.server.config.client_output_limit

    def job() -> Any:
        try:
            value = state.call(run, f, keys, args, function_args)
            data, errors = state.reply(value, resp3, run.resp, limit)
            if data[:1] == b"-":
                return _error(data[1:-2].decode("utf-8", "surrogateescape"), errors[0][1])
            if errors:  # error replies inside the reply (Rule 5, as Redis 7.0 counts them)
                _count_nested(ctx, name, errors)
            return data
        except ScriptError as e:
            return _error(e.text, e.counted)
        except ReplyTooBig as e:
            return Err(f"ERR the script's reply is over the client output limit ({e})")

    return job


def _count_nested(ctx: CommandContext, name: str, errors: list[tuple[bytes, bool]]) -> None:
    """Error replies nested in a script's reply: each not counted yet is counted in
    errorstats; the script counts one failed call for them, and one more for each counted
    already (Redis 7.0's afterErrorReply)."""
    fresh = [e for e, counted in errors if not counted]
    for e in fresh:
        ERROR_STATS[e.partition(b" ")[0].decode("utf-8", "replace")] += 1
    count_call(ctx.front, name, 0.0, 0, (1 if fresh else 0) + len(errors) - len(fresh))


def split_keys(args: list[bytes], bad: str = NOT_INT) -> tuple[list[bytes], list[bytes]]:
    """numkeys key... arg... as Redis parses them (`bad`: the error of a numkeys that is not
    an integer: FCALL's differs)."""
    n = parse_i64(args[0])  # compiled; parse_int (the same rules) for the error's text
    if n is None:
        n = parse_int(args[0], bad)
    if n < 0:
        raise Err("ERR Number of keys can't be negative")
    if n > len(args) - 1:
        raise Err("ERR Number of keys can't be greater than number of args")
    return args[1:1 + n], args[1 + n:]


def _eval(ctx: CommandContext, args: list[bytes], by_sha: bool, read_only: bool,
          name: str) -> Any:
    sc = scripting_of(ctx.server)
    state = sc.scripts
    if by_sha:
        sha = args[0].decode("latin-1").lower()
        f = state.scripts.get(sha)
        if f is None:
            raise Err("NOSCRIPT No matching script. Please use EVAL.")
    else:
        sha = _load(state, args[0])
        f = state.scripts[sha]
    flags = state.flags[sha]
    refuse_flagged(ctx, flags)
    keys, argv = split_keys(args[1:])
    run = new_run(ctx, sha, False, read_only, flags)
    return run_script(ctx, run, [name.encode(), *args],
                      work(ctx, name, state, run, f, keys, argv, False))


def parse_shebang(code: bytes) -> tuple[int, frozenset[str] | None]:
    """A script's `#!lua flags=...` line (Redis 7 evalExtractShebangFlags, its texts): the
    line's length and the flags; (0, None) without a shebang (Rule 6)."""
    if not code.startswith(b"#!"):
        return 0, None
    end = code.find(b"\n")
    if end < 0:
        raise Err("ERR Invalid script shebang")
    parts = split_args(code[:end])
    if not parts:
        raise Err("ERR Invalid engine in script shebang")
    if parts[0] != b"#!lua":
        raise Err(f"ERR Unexpected engine in script shebang: {parts[0].decode('latin-1')}")
    flags: set[str] = set()
    for p in parts[1:]:
        if not p.startswith(b"flags="):
            raise Err(f"ERR Unknown lua shebang option: {p.decode('latin-1')}")
        for word in p[6:].split(b",") if len(p) > 6 else ():
            flag = word.decode("latin-1")
            if flag not in FLAGS:
                raise Err(f"ERR Unexpected flag in script shebang: {flag}")
            flags.add(flag)
    return end, frozenset(flags)


def _load(state: Any, code: bytes) -> str:
    """EVAL / SCRIPT LOAD: the script compiled and cached (its shebang read); its SHA1."""
    skip, flags = parse_shebang(code)
    try:
        sha: str = state.load(code, skip, flags)
    except ScriptError as e:
        raise Err(e.text) from None
    return sha


def _cmd(name: str, arity: int, flags: list[str], summary: str, syntax: str,
         first: int = 0) -> Any:
    return command(name, arity, flags, first, 0, 0, "scripting", summary, "2.6.0",
                   syntax=syntax)


@_cmd("eval", -3, EVAL_FLAGS, "Executes a server-side Lua script.",
      "script:string numkeys:integer [key:key...] [arg:string...]")
def eval_(ctx: CommandContext, args: list[bytes]) -> Any:
    return _eval(ctx, args, False, False, "eval")


@_cmd("evalsha", -3, EVAL_FLAGS, "Executes a server-side Lua script by SHA1 digest.",
      "sha1:string numkeys:integer [key:key...] [arg:string...]")
def evalsha(ctx: CommandContext, args: list[bytes]) -> Any:
    return _eval(ctx, args, True, False, "evalsha")


@_cmd("eval_ro", -3, [*EVAL_FLAGS, "readonly"], "Executes a read-only server-side Lua script.",
      "script:string numkeys:integer [key:key...] [arg:string...]")
def eval_ro(ctx: CommandContext, args: list[bytes]) -> Any:
    return _eval(ctx, args, False, True, "eval_ro")


@_cmd("evalsha_ro", -3, [*EVAL_FLAGS, "readonly"],
      "Executes a read-only server-side Lua script by SHA1 digest.",
      "sha1:string numkeys:integer [key:key...] [arg:string...]")
def evalsha_ro(ctx: CommandContext, args: list[bytes]) -> Any:
    return _eval(ctx, args, True, True, "evalsha_ro")


container("script", "scripting", "A container for Lua scripts management commands", "2.6.0")


def _sub(name: str, arity: int, flags: list[str], summary: str, syntax: str = "") -> Any:
    return command(f"script|{name}", arity, flags, 0, 0, 0, "scripting", summary, "2.6.0",
                   syntax=syntax)


@_sub("load", 3, ["noscript", "stale"], "Loads a server-side Lua script to the script cache.",
      "script:string")
def script_load(ctx: CommandContext, args: list[bytes]) -> Any:
    return _load(scripting_of(ctx.server).scripts, args[0])


@_sub("exists", -3, ["noscript"], "Determines whether server-side Lua scripts exist in the "
      "script cache.", "sha1:string...")
def script_exists(ctx: CommandContext, args: list[bytes]) -> Any:
    scripts = scripting_of(ctx.server).scripts.scripts
    return [int(a.decode("latin-1").lower() in scripts) for a in args]


@_sub("flush", -2, ["noscript"], "Removes all server-side Lua scripts from the script cache.",
      "[(ASYNC|SYNC)]")
def script_flush(ctx: CommandContext, args: list[bytes]) -> Any:
    if len(args) > 1 or (args and args[0].lower() not in (b"async", b"sync")):
        raise Err("ERR SCRIPT FLUSH only support SYNC|ASYNC option")
    scripting_of(ctx.server).flush_scripts()
    return OK


def kill(ctx: CommandContext, function: bool) -> Any:
    run = scripting_of(ctx.server).running
    if run is None or ctx.server.busy is None:
        raise Err("NOTBUSY No scripts in execution right now.")
    if run.wrote:
        raise Err("UNKILLABLE Sorry the script already executed write commands against the "
                  "dataset. You can either wait the script termination or kill the server in "
                  "a hard way using the SHUTDOWN NOSAVE command.")
    if run.function != function:  # SCRIPT KILL of a function or the reverse: the BUSY text
        raise Err(ctx.server.busy)  # naming the right KILL (as Redis 7.0)
    run.kill = True
    return OK


@_sub("kill", 2, ["noscript", "allow_busy"], "Terminates a server-side Lua script during "
      "execution.")
def script_kill(ctx: CommandContext, args: list[bytes]) -> Any:
    return kill(ctx, False)


@_sub("help", 2, ["loading", "stale"], "Returns helpful text about the different subcommands.")
def script_help(ctx: CommandContext, args: list[bytes]) -> Any:
    return [Simple(line) for line in SCRIPT_HELP]


def _set_threshold(name: str) -> Callable[[CommandContext, int], None]:
    def apply(ctx: CommandContext, ms: int) -> None:
        scripting_of(ctx.server).threshold_s = ms / 1000 if ms else float("inf")
        ctx.front.settings["busy-reply-threshold"] = str(ms)
        ctx.front.settings["lua-time-limit"] = str(ms)
    return apply


SETTERS["busy-reply-threshold"] = (parse_count, _set_threshold("busy-reply-threshold"))
SETTERS["lua-time-limit"] = (parse_count, _set_threshold("lua-time-limit"))
