"""The Lua libraries Redis loads that lupa's Lua 5.1 lacks, written over well-kept Python code:
cjson (its encoder a port of lua-cjson 2.1's, JsonEncoder; decoding by orjson), cmsgpack
(msgpack), bit (LuaBitOp's 32-bit semantics) and struct (Roberto Ierusalimschy's lua-struct,
the one Redis bundles).

Rule 1: Lua tables cross to Python (cmsgpack) as a list when their keys are exactly 1..n, else
as a dict; cjson.encode applies lua-cjson's own rule (JsonEncoder.array_length); an empty
table is an object (`{}`), as Redis's cjson encodes it.
Rule 2: JSON null decodes to `cjson.null`, one userdata compared by identity, so scripts can
test `v == cjson.null`; a Lua number with no fraction crosses as an integer.
Rule 3: every failure is a Lua error with the library's own message prefix; nothing here
raises past the Lua boundary (lupa turns a Python exception into a Lua error, which
sandbox.lua's `lua_errors` turns into a string positioned at the caller).
"""

from __future__ import annotations

import math
import re
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


def _lua_scalar(value: Any, null: Any) -> Any:
    if value is None:
        return null
    if isinstance(value, str):
        return value.encode()
    return value


def _lua_key(k: Any) -> Any:
    return k.encode() if isinstance(k, str) else k


def to_lua(rt: Any, value: Any, null: Any) -> Any:
    """Plain Python (decoded JSON / msgpack) as Lua values (Rule 2). Iterative (a container
    becomes a table after its children), so any nesting the decoders accept converts without
    Python's recursion limit."""
    if not isinstance(value, (list, dict)):
        return _lua_scalar(value, null)
    # frames: [container, its items, converted (key, value) pairs, key of the open child]
    stack: list[list[Any]] = [[value, iter(value.items() if isinstance(value, dict)
                                           else enumerate(value)), [], None]]
    while True:
        frame = stack[-1]
        for k, v in frame[1]:
            if isinstance(v, (list, dict)):
                frame[3] = k
                stack.append([v, iter(v.items() if isinstance(v, dict) else enumerate(v)),
                              [], None])
                break
            frame[2].append((k, _lua_scalar(v, null)))
        else:
            stack.pop()
            pairs = frame[2]
            table = (rt.table_from({_lua_key(k): x for k, x in pairs})
                     if isinstance(frame[0], dict) else rt.table_from([x for _, x in pairs]))
            if not stack:
                return table
            parent = stack[-1]
            parent[2].append((parent[3], table))


_JSON_ESCAPES = {c: b"\\u%04x" % c for c in (*range(32), 127)}
_JSON_ESCAPES.update({8: b"\\b", 9: b"\\t", 10: b"\\n", 12: b"\\f", 13: b"\\r",
                      34: b'\\"', 47: b"\\/", 92: b"\\\\"})
_JSON_ESCAPE = re.compile(rb'[\x00-\x1f"/\\\x7f]')
_INVALID_NUMBERS = (b"off", b"on", b"null")


def _json_string(v: bytes) -> bytes:
    return b'"' + _JSON_ESCAPE.sub(lambda m: _JSON_ESCAPES[m.group()[0]], v) + b'"'


class JsonConfig:
    """lua-cjson's settings (one per Lua state: they last until SCRIPT FLUSH, as Redis's)."""

    def __init__(self) -> None:
        self.encode_max_depth = 1000
        self.decode_max_depth = 1000
        self.encode_invalid_numbers = 0  # 0 off, 1 on, 2 null
        self.precision = 14
        self.sparse_convert = False
        self.sparse_ratio = 2
        self.sparse_safe = 10


