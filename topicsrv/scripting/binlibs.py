"""The two binary libraries Redis bundles for scripts, on Lua numbers and strings only: bit
(LuaBitOp 1.0's 32-bit semantics) and struct (Roberto Ierusalimschy's lua-struct).

Rule 1: arguments are checked as their C originals check them (luaL_checknumber: a number or
a numeric string; luaL_checklstring: a string or a number), with Lua's texts ("bad argument
#2 to '?' (number expected, got table)"); nothing else about an argument is ever used, so a
table, a function or cjson.null is only ever refused.
Rule 2: numbers convert as the C code converts them: LuaBitOp's tobit keeps the low 32 bits of
`n + 2^52 + 2^51` (NaN and the infinities are 0), and a C `(int)` cast of NaN, an infinity or
an out-of-range double is INT_MIN, as on x86.
Rule 3: what struct.pack writes is bounded by its arguments (a `c<n>` item takes n bytes of a
string at least n long, else "string too short"), and struct.unpack returns at most
MAX_RESULTS values ("too many results"), as Lua's C stack limit would; the bridge checks the
result against the script memory cap (bridge.py Rule 3).
"""

from __future__ import annotations

import math
import re
import struct as pystruct
from typing import Any

from lupa.lua51 import lua_type

from topicsrv.scripting.bridge import Bridge, LibError

MAX_RESULTS = 7999  # LUAI_MAXCSTACK 8000, minus the position struct.unpack returns too
INT_MIN = -(1 << 31)
_MAGIC = pystruct.Struct("<d")


def typename(v: Any) -> str:
    """Lua's name of the type of a value crossing from Lua."""
    if isinstance(v, bytes):
        return "string"
    if isinstance(v, bool):
        return "boolean"
    if v is None:
        return "nil"
    return lua_type(v) or "number"


def check_number(v: Any, arg: int, fname: str = "?") -> float:
    """luaL_checknumber (Rule 1)."""
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return float(v)
    if isinstance(v, bytes):
        text = v.strip()
        try:
            return float(int(text, 16)) if text.lower().startswith((b"0x", b"-0x")) \
                else float(text)
        except ValueError:
            pass
    raise LibError(f"bad argument #{arg} to '{fname}' (number expected, got {typename(v)})")


def check_string(v: Any, arg: int, fname: str = "?") -> bytes:
    """luaL_checklstring: a string, or a number as Lua writes it (Rule 1)."""
    if isinstance(v, bytes):
        return v
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        f = float(v)
        return b"%d" % int(f) if f.is_integer() and abs(f) < 1e15 else b"%.14g" % f
    raise LibError(f"bad argument #{arg} to '{fname}' (string expected, got {typename(v)})")


def c_int(x: float) -> int:
    """A C `(int)` cast of a double, as x86 does it (Rule 2)."""
    if math.isnan(x) or not -2147483649.0 < x < 2147483648.0:
        return INT_MIN
    return int(x)


# ---- bit (LuaBitOp) ------------------------------------------------------------------------


def tobit_number(n: float) -> int:
    """LuaBitOp's tobit: the low 32 bits of n + 2^52 + 2^51, signed (Rule 2)."""
    if math.isnan(n) or math.isinf(n):
        return 0
    (bits,) = pystruct.unpack("<Q", _MAGIC.pack(n + 6755399441055744.0))
    low = bits & 0xFFFFFFFF
    return low - (1 << 32) if low & 0x80000000 else low


def tobit(x: Any, arg: int = 1) -> int:
    return tobit_number(check_number(x, arg))


def _u(x: Any, arg: int) -> int:
    return tobit(x, arg) & 0xFFFFFFFF


def _signed(v: int) -> int:
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v & 0x80000000 else v


