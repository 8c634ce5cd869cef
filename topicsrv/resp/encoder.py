"""RESP2/RESP3 reply encoder: reply values (see commands/base.py) -> bytes appended to a buffer.

Rule 1: sans-IO and allocation-light: everything is appended to one caller-owned bytearray,
so a whole pipeline flush is one buffer and one `send_all`.
Rule 2: `Raw` bytes (the engine's pre-encoded stream entries) are spliced, never re-encoded.
Rule 3: RESP3-only types degrade as redis-server degrades them under RESP2: map -> flat
array, set/push -> array, double -> bulk string, boolean -> integer, null -> `$-1`
(null array -> `*-1`), verbatim -> bulk string.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection
from typing import Any, Final

from topicsrv.resp.commands.base import (
    ERROR_STATS,
    CountedErr,
    Err,
    Members,
    NoReply,
    NullArray,
    Push,
    Pushed,
    Raw,
    Simple,
    Verbatim,
)


def _enc(s: str) -> bytes:
    """UTF-8; bytes that arrived undecodable (surrogateescape) go back out unchanged."""
    try:
        return s.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return s.encode("utf-8", "replace")


def _double(v: float) -> bytes:
    if math.isnan(v):
        return b"nan"
    if math.isinf(v):
        return b"inf" if v > 0 else b"-inf"
    return (b"%.17g" % v)


_HEADS: Final = 1024
_BULK: Final = [b"$%d\r\n" % n for n in range(_HEADS)]  # the headers of short bulk strings
_ARRAY: Final = [b"*%d\r\n" % n for n in range(_HEADS)]


def _bulk(out: bytearray, v: bytes) -> None:
    n = len(v)
    out += _BULK[n] if n < _HEADS else b"$%d\r\n" % n
    out += v
    out += b"\r\n"


def encode(out: bytearray, v: Any, resp3: bool) -> None:
    """Append the encoding of reply value `v`."""
    t = type(v)
    if t is bytes:
        _bulk(out, v)
    elif t is Raw:
        out += v
    elif t is int:
        out += b":%d\r\n" % v
    elif t is list or t is tuple:
        n = len(v)
        out += _ARRAY[n] if n < _HEADS else b"*%d\r\n" % n
        for x in v:
            if type(x) is bytes:  # the common element (LRANGE, ZRANGE, HGETALL): no dispatch
                _bulk(out, x)
            else:
                encode(out, x, resp3)
    else:
        _SLOW.get(t, _other)(out, v, resp3)


def _str(out: bytearray, v: str, resp3: bool) -> None:
    b = _enc(v)
    out += b"$%d\r\n%b\r\n" % (len(b), b)


_SIMPLE_CACHE: Final[dict[str, bytes]] = {}  # the encodings of the simple replies met (OK, PONG, ...)
_SIMPLE_CACHE_MAX: Final = 256


def _simple(out: bytearray, v: str, resp3: bool) -> None:
    cached = _SIMPLE_CACHE.get(v)
    if cached is None:
        cached = b"+%b\r\n" % _enc(v.replace("\r", " ").replace("\n", " "))
        if len(v) <= 16 and len(_SIMPLE_CACHE) < _SIMPLE_CACHE_MAX:
            _SIMPLE_CACHE[str(v)] = cached
    out += cached


def _none(out: bytearray, v: None, resp3: bool) -> None:
    out += b"_\r\n" if resp3 else b"$-1\r\n"


def _null_array(out: bytearray, v: NullArray, resp3: bool) -> None:
    out += b"_\r\n" if resp3 else b"*-1\r\n"


def _bool(out: bytearray, v: bool, resp3: bool) -> None:
    if resp3:
        out += b"#t\r\n" if v else b"#f\r\n"
    else:
        out += b":1\r\n" if v else b":0\r\n"


def _float(out: bytearray, v: float, resp3: bool) -> None:
    d = _double(v)
    if resp3:
        out += b",%b\r\n" % d
    else:
        out += b"$%d\r\n%b\r\n" % (len(d), d)


def _dict(out: bytearray, v: dict[Any, Any], resp3: bool) -> None:
    out += (b"%%%d\r\n" if resp3 else b"*%d\r\n") % (len(v) if resp3 else 2 * len(v))
    for k, x in v.items():
        encode(out, k, resp3)
        encode(out, x, resp3)


def _set(out: bytearray, v: Collection[Any], resp3: bool) -> None:  # a set, or Members (a list)
    out += (b"~%d\r\n" if resp3 else b"*%d\r\n") % len(v)
    for x in v:
        encode(out, x, resp3)


def _push(out: bytearray, v: Push, resp3: bool) -> None:
    out += (b">%d\r\n" if resp3 else b"*%d\r\n") % len(v)
    for x in v:
        encode(out, x, resp3)


def _verbatim(out: bytearray, v: Verbatim, resp3: bool) -> None:
    b = _enc(v)
    if resp3:
        out += b"=%d\r\ntxt:%b\r\n" % (len(b) + 4, b)
    else:
        out += b"$%d\r\n%b\r\n" % (len(b), b)


def _bytes_like(out: bytearray, v: bytes | bytearray | memoryview, resp3: bool) -> None:
    encode(out, bytes(v), resp3)


def _err(out: bytearray, v: Err, resp3: bool) -> None:
    ERROR_STATS[v.text.partition(" ")[0]] += 1  # INFO errorstats: by the error's first word
    out += b"-%b\r\n" % _enc(v.text)


def _counted_err(out: bytearray, v: Err, resp3: bool) -> None:
    out += b"-%b\r\n" % _enc(v.text)


def _nothing(out: bytearray, v: NoReply, resp3: bool) -> None:
    pass


def _pushed(out: bytearray, v: Pushed, resp3: bool) -> None:
    out += v  # already encoded (Rule 2)


def _other(out: bytearray, v: Any, resp3: bool) -> None:
    for base, fn in _SLOW.items():  # subclasses (e.g. a str enum)
        if isinstance(v, base):
            fn(out, v, resp3)
            return
    raise TypeError(f"cannot encode {type(v).__name__} as a RESP reply")


_SLOW: Final[dict[type, Callable[[bytearray, Any, bool], None]]] = {
    str: _str,
    Simple: _simple,
    type(None): _none,
    NullArray: _null_array,
    bool: _bool,
    float: _float,
    dict: _dict,
    set: _set,
    frozenset: _set,
    Members: _set,
    Push: _push,
    Verbatim: _verbatim,
    bytearray: _bytes_like,
    memoryview: _bytes_like,
    Err: _err,
    CountedErr: _counted_err,
    NoReply: _nothing,
    Pushed: _pushed,
}


def encode_error(out: bytearray, text: str) -> None:
    ERROR_STATS[text.partition(" ")[0]] += 1
    out += b"-%b\r\n" % _enc(text.replace("\r", " ").replace("\n", " "))


def to_bytes(v: Any, resp3: bool = False) -> bytes:
    out = bytearray()
    encode(out, v, resp3)
    return bytes(out)
