"""Redis's reply conversions, both ways, over RESP bytes (so every reply type of every command,
pre-encoded stream entries included, converts the same way).

RESP -> Lua (a `redis.call` reply, encoded in the script's `setresp` protocol):
  integer -> number; bulk -> string; array -> table; status -> {ok=s}; error -> {err=s};
  RESP2 null bulk / null array -> false; RESP3: null -> nil, map -> {map={..}},
  set -> {set={k=true..}}, double -> {double=n}, boolean -> boolean,
  big number -> {big_number=s}, verbatim -> {verbatim_string={format=f, string=s}}.
Lua -> RESP (a script's return value, encoded for the CALLER's protocol):
  number -> integer (truncated toward zero, as Redis's (long long) cast); string -> bulk;
  table -> array of t[1], t[2], ... up to the first nil, unless it has `err` (error), `ok`
  (status), or under RESP3 `double`, `map`, `set`, `big_number`; true -> 1 (script in RESP2)
  or a boolean (RESP3); false and nil -> null; anything else -> null.

Rule 1: nesting is bounded (MAX_DEPTH, a self-referencing table cannot recurse forever): past
it the element is `-ERR reached lua stack limit` (the enclosing arrays' headers stay, as in
Redis). The size of one converted reply is bounded (`limit` bytes): past it the conversion
raises ReplyTooBig, which the caller turns into an error reply.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from lupa.lua51 import lua_type

MAX_DEPTH = 300  # under Python's recursion limit (two frames a level)
CHECK_EVERY = 16384  # elements converted between two looks at the script memory cap
CRLF = b"\r\n"
# the field of a failed command's error table: its error was counted already (lua.py Rule 5)
COUNTED = b"ignore_error_stats_update"


class ReplyTooBig(Exception):
    pass


# ---- RESP -> Lua -----------------------------------------------------------------------------


class _Reader:
    __slots__ = ("buf", "rt", "null", "check", "count")

    def __init__(self, buf: bytes, rt: Any, check: Callable[[], None] | None) -> None:
        self.buf, self.rt, self.check, self.count = buf, rt, check, 0

    def read(self, pos: int) -> tuple[Any, int]:
        buf = self.buf
        end = buf.index(CRLF, pos)
        kind, line, pos = buf[pos], buf[pos + 1:end], end + 2
        rt = self.rt
        if kind == 0x2B:  # +
            return rt.table_from({b"ok": line}), pos
        if kind == 0x2D:  # -
            return rt.table_from({b"err": line}), pos
        if kind == 0x3A:  # :
            return int(line), pos
        if kind in (0x24, 0x3D):  # $ =
            n = int(line)
            if n < 0:
                return False, pos
            data = buf[pos:pos + n]
            if kind == 0x3D:
                return rt.table_from({b"verbatim_string": rt.table_from(
                    {b"format": data[:3], b"string": data[4:]})}), pos + n + 2
            return data, pos + n + 2
        if kind in (0x2A, 0x3E):  # * >
            n = int(line)
            if n < 0:
                return False, pos
            items = []
            for _ in range(n):
                v, pos = self.read(pos)
                items.append(v)
            self.count += n + 1
            if self.count > CHECK_EVERY and self.check is not None:
                self.count = 0
                self.check()  # a big reply is built under a lifted cap (bridge.py Rule 3)
            return rt.table_from(items), pos
        if kind == 0x25:  # %
            m = rt.table_from()
            for _ in range(int(line)):
                k, pos = self.read(pos)
                v, pos = self.read(pos)
                m[k] = v
            return rt.table_from({b"map": m}), pos
        if kind == 0x7E:  # ~
            s = rt.table_from()
            for _ in range(int(line)):
                k, pos = self.read(pos)
                s[k] = True
            return rt.table_from({b"set": s}), pos
        if kind == 0x2C:  # ,
            return rt.table_from({b"double": float(line)}), pos
        if kind == 0x23:  # #
            return line == b"t", pos
        if kind == 0x5F:  # _
            return None, pos
        if kind == 0x28:  # (
            return rt.table_from({b"big_number": line}), pos
        raise ValueError(f"unexpected RESP type {chr(kind)!r}")


def resp_to_lua(rt: Any, data: bytes, check: Callable[[], None] | None = None) -> Any:
    """One encoded reply as the Lua value a script sees; `check` (bridge.Bridge.check) is
    called as a big reply's tables are built."""
    value, _ = _Reader(data, rt, check).read(0)
    return value


def error_text(rt: Any, value: Any) -> bytes | None:
    """The `err` field of an error table ({err=...}), else None."""
    if lua_type(value) == "table":
        e = value[b"err"]
        if isinstance(e, bytes):
            return e
    return None


# ---- Lua -> RESP -----------------------------------------------------------------------------


