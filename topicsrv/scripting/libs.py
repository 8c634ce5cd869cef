"""The Lua libraries Redis loads that lupa's Lua 5.1 lacks, written over well-kept Python code:
cjson (its encoder a port of lua-cjson 2.1's, JsonEncoder; decoding by orjson) and cmsgpack
(msgpack); bit and struct are in binlibs.py. Each function is handed to Lua through the
bridge (bridge.py): its failures are Lua strings, its values plain Lua values.

Rule 1: Lua tables cross to Python (cmsgpack) as a list when their keys are exactly 1..n, else
as a dict; cjson.encode applies lua-cjson's own rule (JsonEncoder.array_length); an empty
table is an object (`{}`), as Redis's cjson encodes it.
Rule 2: JSON null decodes to `cjson.null`, one userdata compared by identity, so scripts can
test `v == cjson.null`; a Lua number with no fraction crosses as an integer.
Rule 3: every failure is a LibError with the library's own text (bridge.py hands it to Lua
as a string); decoded values are only strings, numbers, booleans, cjson.null and tables of
those (a msgpack extension type is "Bad data format in input.", as lua-cmsgpack's).
Rule 4: Lua tables are read raw (`items()`, `rawget`): no metamethod of a script's table runs
inside a library call (bridge.py Rule 4); the tables built while decoding are checked against
the script memory cap as they grow (bridge.py Rule 3).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from typing import Any

import msgpack
import orjson
from lupa.lua51 import lua_type

from topicsrv.scripting.binlibs import c_int, check_number
from topicsrv.scripting.binlibs import typename as _typename
from topicsrv.scripting.bridge import Bridge, LibError

__all__ = ["LibError", "make_cjson", "make_cmsgpack"]
CHECK_EVERY = 1024  # tables built between two looks at the memory cap (Rule 4)

MAX_DEPTH = 1000
MSGPACK_NESTING = 16


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
            by_key = dict(items)
            return [to_python(rt, by_key[i], null, depth + 1, nest) for i in range(1, n + 1)]
        return {_key(k): to_python(rt, v, null, depth + 1, nest) for k, v in items}
    if isinstance(value, (bytes, bool, int)) or value is None:
        return value
    # functions, foreign userdata: what lua-cmsgpack packs for a type it cannot write (nil)
    return None


def _key(k: Any) -> Any:
    if isinstance(k, bytes):
        return k.decode("utf-8", "replace")
    if isinstance(k, float) and k.is_integer():
        return str(int(k))
    return str(k)


def _lua_scalar(value: Any, null: Any) -> Any:
    """A decoded scalar as its Lua value (Rule 3): anything but JSON/msgpack's own types
    (an extension type, a timestamp) is bad data."""
    if value is None:
        return null
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, (bytes, bool, int, float)):
        return value
    raise LibError("Bad data format in input.")


def _lua_key(k: Any) -> Any:
    return k.encode() if isinstance(k, str) else k


def to_lua(rt: Any, value: Any, null: Any, check: Callable[[], None] | None = None) -> Any:
    """Plain Python (decoded JSON / msgpack) as Lua values (Rule 2). Iterative (a container
    becomes a table after its children), so any nesting the decoders accept converts without
    Python's recursion limit. `check` is called every CHECK_EVERY tables (Rule 4)."""
    if not isinstance(value, (list, dict)):
        return _lua_scalar(value, null)
    built = 0
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
            built += 1
            if check is not None and built % CHECK_EVERY == 0:
                check()
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
_JSON_ESCAPABLE = bytes([*range(32), 34, 47, 92, 127])
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
        self.changed = False  # a script set one of these (CJson.reset)


class JsonEncoder:
    """lua-cjson 2.1's encoder (the one Redis bundles): its array rule (keys exactly the
    positive integers, not too sparse), key types, %.14g numbers, escapes (bytes >= 128 go out
    as they are), nesting limit and invalid-number modes, and its error texts."""

    def __init__(self, cfg: JsonConfig, null: Any, rawequal: Any, budget: int = 1 << 62) -> None:
        self.cfg, self.null, self.rawequal, self.budget = cfg, null, rawequal, budget

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
        size, budget = 0, self.budget
        todo: list[Any] = [(root, 0)]
        while todo:
            item = todo.pop()
            if type(item) is bytes:
                out.append(item)
                size += len(item)
                if size > budget:  # the text would not fit in the script's memory
                    raise MemoryError
                continue
            v, depth = item
            if v is None or (lua_type(v) == "userdata" and self.rawequal(v, self.null)):
                out.append(b"null")
            elif v is True or v is False:
                out.append(b"true" if v else b"false")
            elif isinstance(v, (int, float)):
                out.append(self.number(v))
            elif isinstance(v, bytes):
                # the escaped length, bounded before escaping (an escape is at most 6 bytes)
                escapes = len(v) - len(v.translate(None, _JSON_ESCAPABLE))
                if size + len(v) + 5 * escapes + 2 > budget:
                    raise MemoryError
                text = _json_string(v)
                size += len(text)
                out.append(text)
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
            by_key = dict(items)  # raw reads (Rule 4): a missing index is nil, as rawgeti
            for i in range(1, n + 1):
                parts += (b"," if i > 1 else b"[", (by_key.get(i), depth))
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
    if not lo <= c_int(v) <= hi:
        raise LibError(f"bad argument #1 to '{name}' (expected integer between {lo} and {hi})")
    return int(v)


