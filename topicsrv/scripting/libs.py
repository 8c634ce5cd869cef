"""The Lua libraries Redis loads that lupa's Lua 5.1 lacks, written over well-kept Python code:
cjson (orjson), cmsgpack (msgpack), bit (LuaBitOp's 32-bit semantics) and struct (Roberto
Ierusalimschy's lua-struct, the one Redis bundles).

Rule 1: Lua tables cross to Python as a list when their keys are exactly 1..n, else as a dict
(cjson/cmsgpack's own rule); an empty table is an object (`{}`), as Redis's cjson encodes it.
Rule 2: JSON null decodes to `cjson.null`, one userdata compared by identity, so scripts can
test `v == cjson.null`; a Lua number with no fraction crosses as an integer.
Rule 3: every failure is a Lua error with the library's own message prefix; nothing here
raises past the Lua boundary (lupa turns a Python exception into a Lua error).
"""

from __future__ import annotations

import struct as pystruct
from typing import Any

import msgpack
import orjson
from lupa.lua51 import lua_type

MAX_DEPTH = 1000
MSGPACK_NESTING = 16


class LibError(Exception):
    """Raised into Lua as an error string."""


def to_python(rt: Any, value: Any, null: Any, depth: int = 0, nest: int = 0) -> Any:
    """A Lua value as plain Python (Rule 1). `nest` (cmsgpack): a table that deep is nil, as
    lua-cmsgpack's LUACMSGPACK_MAX_NESTING (a self-referencing table packs as 16 copies)."""
    if depth > MAX_DEPTH:
        raise LibError("Cannot serialise, excessive nesting (1001)")
    if isinstance(value, float):
        return int(value) if value.is_integer() and abs(value) < 2**63 else value
    if value is null:
        return None
    if lua_type(value) == "table":
        if nest and depth >= nest:
            return None
        items = list(value.items())
        n = len(items)
        if n and all(type(k) in (int, float) for k, _ in items) and \
                sorted(int(k) for k, _ in items) == list(range(1, n + 1)):
            return [to_python(rt, value[i], null, depth + 1, nest) for i in range(1, n + 1)]
        return {_key(k): to_python(rt, v, null, depth + 1, nest) for k, v in items}
    return value


def _key(k: Any) -> Any:
    if isinstance(k, bytes):
        return k.decode("utf-8", "replace")
    if isinstance(k, float) and k.is_integer():
        return str(int(k))
    return str(k)


def to_lua(rt: Any, value: Any, null: Any) -> Any:
    """Plain Python (decoded JSON / msgpack) as Lua values (Rule 2)."""
    if value is None:
        return null
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, list):
        return rt.table_from([to_lua(rt, v, null) for v in value])
    if isinstance(value, dict):
        return rt.table_from({(k.encode() if isinstance(k, str) else k): to_lua(rt, v, null)
                              for k, v in value.items()})
    return value


def _json_default(v: Any) -> Any:
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    raise TypeError(f"Cannot serialise {type(v).__name__}")


def make_cjson(rt: Any, null: Any) -> dict[str, Any]:
    def encode(value: Any) -> bytes:
        try:
            out = orjson.dumps(to_python(rt, value, null), default=_json_default,
                               option=orjson.OPT_NON_STR_KEYS)
        except (TypeError, LibError) as e:
            raise LibError(str(e)) from None
        return out.replace(b"/", b"\\/")

    def decode(text: Any) -> Any:
        if not isinstance(text, bytes):
            raise LibError("bad argument #1 to 'decode' (string expected)")
        try:
            return to_lua(rt, orjson.loads(text), null)
        except orjson.JSONDecodeError as e:
            raise LibError(f"Expected value but found invalid token at character {e.pos + 1}") \
                from None

    def encode_keep_buffer(keep: Any = None) -> Any:
        """lua-cjson's buffer reuse switch: no buffer to keep here; checks its argument."""
        if keep is not None and not isinstance(keep, (bool, int, float)):
            raise LibError("bad argument #1 to 'encode_keep_buffer' (boolean expected)")
        return keep

    return {"encode": encode, "decode": decode, "null": null,
            "encode_keep_buffer": encode_keep_buffer}