def _double(x: float) -> bytes:
    if math.isinf(x):
        return b"inf" if x > 0 else b"-inf"
    if math.isnan(x):
        return b"nan"
    return (b"%.17g" % x)


def _integer(x: float) -> int:
    if math.isnan(x):
        return -(1 << 63)
    if x >= 2.0**63 or x < -(2.0**63):
        return -(1 << 63)
    return int(x)


def _line(text: bytes) -> bytes:
    return text.replace(b"\r", b" ").replace(b"\n", b" ")


class Writer:
    """Encodes one script return value for the caller (`resp3`: the caller's protocol;
    `script_resp`: the protocol the script chose with redis.setresp). `errors`: the error
    replies written, in order, each with whether a command's failure was counted for it
    already (its table carries COUNTED, lua.py Rule 5)."""

    __slots__ = ("rt", "resp3", "script_resp3", "out", "limit", "get", "errors")

    def __init__(self, rt: Any, rawget: Any, resp3: bool, script_resp3: bool,
                 limit: int) -> None:
        self.rt, self.resp3, self.script_resp3 = rt, resp3, script_resp3
        # Lua's rawget: a returned table's fields are read without its metatable, as Redis
        # does (`return _G` is an empty array, not the sandbox's undeclared-global error;
        # an __index that raises or calls redis.call is never run).
        self.get = rawget
        self.out = bytearray()
        self.limit = limit
        self.errors: list[tuple[bytes, bool]] = []

    def null(self) -> None:
        self.out += b"_\r\n" if self.resp3 else b"$-1\r\n"

    def write(self, v: Any, depth: int = 0) -> None:
        out = self.out
        if len(out) > self.limit:
            raise ReplyTooBig(f"{len(out)} bytes")
        if depth > MAX_DEPTH:  # as Redis: the error in place of the too deep element
            out += b"-ERR reached lua stack limit\r\n"
            return
        if v is None or v is False:
            if v is False and self.script_resp3:
                out += b"#f\r\n" if self.resp3 else b":0\r\n"
            else:
                self.null()
        elif v is True:
            out += b"#t\r\n" if self.resp3 and self.script_resp3 else b":1\r\n"
        elif isinstance(v, int):
            out += b":%d\r\n" % v
        elif isinstance(v, float):
            out += b":%d\r\n" % _integer(v)
        elif isinstance(v, bytes):
            out += b"$%d\r\n%s\r\n" % (len(v), v)
        elif lua_type(v) == "table":
            self.table(v, depth)
        else:
            self.null()

    def table(self, t: Any, depth: int) -> None:
        out, get = self.out, self.get
        err = get(t, b"err")
        if isinstance(err, bytes):
            line = _line(err)
            out += b"-%s\r\n" % line
            self.errors.append((line, get(t, COUNTED) is True))
            return
        ok = get(t, b"ok")
        if isinstance(ok, bytes):
            out += b"+%s\r\n" % _line(ok)
            return
        if self.script_resp3 and self._resp3_table(t, depth):
            return
        items = []
        i = 1
        while True:
            x = get(t, i)
            if x is None:
                break
            items.append(x)
            i += 1
        out += b"*%d\r\n" % len(items)
        for x in items:
            self.write(x, depth + 1)

    def _resp3_table(self, t: Any, depth: int) -> bool:
        out, resp3, get = self.out, self.resp3, self.get
        d = get(t, b"double")
        if isinstance(d, (int, float)):
            text = _double(float(d))
            out += b",%s\r\n" % text if resp3 else b"$%d\r\n%s\r\n" % (len(text), text)
            return True
        big = get(t, b"big_number")
        if isinstance(big, bytes):
            out += b"(%s\r\n" % _line(big) if resp3 else b"$%d\r\n%s\r\n" % (len(big), big)
            return True
        m = get(t, b"map")
        if lua_type(m) == "table":
            pairs = list(m.items())
            out += b"%%%d\r\n" % len(pairs) if resp3 else b"*%d\r\n" % (2 * len(pairs))
            for k, v in pairs:
                self.write(k, depth + 1)
                self.write(v, depth + 1)
            return True
        s = get(t, b"set")
        if lua_type(s) == "table":
            keys = [k for k, _ in s.items()]
            out += b"~%d\r\n" % len(keys) if resp3 else b"*%d\r\n" % len(keys)
            for k in keys:
                self.write(k, depth + 1)
            return True
        return False


def lua_to_resp(rt: Any, rawget: Any, value: Any, resp3: bool, script_resp3: bool,
                limit: int) -> tuple[bytes, list[tuple[bytes, bool]]]:
    """The reply's RESP bytes and the error replies in it (Writer.errors)."""
    w = Writer(rt, rawget, resp3, script_resp3, limit)
    w.write(value)
    if len(w.out) > limit:
        raise ReplyTooBig(f"{len(w.out)} bytes")
    return bytes(w.out), w.errors