def make_bit() -> dict[str, Any]:
    def tohex(x: Any = None, n: Any = None) -> bytes:
        v = _u(x, 1)
        digits = 8 if n is None else c_int(check_number(n, 2))
        if digits == INT_MIN:  # Redis's patched bitop (its "lua bit.tohex bug" test)
            digits = INT_MIN + 1
        upper = digits < 0
        if upper:
            digits = -digits
        digits = min(digits, 8)
        if digits <= 0:
            return b""
        text = format(v & ((1 << (4 * digits)) - 1), f"0{digits}{'X' if upper else 'x'}")
        return text.encode()

    def fold(op: Any) -> Any:
        def f(*xs: Any) -> int:
            acc = _u(xs[0] if xs else None, 1)
            for i, x in enumerate(xs[1:], 2):
                acc = op(acc, _u(x, i))
            return _signed(acc)
        return f

    def shift(op: Any) -> Any:
        def f(x: Any = None, n: Any = None) -> int:
            v = _u(x, 1)
            return _signed(op(v, tobit(n, 2) & 31))
        return f

    def rol(v: int, s: int) -> int:
        return (v << s) | (v >> (32 - s))

    def ror(v: int, s: int) -> int:
        return (v >> s) | (v << (32 - s))

    return {
        "tobit": lambda x=None: tobit(x),
        "tohex": tohex,
        "bnot": lambda x=None: _signed(~_u(x, 1)),
        "band": fold(lambda a, b: a & b), "bor": fold(lambda a, b: a | b),
        "bxor": fold(lambda a, b: a ^ b),
        "lshift": shift(lambda v, s: v << s),
        "rshift": shift(lambda v, s: v >> s),
        "arshift": shift(lambda v, s: _signed(v) >> s),
        "rol": shift(rol), "ror": shift(ror),
        "bswap": lambda x=None: _signed(int.from_bytes(_u(x, 1).to_bytes(4, "little"), "big")),
    }


# ---- struct (lua-struct) -------------------------------------------------------------------

_SIZES = {"b": 1, "B": 1, "h": 2, "H": 2, "l": 8, "L": 8, "T": 8, "f": 4, "d": 8, "s": 0}
MAX_INT_SIZE = 32
MAX_ALIGN = 8
_INT_OPTIONS = "bBhHlLTiI"


# one token of a format: a run of padding bytes, a run of control options (only the last
# endianness and the last alignment of a run count), or one data item with its digits; runs
# are matched by the regex engine, so a long format of padding or control options costs C
# time, not a Python step per character (a script cannot be stopped inside a library call)
_TOKEN = re.compile(r"(x+)|((?:[<>= ]|![0-9]*)+)|([bBhHlLTfdsiIc])([0-9]*)|(.)", re.S)
_ALIGNS = re.compile(r"!([0-9]*)")


class _Format:
    """lua-struct's format reader: (option, size, alignment padding) per item."""

    def __init__(self, fmt: bytes) -> None:
        self.tokens = _TOKEN.finditer(fmt.decode("latin-1"))
        self.little, self.align = True, 1

    def next_item(self, pos: int) -> tuple[str, int, int] | None:
        """The next data item at byte `pos`: (option, size, alignment padding), a run of
        padding as ("x", its length, 0); None at the end. Control options are applied on
        the way."""
        for m in self.tokens:
            pad_run, controls, opt, digits, bad = m.groups()
            if pad_run:
                return "x", len(pad_run), 0
            if controls:
                self._control(controls)
                continue
            if bad is not None:
                raise LibError(f"bad argument #1 to '?' (invalid format option '{bad}')")
            if opt in "iI":
                size = _num(digits, 4)
                if size > MAX_INT_SIZE:
                    raise LibError(f"integral size {size} is larger than limit of "
                                   f"{MAX_INT_SIZE}")
            elif opt == "c":
                size = _num(digits, 1)
            else:
                size = _SIZES[opt]
                if digits:  # digits after another option are options themselves: invalid
                    raise LibError(f"bad argument #1 to '?' (invalid format option "
                                   f"'{digits[0]}')")
            pad = 0
            if opt != "c" and size:
                a = min(size, self.align)
                pad = (a - (pos & (a - 1))) & (a - 1)
            return opt, size, pad
        return None

    def _control(self, run: str) -> None:
        ends = [c for c in (run.rfind("<"), run.rfind(">"), run.rfind("=")) if c >= 0]
        if ends:
            self.little = run[max(ends)] != ">"
        for digits in _ALIGNS.findall(run):
            a = _num(digits, MAX_ALIGN)
            if a & (a - 1):
                raise LibError(f"alignment {a} is not a power of 2")
            self.align = a