class JsonEncoder:
    """lua-cjson 2.1's encoder (the one Redis bundles): its array rule (keys exactly the
    positive integers, not too sparse), key types, %.14g numbers, escapes (bytes >= 128 go out
    as they are), nesting limit and invalid-number modes, and its error texts."""

    def __init__(self, cfg: JsonConfig, null: Any, rawequal: Any) -> None:
        self.cfg, self.null, self.rawequal = cfg, null, rawequal

    def number(self, v: float) -> bytes:
        if math.isnan(v) or math.isinf(v):
            mode = self.cfg.encode_invalid_numbers
            if mode == 0:
                raise LibError("Cannot serialise number: must not be NaN or Inf")
            if mode == 2:
                return b"null"
            return b"nan" if math.isnan(v) else (b"inf" if v > 0 else b"-inf")
        return b"%.*g" % (self.cfg.precision, float(v))

    def encode(self, root: Any) -> bytes:
        """The JSON text of `root`. Iterative (a stack of what is left to write: literal
        bytes or (value, depth)), so nesting is bounded by encode_max_depth only."""
        out: list[bytes] = []
        todo: list[Any] = [(root, 0)]
        while todo:
            item = todo.pop()
            if type(item) is bytes:
                out.append(item)
                continue
            v, depth = item
            if v is None or (lua_type(v) == "userdata" and self.rawequal(v, self.null)):
                out.append(b"null")
            elif v is True or v is False:
                out.append(b"true" if v else b"false")
            elif isinstance(v, (int, float)):
                out.append(self.number(v))
            elif isinstance(v, bytes):
                out.append(_json_string(v))
            elif lua_type(v) == "table":
                todo += reversed(self.table(v, depth + 1))
            else:
                raise LibError(f"Cannot serialise {_typename(v)}: type not supported")
        return b"".join(out)

    def table(self, t: Any, depth: int) -> list[Any]:
        """What a table writes, in order: literal bytes and (value, depth) to encode."""
        if depth > self.cfg.encode_max_depth:
            raise LibError(f"Cannot serialise, excessive nesting ({depth})")
        items = list(t.items())
        n = self.array_length(items)
        parts: list[Any] = []
        if n > 0:
            for i in range(1, n + 1):
                parts += (b"," if i > 1 else b"[", (t[i], depth))
            parts.append(b"]")
            return parts
        for i, (k, v) in enumerate(items):
            if isinstance(k, bytes):
                key = _json_string(k)
            elif isinstance(k, (int, float)) and not isinstance(k, bool):
                key = b'"' + self.number(k) + b'"'
            else:
                raise LibError(f"Cannot serialise {_typename(k)}: table key must be a number or "
                               "string")
            parts += ((b"," if i else b"{") + key + b":", (v, depth))
        parts.append(b"}" if items else b"{}")
        return parts

    def array_length(self, items: list[tuple[Any, Any]]) -> int:
        """lua-cjson's lua_array_length: the array's length, 0 for an object (also an empty
        table, as Redis's cjson encodes it), or the sparse-array refusal."""
        top = 0
        for k, _ in items:
            if isinstance(k, bool) or not isinstance(k, (int, float)) or k < 1 or k != int(k):
                return 0
            top = max(top, int(k))
        cfg = self.cfg
        if cfg.sparse_ratio > 0 and top > len(items) * cfg.sparse_ratio and \
                top > cfg.sparse_safe:
            if not cfg.sparse_convert:
                raise LibError("Cannot serialise table: excessively sparse array")
            return 0
        return top


def _decode_depth(text: bytes, limit: int) -> None:
    """lua-cjson's decode nesting limit, checked before parsing: the first `[`/`{` (outside
    strings) past `limit` levels is refused with its 1-based position."""
    depth, i, n = 0, 0, len(text)
    while i < n:
        c = text[i]
        if c == 34:  # a string: skip it and its escapes
            i += 1
            while i < n and text[i] != 34:
                i += 2 if text[i] == 92 else 1
        elif c in (91, 123):
            depth += 1
            if depth > limit:
                raise LibError(f"Found too many nested data structures ({depth}) at character "
                               f"{i + 1}")
        elif c in (93, 125):
            depth -= 1
        i += 1