class CJson:
    """The cjson library of one Lua state: its functions, and `reset` (before each script:
    settings one script changed do not reach the next, sandbox.lua Rule 6)."""

    def __init__(self, rt: Any, null: Any, bridge: Bridge) -> None:
        self.cfg = JsonConfig()
        self.functions = _cjson_functions(rt, null, bridge, self.cfg)

    def reset(self) -> None:
        """The settings back to their defaults; lua.py calls it before a run once a script
        changed one (`cfg.changed`)."""
        self.cfg.__init__()  # type: ignore[misc]


def _loads(text: bytes) -> Any:
    """orjson, or Python's json for what lua-cjson takes and orjson refuses: a number past a
    double's range (1e999999 is inf, as strtod makes it)."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError as e:
        try:
            return json.loads(text)
        except (ValueError, RecursionError):
            raise LibError(f"Expected value but found invalid token at character {e.pos + 1}") \
                from None


def make_cjson(rt: Any, null: Any, bridge: Bridge) -> CJson:
    return CJson(rt, null, bridge)


def _cjson_functions(rt: Any, null: Any, bridge: Bridge, cfg: JsonConfig) -> dict[str, Any]:
    rawequal = rt.eval("rawequal")  # userdata cross to Python as new wrappers each time

    def encode(*args: Any) -> bytes:
        if len(args) != 1:
            raise LibError("bad argument #1 to '?' (expected 1 argument)")
        return JsonEncoder(cfg, null, rawequal, bridge.budget()).encode(args[0])

    def decode(text: Any = None) -> Any:
        if not isinstance(text, bytes):
            raise LibError("bad argument #1 to 'decode' (string expected)")
        _decode_depth(text, cfg.decode_max_depth)
        return to_lua(rt, _loads(text), null, bridge.check)

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
                cfg.changed = True
            return int(getattr(cfg, attr))
        return setting

    def encode_invalid_numbers(*args: Any) -> Any:
        """off / on / null (or false / true); returns the mode, a boolean for off and on."""
        if args and args[0] is not None:
            v = args[0]
            cfg.changed = True
            if isinstance(v, bool):
                cfg.encode_invalid_numbers = int(v)
            elif isinstance(v, bytes) and v in _INVALID_NUMBERS:
                cfg.encode_invalid_numbers = _INVALID_NUMBERS.index(v)
            else:
                shown = v.decode("latin-1") if isinstance(v, bytes) else \
                    (f"{v:.14g}" if isinstance(v, (int, float)) else _typename(v))
                raise LibError(f"bad argument #1 to 'encode_invalid_numbers' (invalid option "
                               f"'{shown}')")
        mode = cfg.encode_invalid_numbers
        return mode == 1 if mode <= 1 else b"null"

    def encode_sparse_array(*args: Any) -> tuple[Any, ...]:
        """convert (boolean), ratio, safe: lua-cjson's sparse array handling."""
        cfg.changed = True
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


MAX_RESULTS = 7999  # values one unpack returns at most (Lua's C stack, LUAI_MAXCSTACK)


def _unpack_values(rt: Any, data: bytes, limit: int, check: Callable[[], None]
                   ) -> tuple[list[Any], int]:
    """Up to `limit` (0: all) msgpack values of `data` as Lua values, and the bytes they
    took: lua-cmsgpack's texts for a value cut short ("Missing bytes in input.") and for
    bytes that are no msgpack ("Bad data format in input.")."""
    unpacker = msgpack.Unpacker(raw=True, strict_map_key=False)
    unpacker.feed(data)
    out: list[Any] = []
    try:
        while not limit or len(out) < limit:
            try:
                v = unpacker.unpack()
            except msgpack.OutOfData:
                if unpacker.tell() < len(data):
                    raise LibError("Missing bytes in input.") from None
                break
            if len(out) >= MAX_RESULTS:
                raise LibError("too many return values at once; use unpack_one or "
                               "unpack_limit instead.")
            out.append(to_lua(rt, v, None, check))  # msgpack nil: Lua nil
    except (ValueError, TypeError, msgpack.UnpackException):
        raise LibError("Bad data format in input.") from None
    return out, unpacker.tell()


def make_cmsgpack(rt: Any, null: Any, bridge: Bridge) -> dict[str, Any]:
    def pack(*values: Any) -> bytes:
        if not values:
            raise LibError("MessagePack pack needs input.")
        out = b"".join(msgpack.packb(to_python(rt, v, null, nest=MSGPACK_NESTING),
                                     use_bin_type=False) for v in values)
        return out

    def unpack(data: Any = None) -> Any:
        if not isinstance(data, bytes):
            raise LibError(f"bad argument #1 to 'unpack' (string expected, got "
                           f"{_typename(data)})")
        values, _ = _unpack_values(rt, data, 0, bridge.check)
        return tuple(values)

    def unpack_limit(data: Any = None, limit: Any = 0, offset: Any = 0) -> Any:
        """lua-cmsgpack's: at most `limit` values (0: all) from byte `offset`; returns the
        offset after them (-1 at the end of `data`) and the values."""
        if not isinstance(data, bytes):
            raise LibError(f"bad argument #1 to 'unpack_limit' (string expected, got "
                           f"{_typename(data)})")
        lim = c_int(check_number(limit or 0, 2))
        off = c_int(check_number(offset or 0, 3))
        if lim < 0 or off < 0:
            raise LibError(f"Invalid request to unpack with offset of {off} and limit of "
                           f"{lim}.")
        if off > len(data):
            raise LibError(f"Start offset {off} greater than input length {len(data)}.")
        values, used = _unpack_values(rt, data[off:], lim, bridge.check)
        end = off + used
        return (-1 if end >= len(data) else end, *values)

    def unpack_one(data: Any = None, offset: Any = 0) -> Any:
        return unpack_limit(data, 1, offset)

    return {"pack": pack, "unpack": unpack, "unpack_limit": unpack_limit,
            "unpack_one": unpack_one}
