"""The one door between Lua and Python (issue 34). Every Python function a script can reach is
handed to the Lua state through `Bridge.expose` (or is `Bridge.enter` itself); sandbox.lua
keeps them as upvalues of its own wrappers, so no script ever holds one.

Rule 1 (values): what crosses into Lua is a Lua string, number, boolean or nil, a table
built by this package from those (convert.resp_to_lua, libs.to_lua), or cjson.null. A helper
that returns anything else is an internal error, never a value in Lua. Errors never cross as
Python exceptions: an exposed helper returns `(True, values...)` or `(False, text)`, and
sandbox.lua raises the text as a Lua string.
Rule 2 (attributes): the runtime refuses every Python attribute access from Lua outright
(`ATTRIBUTE_HANDLERS`): even a Python object that slipped past Rule 1 has nothing to walk
(`__class__`, `__globals__`, ...).
Rule 3 (memory): the script memory cap is on only while a script's own Lua code runs. Lua
allocates also when Python touches the state (a compiled body pushed, KEYS and ARGV built, a
reply read, a call-back's arguments and results), and an allocation failing there is not a
Lua error a script can catch: outside any Lua call it is a Lua panic (the process exits),
inside a call-back it unwinds through lupa's frames and leaves the GIL taken (the process
hangs). So the cap is lifted (`lift`) whenever Python holds the state: sandbox.lua's runner
puts it on (`cap`) as a script starts and lifts it as it ends, and calls `lift` (no
arguments, no allocation) before each call-back, but a redis.call whose few arguments are
all strings and numbers: converting those allocates nothing in Lua, and its call-back
(lua.py `_call_lifting`) lifts the cap as it starts (sandbox.lua Rule 5); a script whose
value is a number, string, boolean or nil leaves the lift to `_execute`, which lifts after
every run. An exposed wrapper puts the cap back before it returns; then the Lua memory in
use, plus the strings it is about to return, must fit under the cap with MARGIN to spare, or the call answers "not enough memory" (Lua's own text)
and what it built is collected. Helpers that build big values check `budget()` as they go, so
a lifted cap never lets one call-back take more than the cap.
Rule 4 (no script code inside a call-back): helpers read Lua tables raw (`items()`, `rawget`),
so no metamethod of a script's table runs while the cap is lifted.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable
from typing import Any

from lupa.lua51 import lua_type

log = logging.getLogger("topicsrv.scripting")

MARGIN = 64 << 10  # headroom kept for the values pushed after the cap is back (Rule 3)
STRING_OVERHEAD = 40  # a Lua string's header, as counted against the cap
NO_MEMORY = b"not enough memory"
INTERNAL = b"internal error in a script library (logged)"
PLAIN_TYPES = (bytes, bool, int, float, type(None))
MANY = 16  # more values than this cross as one table (LUA_MINSTACK is 20)
PACKED = 2  # the status of a crossing whose values are in one table


def _need(v: Any) -> int:
    """The bytes a value pushed into Lua counts against the cap: a string's, with its header."""
    return len(v) + STRING_OVERHEAD if type(v) is bytes else 0


class LibError(Exception):
    """A library's own failure: its text is the Lua error the script sees."""


def _refuse_get(obj: Any, name: Any) -> Any:
    raise AttributeError("Python attributes are not reachable from scripts")


def _refuse_set(obj: Any, name: Any, value: Any) -> None:
    raise AttributeError("Python attributes are not reachable from scripts")


ATTRIBUTE_HANDLERS = (_refuse_get, _refuse_set)