def _num(digits: str, default: int) -> int:
    if not digits:
        return default
    if len(digits) > 10 or int(digits) > 2147483647:
        raise LibError("integral size overflow")
    return int(digits)


def _int_bytes(n: float, size: int, little: bool) -> bytes:
    if math.isnan(n) or not -9.3e18 < n < 1.85e19:
        value = -(1 << 63)  # a C cast out of range, as x86 does it
    else:
        value = int(n)
    raw = (value & ((1 << (8 * size)) - 1) if size <= 8
           else value % (1 << (8 * size))).to_bytes(size, "little")
    return raw if little else raw[::-1]


def make_struct(bridge: Bridge) -> dict[str, Any]:
    def pack(fmt: Any = None, *values: Any) -> bytes:
        form = _Format(check_string(fmt, 1))
        out = bytearray()
        arg = 2
        while (item := form.next_item(len(out))) is not None:
            opt, size, pad = item
            out += b"\0" * pad
            if opt in _INT_OPTIONS:
                n = check_number(values[arg - 2] if arg - 2 < len(values) else None, arg)
                arg += 1
                out += _int_bytes(n, size, form.little)
            elif opt == "x":
                out += b"\0" * size
            elif opt in "fd":
                n = check_number(values[arg - 2] if arg - 2 < len(values) else None, arg)
                arg += 1
                code = ("<" if form.little else ">") + opt
                try:
                    out += pystruct.pack(code, n)
                except OverflowError:  # a C float cast of a huge double
                    out += pystruct.pack(code, math.copysign(math.inf, n))
            elif opt in "cs":
                s = check_string(values[arg - 2] if arg - 2 < len(values) else None, arg)
                arg += 1
                if size == 0 or opt == "s":
                    size = len(s)
                if len(s) < size:  # lua-struct names the next argument here
                    raise LibError(f"bad argument #{arg} to '?' (string too short)")
                out += s[:size]
                if opt == "s":
                    out += b"\0"
            if len(out) > bridge.budget():
                raise MemoryError
        return bytes(out)

    def unpack(fmt: Any = None, data: Any = None, pos: Any = None) -> tuple[Any, ...]:
        form = _Format(check_string(fmt, 1))
        buf = check_string(data, 2)
        p = 0 if pos is None else c_int(check_number(pos, 3)) - 1
        if p < 0:
            p = 0
        out: list[Any] = []
        while (item := form.next_item(p)) is not None:
            opt, size, pad = item
            p += pad
            if opt == "c" and size == 0:
                if not out or not isinstance(out[-1], (int, float)):
                    raise LibError("format 'c0' needs a previous size")
                size = max(int(out.pop()), 0)
            if p + size > len(buf):
                raise LibError("bad argument #2 to '?' (data string too short)")
            if len(out) >= MAX_RESULTS:
                raise LibError("stack overflow (too many results)")
            if opt in _INT_OPTIONS:
                raw = buf[p:p + size]
                v = int.from_bytes(raw, "little" if form.little else "big",
                                   signed=opt.islower())
                out.append(v if size <= 8 else float(v))
            elif opt in "fd":
                (f,) = pystruct.unpack_from(("<" if form.little else ">") + opt, buf, p)
                out.append(f)
            elif opt == "x":
                pass
            elif opt == "c":
                out.append(buf[p:p + size])
            elif opt == "s":
                end = buf.find(b"\0", p)
                if end < 0:
                    raise LibError("unfinished string in data")
                out.append(buf[p:end])
                size = end - p + 1
            p += size
        return (*out, p + 1)

    def size(fmt: Any = None) -> int:
        form = _Format(check_string(fmt, 1))
        pos = 0
        while (item := form.next_item(pos)) is not None:
            opt, n, pad = item
            if opt == "s":
                raise LibError("bad argument #1 to '?' (option 's' has no fixed size)")
            if opt == "c" and n == 0:
                raise LibError("bad argument #1 to '?' (option 'c0' has no fixed size)")
            pos += pad + n
        return pos

    return {"pack": pack, "unpack": unpack, "size": size}