def make_cmsgpack(rt: Any, null: Any) -> dict[str, Any]:
    def pack(*values: Any) -> bytes:
        if not values:
            raise LibError("MessagePack pack needs input.")
        return b"".join(msgpack.packb(to_python(rt, v, null, nest=MSGPACK_NESTING),
                                      use_bin_type=False) for v in values)

    def unpack(data: Any) -> Any:
        if not isinstance(data, bytes):
            raise LibError("bad argument #1 to 'unpack' (string expected)")
        unpacker = msgpack.Unpacker(raw=True, strict_map_key=False)
        unpacker.feed(data)
        try:
            return tuple(to_lua(rt, v, None) for v in unpacker)  # msgpack nil: Lua nil
        except (ValueError, msgpack.UnpackException) as e:
            raise LibError(f"Bad data format in input: {e}") from None

    def unpack_limit(data: Any, limit: Any = 0, offset: Any = 0) -> Any:
        """lua-cmsgpack's: at most `limit` values (0: all) from byte `offset`; returns the
        offset after them (-1 at the end of `data`) and the values."""
        if not isinstance(data, bytes):
            raise LibError("bad argument #1 to 'unpack_limit' (string expected)")
        lim, off = int(limit or 0), int(offset or 0)
        if lim < 0 or off < 0:
            raise LibError(f"Invalid request to unpack with offset of {off} and limit of "
                           f"{lim}.")
        if off > len(data):
            raise LibError(f"Start offset {off} greater than input length {len(data)}.")
        unpacker = msgpack.Unpacker(raw=True, strict_map_key=False)
        unpacker.feed(data[off:])
        out = []
        try:
            for v in unpacker:
                out.append(to_lua(rt, v, None))
                if lim and len(out) >= lim:
                    break
        except (ValueError, msgpack.UnpackException) as e:
            raise LibError(f"Bad data format in input: {e}") from None
        end = off + unpacker.tell()
        return (-1 if end >= len(data) else end, *out)

    def unpack_one(data: Any, offset: Any = 0) -> Any:
        return unpack_limit(data, 1, offset)

    return {"pack": pack, "unpack": unpack, "unpack_limit": unpack_limit,
            "unpack_one": unpack_one}


# ---- bit (LuaBitOp) ------------------------------------------------------------------------


def tobit(x: Any) -> int:
    n = int(round(float(x))) & 0xFFFFFFFF  # LuaBitOp rounds to nearest, keeps 32 bits
    return n - (1 << 32) if n & 0x80000000 else n


def _u(x: Any) -> int:
    return tobit(x) & 0xFFFFFFFF


def make_bit() -> dict[str, Any]:
    def tohex(x: Any, n: Any = 8) -> bytes:
        n = int(n)
        upper = n < 0
        n = min(abs(n), 8)
        text = format(_u(x) & ((1 << (4 * n)) - 1), f"0{n}{'X' if upper else 'x'}")
        return text.encode()

    def fold(op: Any) -> Any:
        def f(*xs: Any) -> int:
            acc = _u(xs[0])
            for x in xs[1:]:
                acc = op(acc, _u(x))
            return tobit(acc)
        return f

    def rol(x: Any, n: Any) -> int:
        s = int(n) & 31
        v = _u(x)
        return tobit(((v << s) | (v >> (32 - s))) & 0xFFFFFFFF)

    def ror(x: Any, n: Any) -> int:
        s = int(n) & 31
        v = _u(x)
        return tobit(((v >> s) | (v << (32 - s))) & 0xFFFFFFFF)

    return {
        "tobit": tobit, "tohex": tohex,
        "bnot": lambda x: tobit(~_u(x) & 0xFFFFFFFF),
        "band": fold(lambda a, b: a & b), "bor": fold(lambda a, b: a | b),
        "bxor": fold(lambda a, b: a ^ b),
        "lshift": lambda x, n: tobit((_u(x) << (int(n) & 31)) & 0xFFFFFFFF),
        "rshift": lambda x, n: tobit(_u(x) >> (int(n) & 31)),
        "arshift": lambda x, n: tobit(tobit(x) >> (int(n) & 31)),
        "rol": rol, "ror": ror,
        "bswap": lambda x: tobit(int.from_bytes(_u(x).to_bytes(4, "little"), "big")),
    }