class Bridge:
    """The memory cap's keeper and the wrapper of every exposed helper (Rules 1 and 3)."""

    __slots__ = ("rt", "limit", "null", "rawequal")

    def __init__(self, rt: Any, limit: int, null: Any) -> None:
        self.rt, self.limit, self.null = rt, limit, null
        # userdata cross to Python as a new wrapper each time: identity is Lua's rawequal
        self.rawequal = rt.eval("rawequal")

    def lift(self) -> None:
        """No cap: Python is about to touch the state (Rule 3)."""
        self.rt.set_max_memory(0)

    def cap(self) -> None:
        """The cap on: a script's own code runs (Rule 3)."""
        self.rt.set_max_memory(self.limit)

    def lifted(self, build: Callable[[], Any]) -> Any:
        """`build()`'s Lua value, made with the cap lifted (then put back on: this is for
        call-backs, inside a script's run)."""
        self.lift()
        try:
            return build()
        finally:
            self.cap()

    def budget(self) -> int:
        """The bytes a call-back may still add to the Lua state (Rule 3)."""
        return self.limit - self.rt.get_memory_used() - MARGIN

    def check(self) -> None:
        """MemoryError once the state has grown past the cap (for builders, Rule 3)."""
        if self.rt.get_memory_used() > self.limit:
            raise MemoryError

    def collect(self) -> None:
        """A full collection (inside a call-back: the cap is on again after it)."""
        self.lift()
        try:
            self.rt.gccollect()
        finally:
            self.cap()

    def fits(self, values: tuple[Any, ...]) -> bool:
        """Do the state and the strings about to be pushed fit under the cap?"""
        return sum(map(_need, values)) <= self.budget()

    def fits_one(self, value: Any) -> bool:
        """`fits((value,))` for the one value a `redis.call` returns, without the tuple (twice
        a call of the usual script)."""
        return _need(value) <= self.budget()

    def plain(self, v: Any) -> bool:
        """Is `v` a value Rule 1 lets into Lua?"""
        if isinstance(v, PLAIN_TYPES):
            return True
        kind = lua_type(v)
        return kind == "table" or (kind == "userdata" and self.rawequal(v, self.null) is True)

    def expose(self, f: Callable[..., Any], name: str) -> Callable[..., tuple[Any, ...]]:
        """`f` as Lua may call it: `(True, *values)`, `(PACKED, table, n)` for many values,
        or `(False, error text)`; never an exception, never a Python object (Rule 1), the cap
        back on every path (Rule 3). `f` returns one value, or a tuple of values."""
        most = _max_args(f)

        def crossing(*args: Any) -> tuple[Any, ...]:
            try:  # extra arguments are ignored, as a C function of Lua's ignores them
                return self._outcome(f(*args[:most]), name)
            except LibError as e:
                text = str(e).encode("utf-8", "replace")
            except MemoryError:
                text = NO_MEMORY  # collected below, once no traceback holds what was built
            except RecursionError:
                text = b"stack overflow"
            except Exception:
                log.exception("script library %s failed", name)
                text = INTERNAL
            return self.failure(text)
        return crossing

    def failure(self, text: bytes) -> tuple[bool, bytes]:
        """(False, text) with the cap back. Past the cap, what was built is collected, and a
        text that would not fit is NO_MEMORY, a string sandbox.lua keeps alive (interned:
        pushing it allocates nothing)."""
        if text is NO_MEMORY:
            self.collect()
        self.cap()
        if not self.fits((text,)):
            text = NO_MEMORY
        return False, text

    def _outcome(self, out: Any, name: str) -> tuple[Any, ...]:
        values = out if type(out) is tuple else (out,)
        if not all(self.plain(v) for v in values):
            log.error("script library %s returned a host value; refused", name)
            raise LibError(INTERNAL.decode())
        if len(values) > MANY:  # pushed as one table: lupa would grow the Lua stack (Rule 3)
            values = (self.rt.table_from(list(values)), len(values))
            self.cap()
            if not self.fits(values):
                raise MemoryError
            return (PACKED, *values)
        self.cap()
        if not self.fits(values):
            raise MemoryError
        return (True, *values)


def _max_args(f: Callable[..., Any]) -> int:
    """How many positional arguments `f` takes (a large number when it takes *args). A
    compiled lambda has no signature: expose a named function instead."""
    params = inspect.signature(f).parameters.values()
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        return 1 << 30
    return sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params)
