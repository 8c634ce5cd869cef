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

from topicsrv.scripting.bridge import LibError
from topicsrv.scripting.lua import LuaState, Run, ScriptError
from topicsrv.splitargs import split_args

LOAD_TIMEOUT_S = 0.5
FLAGS = ("no-writes", "allow-oom", "allow-stale", "no-cluster", "allow-cross-slot-keys")
NAME_RE = re.compile(rb"[A-Za-z0-9_]+")
# Redis 7.0 says "Library names" for a bad function name too (functionLibCreateFunction)
BAD_NAME = ("Library names can only contain letters, numbers, or underscores(_) and must be at "
            "least one character long")
API = "redis.register_function"


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
    """(library name, the code after the header line, so line numbers stay): Redis 7.0's
    functionExtractLibMetaData (the line split as sdssplitargs does, quotes included), then
    the name's check, then the engine's (Rule 3)."""
    if not code.startswith(b"#!"):
        raise ScriptError("ERR Missing library metadata")
    end = code.find(b"\n")
    parts = split_args(code[:end]) if end >= 0 else None
    if not parts:
        raise ScriptError("ERR Invalid library metadata")
    name = None
    for p in parts[1:]:
        if p[:5].lower() != b"name=":
            raise ScriptError(f"ERR Invalid metadata value given: {p.decode('latin-1')}")
        if name is not None:
            raise ScriptError("ERR Invalid metadata value, name argument was given multiple "
                              "times")
        name = p[5:]
    if name is None:
        raise ScriptError("ERR Library name was not given")
    if not NAME_RE.fullmatch(name):
        raise ScriptError(f"ERR {BAD_NAME}")
    engine = parts[0][2:].decode("latin-1")
    if engine.lower() != "lua":
        raise ScriptError(f"ERR Engine '{engine}' not found")
    return name.decode("latin-1"), code[end:]


def _string(v: Any) -> bytes | None:
    """A Lua string, or a number as Lua's tostring writes it (lua_isstring), else None."""
    if isinstance(v, bytes):
        return v
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return b"%.14g" % v
    return None


class Libraries:
    """The loaded libraries and their functions (Rules 1-3). Function names are looked up
    without regard to case (`functions` is keyed by the lower-cased name), library names
    with it, as Redis's dictionaries."""

    def __init__(self, memory_limit: int) -> None:
        self.memory_limit = memory_limit
        self.state = LuaState(memory_limit)
        self.libraries: dict[str, Library] = {}
        self.functions: dict[str, Function] = {}

    def find(self, name: str) -> Function | None:
        return self.functions.get(name.lower())

    def flush(self) -> None:
        self.state = LuaState(self.memory_limit)
        self.libraries.clear()
        self.functions.clear()

    def delete(self, name: str) -> None:
        lib = self.libraries.pop(name, None)
        if lib is None:
            raise ScriptError("ERR Library not found")
        for fn in lib.functions:
            self.functions.pop(fn.lower(), None)

    def load(self, code: bytes, replace: bool) -> str:
        name, body = parse_header(code)
        if name in self.libraries and not replace:
            raise ScriptError(f"ERR Library '{name}' already exists")
        lib = Library(name, code)
        state = self.state
        f = state.compile(body, "@user_function", "Error compiling function")

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
            state.load_library(run, f)
        except ScriptError as e:
            raise ScriptError(f"ERR Error registering functions: {e.text}") from None
        finally:
            state.register = _refuse
        if not lib.functions:
            raise ScriptError("ERR No functions registered")
        for fn in lib.functions:
            owner = self.find(fn)
            if owner is not None and owner.library != name:
                raise ScriptError(f"ERR Function {fn} already exists")
        if name in self.libraries:
            self.delete(name)
        self.libraries[name] = lib
        self.functions.update((fn.lower(), f) for fn, f in lib.functions.items())
        return name

    def _register(self, lib: Library, args: tuple[Any, ...]) -> None:
        """redis.register_function(name, callback) or ({function_name=, callback=, flags=,
        description=}): Redis 7.0's checks and texts (function_lua.c)."""
        description = None
        flags: list[str] = []
        if len(args) == 1:
            name, callback, description, flags = _named(args[0])
        elif len(args) == 2:
            first, callback = _string(args[0]), args[1]
            if first is None:
                raise LibError(f"first argument to {API} must be a string")
            name = first
            if lua_type(callback) != "function":
                raise LibError(f"second argument to {API} must be a function")
        else:
            raise LibError(f"wrong number of arguments to {API}")
        if not NAME_RE.fullmatch(name):
            raise LibError(BAD_NAME)
        fname = name.decode("latin-1")
        if fname in lib.functions:
            raise LibError("Function already exists in the library")
        lib.functions[fname] = Function(fname, callback, tuple(flags), description, lib.name)


def _named(t: Any) -> tuple[bytes, Any, bytes | None, list[str]]:
    """The named arguments of redis.register_function{...}: name, callback, description,
    flags (keys compared without regard to case, as Redis)."""
    if lua_type(t) != "table":
        raise LibError(f"calling {API} with a single argument is only applicable to Lua table "
                       "(representing named arguments).")
    name = callback = description = None
    flags: list[str] = []
    for k, v in t.items():
        key = _string(k)
        if key is None:
            raise LibError(f"named argument key given to {API} is not a string")
        key = key.lower()
        if key == b"function_name":
            name = _string(v)
            if name is None:
                raise LibError(f"function_name argument given to {API} must be a string")
        elif key == b"description":
            description = _string(v)
            if description is None:
                raise LibError(f"description argument given to {API} must be a string")
        elif key == b"callback":
            if lua_type(v) != "function":
                raise LibError(f"callback argument given to {API} must be a function")
            callback = v
        elif key == b"flags":
            if lua_type(v) != "table":
                raise LibError(f"flags argument to {API} must be a table representing "
                               "function flags")
            flags = _flags(v)
        else:
            raise LibError(f"unknown argument given to {API}")
    if name is None:
        raise LibError(f"{API} must get a function name argument")
    if callback is None:
        raise LibError(f"{API} must get a callback argument")
    return name, callback, description, flags


def _flags(t: Any) -> list[str]:
    """flags={...}: read as Redis reads them, t[1], t[2], ... up to the first nil; each a
    known flag, without regard to case."""
    out = []
    i = 1
    by_key = dict(t.items())  # raw reads: no metamethod of the script's table runs (bridge.py)
    while (v := by_key.get(i)) is not None:
        text = _string(v)
        flag = text.decode("latin-1").lower() if text is not None else ""
        if flag not in FLAGS:
            raise LibError("unknown flag given")
        out.append(flag)
        i += 1
    return out


def _no_call(argv: list[bytes], run: Run) -> tuple[bool, bytes]:
    return False, b"ERR redis.call can not be called while loading a library"


def _refuse(*args: Any) -> None:
    raise LibError("redis.register_function can only be called on FUNCTION LOAD command")