# ---- struct (lua-struct) -------------------------------------------------------------------

_SIZES = {"b": 1, "B": 1, "h": 2, "H": 2, "l": 8, "L": 8, "T": 8, "f": 4, "d": 8}


def _items(fmt: bytes) -> list[tuple[str, int]]:
    """(option, size) pairs of a lua-struct format; endianness items carry size 0."""
    text, out, i = fmt.decode("latin-1"), [], 0
    while i < len(text):
        c = text[i]
        i += 1
        j = i
        while j < len(text) and text[j].isdigit():
            j += 1
        num = int(text[i:j]) if j > i else None
        if c in "iIc":
            i = j
            out.append((c, num if num is not None else (4 if c != "c" else 1)))
        elif c in _SIZES:
            out.append((c, _SIZES[c]))
        elif c in "<>=!":
            i = j
            out.append((c, 0))
        elif c in "sx":
            out.append((c, 1))
        elif c != " ":
            raise LibError(f"invalid format option '{c}'")
    return out


def _code(c: str, size: int) -> str:
    if c in "fd":
        return c
    code = {1: "b", 2: "h", 4: "i", 8: "q"}.get(size)
    if code is None:
        raise LibError(f"integral size {size} is larger than limit of 8")
    return code.upper() if c.isupper() else code


def make_struct() -> dict[str, Any]:
    def pack(fmt: bytes, *values: Any) -> bytes:
        out, endian, k = bytearray(), "<", 0
        for c, size in _items(fmt):
            if c in "<>=!":
                endian = {"<": "<", ">": ">", "=": "<", "!": endian}[c]
                continue
            if c == "x":
                out.append(0)
                continue
            v = values[k]
            k += 1
            if c == "s":
                out += bytes(v) + b"\0"
            elif c == "c":
                data = bytes(v)
                out += data[:size].ljust(size, b"\0") if size else data
            else:
                num = float(v) if c in "fd" else int(v)
                if c not in "fd":
                    num = int(num) & ((1 << (8 * size)) - 1)
                    if not c.isupper() and num >= 1 << (8 * size - 1):
                        num -= 1 << (8 * size)
                out += pystruct.pack(endian + _code(c, size), num)
        return bytes(out)

    def unpack(fmt: bytes, data: bytes, pos: Any = 1) -> tuple[Any, ...]:
        out: list[Any] = []
        endian, p = "<", int(pos) - 1
        for c, size in _items(fmt):
            if c in "<>=!":
                endian = {"<": "<", ">": ">", "=": "<", "!": endian}[c]
                continue
            if c == "x":
                p += 1
                continue
            if c == "s":
                end = data.index(b"\0", p)
                out.append(data[p:end])
                p = end + 1
                continue
            if c == "c":
                n = size if size else int(out.pop())
                if p + n > len(data):
                    raise LibError("bad argument #2 to 'unpack' (data string too short)")
                out.append(data[p:p + n])
                p += n
                continue
            if p + size > len(data):
                raise LibError("bad argument #2 to 'unpack' (data string too short)")
            (v,) = pystruct.unpack_from(endian + _code(c, size), data, p)
            out.append(v)
            p += size
        return (*out, p + 1)

    def size(fmt: bytes) -> int:
        return sum(s for c, s in _items(fmt) if c not in "<>=!")

    return {"pack": pack, "unpack": unpack, "size": size}