def _typename(v: Any) -> str:
    """Lua's name of the type of a value crossing from Lua."""
    if isinstance(v, bytes):
        return "string"
    if isinstance(v, bool):
        return "boolean"
    return lua_type(v) or ("nil" if v is None else "number")


def _int_option(name: str, args: tuple[Any, ...], lo: int, hi: int) -> int | None:
    """lua-cjson's json_integer_option: the new value, None when not given."""
    if not args or args[0] is None:
        return None
    v = args[0]
    if isinstance(v, bytes):  # Lua's checkinteger takes a numeric string
        try:
            v = float(v)
        except ValueError:
            pass
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise LibError(f"bad argument #1 to '{name}' (number expected, got "
                       f"{_typename(v)})")
    if not lo <= int(v) <= hi:
        raise LibError(f"bad argument #1 to '{name}' (expected integer between {lo} and {hi})")
    return int(v)


def make_cjson(rt: Any, null: Any) -> dict[str, Any]:
    cfg = JsonConfig()
    rawequal = rt.eval("rawequal")  # userdata cross to Python as new wrappers each time

    def encode(*args: Any) -> bytes:
        if len(args) != 1:
            raise LibError("bad argument #1 to '?' (expected 1 argument)")
        return JsonEncoder(cfg, null, rawequal).encode(args[0])

    def decode(text: Any) -> Any:
        if not isinstance(text, bytes):
            raise LibError("bad argument #1 to 'decode' (string expected)")
        _decode_depth(text, cfg.decode_max_depth)
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

    def int_setting(name: str, attr: str, hi: int) -> Any:
        """A lua-cjson integer setting: sets it when given (1..hi), returns it."""
        def setting(*args: Any) -> int:
            v = _int_option(name, args, 1, hi)
            if v is not None:
                setattr(cfg, attr, v)
            return int(getattr(cfg, attr))
        return setting

    def encode_invalid_numbers(*args: Any) -> Any:
        """off / on / null (or false / true); returns the mode, a boolean for off and on."""
        if args and args[0] is not None:
            v = args[0]
            if isinstance(v, bool):
                cfg.encode_invalid_numbers = int(v)
            elif isinstance(v, bytes) and v in _INVALID_NUMBERS:
                cfg.encode_invalid_numbers = _INVALID_NUMBERS.index(v)
            else:
                shown = v.decode("latin-1") if isinstance(v, bytes) else str(v)
                raise LibError(f"bad argument #1 to 'encode_invalid_numbers' (invalid option "
                               f"'{shown}')")
        mode = cfg.encode_invalid_numbers
        return mode == 1 if mode <= 1 else b"null"

    def encode_sparse_array(*args: Any) -> tuple[Any, ...]:
        """convert (boolean), ratio, safe: lua-cjson's sparse array handling."""
        if args and args[0] is not None:
            cfg.sparse_convert = bool(args[0])
        ratio = _int_option("encode_sparse_array", args[1:], 0, 2147483647)
        safe = _int_option("encode_sparse_array", args[2:], 0, 2147483647)
        if ratio is not None:
            cfg.sparse_ratio = ratio
        if safe is not None:
            cfg.sparse_safe = safe
        return cfg.sparse_convert, cfg.sparse_ratio, cfg.sparse_safe

    return {"encode": encode, "decode": decode, "null": null,
            "encode_keep_buffer": encode_keep_buffer,
            "encode_max_depth": int_setting("encode_max_depth", "encode_max_depth", 2147483647),
            "decode_max_depth": int_setting("decode_max_depth", "decode_max_depth", 2147483647),
            "encode_number_precision": int_setting("encode_number_precision", "precision", 14),
            "encode_invalid_numbers": encode_invalid_numbers,
            "encode_sparse_array": encode_sparse_array}


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
