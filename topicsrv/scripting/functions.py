"""Function libraries (Redis 7 FUNCTION LOAD / FCALL): the `#!lua name=<lib>` header, the
registrations of `redis.register_function`, and the library table.

Rule 1: functions live in a Lua state of their own (`Libraries.state`), apart from the EVAL
scripts' one, so SCRIPT FLUSH leaves them and FUNCTION FLUSH resets only them (as Redis 7).
Rule 2: a load is all or nothing: the library's code runs once, with `register_function`
collecting its functions; any error (header, syntax, runtime, a bad registration, a name
taken by another library) leaves the table as it was.
Rule 3: the texts of every refusal are Redis 7.0's.
Rule 4: a library's top-level code runs LOAD_TIMEOUT_S at most (as Redis): past it the count
hook stops it with `FUNCTION LOAD timeout` and the load fails (Rule 2).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Any

from lupa.lua51 import lua_type

from topicsrv.scripting.libs import LibError
from topicsrv.scripting.lua import LuaState, Run, ScriptError

LOAD_TIMEOUT_S = 0.5
FLAGS = ("no-writes", "allow-oom", "allow-stale", "no-cluster", "allow-cross-slot-keys")
NAME_RE = re.compile(rb"^[A-Za-z0-9_]+$")
BAD_NAME = ("Function names can only contain letters, numbers, or underscores(_) and must be "
            "at least one character long")


@dataclass(slots=True)
class Function:
    name: str
    callback: Any
    flags: tuple[str, ...]
    description: bytes | None
    library: str


@dataclass(slots=True)
class Library:
    name: str
    code: bytes
    functions: dict[str, Function] = field(default_factory=dict)


def parse_header(code: bytes) -> tuple[str, bytes]:
    """(library name, code with the header line blanked so line numbers stay)."""
    if not code.startswith(b"#!"):
        raise ScriptError("ERR Missing library metadata")
    first, nl, rest = code.partition(b"\n")
    parts = first[2:].split()
    if not parts:
        raise ScriptError("ERR Missing library metadata")
    engine = parts[0].decode("latin-1")
    if engine.lower() != "lua":
        raise ScriptError(f"ERR Engine '{engine}' not found")
    name = None
    for p in parts[1:]:
        if p.startswith(b"name="):
            name = p[5:].decode("latin-1")
        else:
            raise ScriptError(f"ERR Invalid metadata value given: {p.decode('latin-1')}")
    if not name:
        raise ScriptError("ERR Library name was not given")
    if not NAME_RE.match(name.encode("latin-1")):
        raise ScriptError("ERR Library names can only contain letters, numbers, or "
                          "underscores(_) and must be at least one character long")
    return name, nl + rest


class Libraries:
    """The loaded libraries and their functions (Rules 1-3)."""

    def __init__(self, memory_limit: int) -> None:
        self.memory_limit = memory_limit
        self.state = LuaState(memory_limit)
        self.libraries: dict[str, Library] = {}
        self.functions: dict[str, Function] = {}

    def flush(self) -> None:
        self.state = LuaState(self.memory_limit)
        self.libraries.clear()
        self.functions.clear()

    def delete(self, name: str) -> None:
        lib = self.libraries.pop(name, None)
        if lib is None:
            raise ScriptError("ERR Library not found")
        for fn in lib.functions:
            self.functions.pop(fn, None)

    def load(self, code: bytes, replace: bool) -> str:
        name, body = parse_header(code)
        if name in self.libraries and not replace:
            raise ScriptError(f"ERR Library '{name}' already exists")
        lib = Library(name, code)
        state = self.state
        f = state.compile(body, "@user_function")

        def register(*args: Any) -> None:
            self._register(lib, args)

        state.register = register
        run = Run(name, True, True, _no_call, kill_text=b"ERR FUNCTION LOAD timeout")
        deadline = time.monotonic() + LOAD_TIMEOUT_S

        def tick() -> None:  # the count hook: a library's code runs 500 ms at most (Rule 4)
            if time.monotonic() >= deadline:
                run.kill = True

        run.tick = tick
        try:
            state.call(run, f, [], [])
        except ScriptError as e:
            text = e.text.split(" script: ")[0]
            raise ScriptError(text) from None
        finally:
            state.register = _refuse
        if not lib.functions:
            raise ScriptError("ERR No functions registered")
        for fn in lib.functions:
            owner = self.functions.get(fn)
            if owner is not None and owner.library != name:
                raise ScriptError(f"ERR Function {fn} already exists")
        if name in self.libraries:
            self.delete(name)
        self.libraries[name] = lib
        self.functions.update(lib.functions)
        return name

    def _register(self, lib: Library, args: tuple[Any, ...]) -> None:
        description = None
        flags: list[str] = []
        if len(args) == 1 and lua_type(args[0]) == "table":
            t = args[0]
            for k, _ in t.items():
                if k not in (b"function_name", b"callback", b"flags", b"description"):
                    raise LibError("unknown argument given to redis.register_function")
            name, callback = t[b"function_name"], t[b"callback"]
            if t[b"description"] is not None:
                description = t[b"description"]
                if not isinstance(description, bytes):
                    raise LibError("description argument given to redis.register_function "
                                   "must be a string")
            fl = t[b"flags"]
            if fl is not None:
                if lua_type(fl) != "table":
                    raise LibError("flags argument to redis.register_function must be a table "
                                   "representing function flags")
                for _, v in fl.items():
                    text = v.decode("latin-1") if isinstance(v, bytes) else ""
                    if text not in FLAGS:
                        raise LibError("unknown flag given")
                    flags.append(text)
        elif len(args) == 2:
            name, callback = args
        else:
            raise LibError("wrong number of arguments to redis.register_function")
        if not isinstance(name, bytes) or not NAME_RE.match(name):
            raise LibError(BAD_NAME)
        if lua_type(callback) != "function":
            raise LibError("callback argument given to redis.register_function must be a "
                           "function")
        fname = name.decode("latin-1")
        if fname in lib.functions:
            raise LibError("Function already exists in the library")
        lib.functions[fname] = Function(fname, callback, tuple(flags), description, lib.name)


def _no_call(argv: list[bytes], run: Run) -> tuple[bool, bytes]:
    return False, b"ERR redis.call can not be called while loading a library"


def _refuse(*args: Any) -> None:
    raise LibError("redis.register_function can only be called on FUNCTION LOAD command")
