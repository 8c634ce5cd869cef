"""The Lua state: one lupa Lua 5.1 runtime with Redis's sandbox (sandbox.lua), the compiled
EVAL scripts by SHA1, and the bridge through which `redis.call` reaches the server.

Sans-IO: what a command does is a `Caller` the RESP front supplies (one call: argv in, the
reply's RESP bytes or an error text out); this module never sees the engine or a socket.

Rule 1: one state per server, made on first use; SCRIPT FLUSH (and FUNCTION FLUSH/DELETE,
functions.py) replaces it with a fresh one, so nothing a script did survives a flush.
Rule 2: one script runs at a time (`Run` is the running one); the caller holds that guarantee
(scripting/runner.py), this module does not lock.
Rule 3: a script's memory is bounded by lupa's `max_memory` (MEMORY_LIMIT, or less under
--max-memory); past it the allocation fails inside Lua ("not enough memory") and the script
ends with that error, the server going on; a failed script is followed by a full collection
so the next one has the memory back.
Rule 4: script errors are Redis 7's texts: an error raised as a table {err=...} keeps its text,
a string error is prefixed by "ERR ", and both get " script: <sha or function>, on
@user_script:<line>." appended.
Rule 5 (INFO errorstats, as Redis 7.0): the error table of a command that failed inside the
script carries `ignore_error_stats_update = true` (the caller counted the error when it
happened); returned or raised as the script's reply, it is not counted a second time.
Rule 6 (no round trip for a plain reply): a Caller answers (PLAIN, value) for a reply Lua
takes as it is (an integer: a number; a bulk string: a string; a null: false in RESP2, nil in
RESP3), and (True, RESP bytes) for any other, which convert.resp_to_lua reads. Few keys and
arguments (FEW) cross into the script as the call's own arguments, and sandbox.lua builds
KEYS and ARGV from them: a table made from Python costs more than the call.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from importlib import resources
from typing import Any

from lupa import lua51
from lupa.lua51 import lua_type

from topicsrv.scripting import binlibs, bridge, convert, libs
from topicsrv.scripting.bridge import LibError

log = logging.getLogger("topicsrv.scripting")

MEMORY_LIMIT = 256 << 20
GC_PERIOD = 50
REDIS_VERSION = "7.0.15"
REDIS_VERSION_NUM = 0x07000F
LOG_LEVELS = (logging.DEBUG, logging.DEBUG, logging.INFO, logging.WARNING)
KILLED = b"ERR Script killed by user with SCRIPT KILL..."
KILLED_FUNCTION = b"ERR Script killed by user with FUNCTION KILL..."
TOO_LARGE = b"ERR reply too large for the script memory"


class ScriptError(Exception):
    """A script failed; `text` is the whole error line (prefix included). `counted`: the error
    is one a command inside the script answered, already counted in INFO errorstats (Rule 5)."""

    def __init__(self, text: str, counted: bool = False) -> None:
        super().__init__(text)
        self.text = text
        self.counted = counted


PLAIN = 2  # a Caller's status for a reply that crosses as it is (Rule 6)
FEW = 8  # at most this many keys and arguments cross as the run's own arguments (Rule 6)

# argv -> (True, RESP bytes of the reply) | (PLAIN, int, bytes, False or None) |
# (False, error text)
Caller = Callable[[list[bytes], "Run"], tuple[int, Any]]


def _allowed(argv: list[bytes]) -> bool | None:
    return True


def _no_tick() -> None:
    return None


class Run:
    """The script running now: what `redis.call` and the kill hook consult. (A plain class,
    not a dataclass: one is made per EVAL, and a compiled dataclass's __init__ is Python's.)"""

    __slots__ = ("name", "function", "read_only", "caller", "allow_oom", "resp", "wrote",
                 "kill", "kill_text", "tokens", "acl_check", "tick")

    def __init__(self, name: str, function: bool, read_only: bool, caller: Caller,
                 allow_oom: bool = False, kill_text: bytes | None = None,
                 acl_check: Callable[[list[bytes]], bool | None] = _allowed) -> None:
        self.name = name  # the SHA1 (EVAL) or the function name (FCALL)
        self.function = function  # FCALL: errors say @user_function, kill says FUNCTION KILL
        self.read_only = read_only  # EVAL_RO / FCALL_RO / a no-writes function or script
        self.caller = caller
        self.allow_oom = allow_oom  # the allow-oom flag: its writes pass over maxmemory
        self.resp = 2  # redis.setresp
        self.wrote = False  # a write command ran: SCRIPT KILL refuses (UNKILLABLE)
        self.kill = False
        self.kill_text = kill_text  # the error a kill raises, when not SCRIPT/FUNCTION KILL's
        self.tokens: list[Any] = []  # commit tokens of its writes
        # redis.acl_check_cmd: True/False for the calling user, None for an unknown command
        self.acl_check = acl_check
        # called by the count hook: past busy-reply-threshold it hands the loop back
        # (runner.py)
        self.tick: Callable[[], None] = _no_tick


def sha1hex(code: bytes) -> str:
    return hashlib.sha1(code).hexdigest()


def _sha1hex(code: bytes) -> bytes:
    """redis.sha1hex (sandbox.lua checked the argument)."""
    return sha1hex(code).encode()


def _argv(args: tuple[Any, ...]) -> list[bytes] | str:
    if not args:
        return "ERR Please specify at least one argument for this redis lib call"
    out = []
    for a in args:
        if isinstance(a, bytes):
            out.append(a)
        elif isinstance(a, bool) or not isinstance(a, (int, float)):
            return "ERR Lua redis lib command arguments must be strings or integers"
        elif isinstance(a, float) and not a.is_integer():
            out.append(b"%.17g" % a)
        else:
            out.append(b"%d" % int(a))
    return out


class LuaState:
    """One Lua runtime and the scripts compiled in it (Rules 1-4)."""

    def __init__(self, memory_limit: int = MEMORY_LIMIT) -> None:
        self.rt = rt = lua51.LuaRuntime(encoding=None, unpack_returned_tuples=True,
                                        register_eval=False, register_builtins=False,
                                        attribute_handlers=bridge.ATTRIBUTE_HANDLERS,
                                        max_memory=memory_limit)
        self.rawget = rt.eval("rawget")  # the real one, before the sandbox (convert.Writer)
        self._kbytes = rt.eval("function() return collectgarbage('count') end")
        # as Redis's luaCallFunction: a collector step of GC_PERIOD every GC_PERIOD runs, so
        # garbage does not pile up between Lua's own (rarer) full cycles
        self._gc_step = rt.eval(f"function() collectgarbage('step', {GC_PERIOD}) end")
        self._runs = 0
        self.run: Run | None = None
        self.scripts: dict[str, Any] = {}  # sha -> compiled function (SCRIPT LOAD / EVAL)
        self.bodies: dict[str, bytes] = {}
        self.flags: dict[str, frozenset[str] | None] = {}  # sha -> its shebang flags
        self.register: Callable[..., Any] = _no_register
        null = rt.eval("newproxy(false)")
        # every Python function the sandbox can call crosses through the bridge (bridge.py)
        self.bridge = br = bridge.Bridge(rt, rt.get_max_memory(), null)
        self.cjson = libs.make_cjson(rt, null, br)

        def lib(funcs: dict[str, Any], prefix: str) -> Any:
            return _table(rt, {k: v if k == "null" else br.expose(v, f"{prefix}.{k}")
                               for k, v in funcs.items()})

        helpers = {
            "lift": br.lift, "cap": br.cap, "null": null,
            "call": self._call, "call_packed": self._call_packed,
            "call_lifting": self._call_lifting,
            "sha1hex": br.expose(_sha1hex, "redis.sha1hex"),
            "log": br.expose(self._log, "redis.log"),
            "setresp": br.expose(self._setresp, "redis.setresp"),
            "killed": br.expose(self._killed, "killed"),
            "acl_check": br.expose(self._acl_check, "redis.acl_check_cmd"),
            "register": br.expose(self._register, "redis.register_function"),
            "version": REDIS_VERSION.encode(), "version_num": REDIS_VERSION_NUM,
            "cjson": lib(self.cjson.functions, "cjson"),
            "cmsgpack": lib(libs.make_cmsgpack(rt, null, br), "cmsgpack"),
            "bit": lib(binlibs.make_bit(), "bit"),
            "struct": lib(binlibs.make_struct(br), "struct"),
        }
        code = resources.files("topicsrv.scripting").joinpath("sandbox.lua").read_bytes()
        self.runner = rt.execute(code, _table(rt, helpers))
        br.lift()  # on only while a script runs (bridge.py Rule 3)
        self._compile, self._run, self._run_args, self._run_with, self._run_load = (
            self.runner[b"compile"], self.runner[b"run"], self.runner[b"run_args"],
            self.runner[b"run_with"], self.runner[b"run_load"])
        # the setup's garbage goes now, so a fresh state reports what it holds (Valkey's
        # "EVAL does not leak in the Lua stack" wants used_memory_lua under 100 KB)
        rt.execute("collectgarbage('collect')")

    # ---- helpers called from Lua ---------------------------------------------------------

    def _call(self, *args: Any) -> tuple[bool, Any]:
        """redis.call's crossing (bridge.py Rules 1 and 3): (True, the reply as Lua values) or
        (False, an error table); never raises; every table is built with the cap lifted and
        the cap is back before it returns."""
        return self._answer(args)

    def _call_lifting(self, *args: Any) -> tuple[bool, Any]:
        """The same for arguments that are all strings and numbers (sandbox.lua Rule 5): they
        crossed without Lua allocating, and the cap is lifted here instead of by `enter`."""
        self.bridge.lift()
        return self._answer(args)

    def _answer(self, args: tuple[Any, ...]) -> tuple[bool, Any]:
        br = self.bridge
        try:
            ok, value = self._command(args)
            br.cap()
            if br.fits_one(value):  # a table built past the cap fails here too
                return ok, value
            failed = TOO_LARGE
        except MemoryError:
            failed = TOO_LARGE  # collected below, once no traceback holds what was built
        except Exception:
            log.exception("redis.call failed")
            failed = b"ERR internal error (logged)"
        value = None
        br.collect()
        return False, br.lifted(lambda: self.rt.table_from({b"err": failed}))

    def _command(self, args: tuple[Any, ...]) -> tuple[bool, Any]:
        run = self.run
        rt = self.rt
        if run is None:
            return False, rt.table_from({b"err": b"ERR redis.call is not allowed here"})
        argv = _argv(args)
        if isinstance(argv, str):
            return False, rt.table_from({b"err": argv.encode()})
        ok, data = run.caller(argv, run)
        if ok == PLAIN:
            return True, data
        if not ok:
            return False, rt.table_from({b"err": data, convert.COUNTED: True})
        return True, convert.resp_to_lua(rt, data, self.bridge.check)

    def memory_used(self) -> int:
        """The bytes the Lua state holds (INFO memory's used_memory_vm_*, as Redis's
        lua_gc(LUA_GCCOUNT))."""
        return int(self._kbytes() * 1024)

    def _call_packed(self, args: Any, n: int) -> tuple[bool, Any]:
        """redis.call's arguments as one table (sandbox.lua `invoke`: many arguments)."""
        rawget = self.rawget
        return self._call(*(rawget(args, i) for i in range(1, int(n) + 1)))

    def counted(self, value: Any) -> bool:
        """Is `value` the error table of a failed command (Rule 5)?"""
        return lua_type(value) == "table" and self.rawget(value, convert.COUNTED) is True

    def _register(self, *args: Any) -> Any:
        return self.register(*args)

    def _log(self, level: float, text: bytes) -> None:
        # sandbox.lua checked the level (a number in [0, 4)) and joined the text
        log.log(LOG_LEVELS[int(level)], "script: %s", text.decode("utf-8", "replace"))

    def _setresp(self, v: float) -> None:
        if self.run is not None:  # sandbox.lua let 2 and 3 only through
            self.run.resp = int(v)

    def _killed(self) -> bytes | None:
        run = self.run
        if run is None:
            return None
        run.tick()
        if not run.kill:
            return None
        if run.kill_text is not None:
            return run.kill_text
        return KILLED_FUNCTION if run.function else KILLED

    def _acl_check(self, *args: Any) -> bool:
        argv = _argv(args)
        if isinstance(argv, str):  # raised as {err = "ERR " .. text} (sandbox.lua)
            raise LibError(argv.removeprefix("ERR "))
        run = self.run
        allowed = run.acl_check(argv) if run is not None else True
        if allowed is None:
            raise LibError("Invalid command passed to redis.acl_check_cmd()")
        return allowed

    # ---- scripts -------------------------------------------------------------------------

    def compile(self, code: bytes, chunk: str,
                failure: str = "Error compiling script (new function)") -> Any:
        """A compiled chunk; ScriptError `ERR <failure>: <Lua's message>` on a syntax error."""
        res = self._compile(code, chunk.encode())
        f, err = res if isinstance(res, tuple) else (res, None)
        if f is None:
            raise ScriptError(f"ERR {failure}: {_text(err)}")
        return f

    def load(self, code: bytes, skip: int = 0, flags: frozenset[str] | None = None) -> str:
        """SCRIPT LOAD / EVAL: compile once per body (without its first `skip` bytes, a
        shebang line: the line count stays); its SHA1. `flags`: the shebang's script flags
        (None: no shebang, Redis's compatibility mode), kept for EVALSHA."""
        sha = sha1hex(code)
        if sha not in self.scripts:
            f = self.compile(code[skip:], "@user_script")
            self.scripts[sha] = f
            self.bodies[sha] = code
            self.flags[sha] = flags
        return sha

    def call(self, run: Run, f: Any, keys: list[bytes], argv: list[bytes],
             function_args: bool = False) -> Any:
        """Run `f` (a compiled script, or a function's callback with (keys, args)); its Lua
        return value. ScriptError on failure (Rule 4)."""
        rt = self.rt
        if function_args:
            return self._execute(run, self._run_with,
                                 (f, rt.table_from(keys), rt.table_from(argv)))
        if len(keys) + len(argv) <= FEW:  # Rule 6
            return self._execute(run, self._run_args, (f, len(keys), *keys, *argv))
        return self._execute(run, self._run, (rt.table_from(keys), rt.table_from(argv), f))

    def load_library(self, run: Run, f: Any) -> None:
        """Run a library's top-level code in the library context (sandbox.lua Rule 4).
        ScriptError `ERR <text>` without the script/line suffix (FUNCTION LOAD's)."""
        self._execute(run, self._run_load, (f,), where=False)

    def _execute(self, run: Run, how: Any, args: tuple[Any, ...], where: bool = True) -> Any:
        """`how(*args)`, a runner of sandbox.lua, as `run`: its value, or ScriptError."""
        self._runs += 1
        if self._runs >= GC_PERIOD:
            self._runs = 0
            self._gc_step()
        self.run = run
        if self.cjson.cfg.changed:  # settings a script changed do not outlive it (sandbox.lua Rule 6)
            self.cjson.reset()
        try:
            try:
                ok, value = how(*args)
            except MemoryError:
                self._collect()
                raise ScriptError("ERR Error running script: not enough memory") from None
        finally:
            self.run = None
            self.bridge.lift()  # whatever path ended the run: Python holds the state now
        if not ok:
            text = self._error(run, value, where)
            self._collect()
            raise ScriptError(text, lua_type(value) == "table" and self.counted(value[1]))
        return value

    def _collect(self) -> None:
        """A full collection after a failed script (Rule 3): what a script that ran out of
        memory allocated is garbage, and would make the next script start near its cap."""
        self.rt.gccollect()  # the cap is lifted outside runs (bridge.py Rule 3)

    def _error(self, run: Run, info: Any, where: bool = True) -> str:
        if lua_type(info) != "table":
            return f"ERR {_text(info)}"
        e, source, line = info[1], info[2], info[3]
        err = convert.error_text(self.rt, e)
        text = _text(err) if err is not None else f"ERR {_text(e)}"
        if where and source:
            text += f" script: {run.name}, on {_text(source)}:{int(line or 0)}."
        return text

    def reply(self, value: Any, resp3: bool, script_resp: int,
              limit: int) -> tuple[bytes, list[tuple[bytes, bool]]]:
        """The script's reply in RESP and the error replies in it (convert.Writer.errors)."""
        return convert.lua_to_resp(self.rt, self.rawget, value, resp3, script_resp == 3, limit)


def _text(v: Any) -> str:
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace").replace("\r", " ").replace("\n", " ")
    return str(v)


def _table(rt: Any, d: dict[str, Any]) -> Any:
    return rt.table_from({k.encode(): v for k, v in d.items()})


def _no_register(*args: Any) -> None:
    raise LibError("redis.register_function can only be called on FUNCTION LOAD command")
