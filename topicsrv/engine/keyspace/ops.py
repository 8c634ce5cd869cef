"""Keyspace operations: the unit the keyspace journals, and their binary codec (sans-IO).

One command's mutation of the keyspace is ONE operation, a list of changes applied in order:

    ("s", key, value, deadline, enc)  put a string (deadline 0 = none; enc "" = derived)
    ("d", key)                         delete a string key
    ("x", key, deadline, epoch)        set (deadline > 0) or remove (0) the TTL of a key; for a
                                       topic `epoch` names the incarnation it applies to, 0 for
                                       a string
    ("f",)                             flush every key and TTL but the topics'
    ("L", key, pos, remove, values, fill)
                                       splice a list (quicklist.py Rule 3): from `pos`
                                       remove `remove` elements, insert `values`; creates
                                       the list (node limit `fill`) and deletes it once empty
    ("H", key, sets, dels, entries, value)
                                       set the (field, value) pairs `sets`, then delete the
                                       fields `dels`, of a hash (created with the listpack
                                       limits `entries`/`value`; deleted once empty)
    ("h", key, [(field, deadline), ...])
                                       set (deadline > 0, absolute ms) or remove (0) the
                                       deadlines of existing fields of a hash (Redis 7.4's
                                       field expiry; a missing field is left alone)
    ("Z", key, sets, dels, entries, value)
                                       put each (member, score) of `sets` (absolute
                                       scores), then delete the members `dels`, of a sorted
                                       set (created with the listpack limits
                                       `entries`/`value`; deleted once empty)
    ("S", key, adds, dels, (intset, entries, value))
                                       add the members `adds`, then remove the
                                       members `dels`, of a set (created with the
                                       limits set-max-intset-entries and
                                       set-max-listpack-entries/-value; deleted once
                                       empty); a whole set is "c" of kind "set" with
                                       its members and those three limits
    ("c", key, kind, items, deadline, limits[, field deadlines])
                                       put a whole collection ("list": elements, "hash":
                                       (field, value) pairs, then its fields' (field,
                                       deadline) pairs if any; "zset": (member, score)
                                       pairs), replacing the key: the
                                       checkpoint, COPY and RENAME write these

Rule 1: replaying an operation's changes in order from a state reproduces the state after the
command (the changes are results, never commands: INCR journals the new value, EXPIRE the
absolute deadline), so replay needs no clock and is idempotent over a prefix it already has.
Rule 2: the codec is length-prefixed and binary-safe; `decode` raises ValueError on any
malformed body (storage checks checksums first; `topicsrv check` reports the error).
"""

from __future__ import annotations

import struct
from typing import Any, Final

Change = tuple[Any, ...]
Op = list[Change]

_U32: Final = struct.Struct("<I")
_U64: Final = struct.Struct("<Q")
_DOUBLE: Final = struct.Struct("<d")
_ENC: Final = {"": 0, "raw": 1, "embstr": 2}
_ENC_NAMES: Final = {v: k for k, v in _ENC.items()}


_SMALL: Final = 1024
_U32_SMALL: Final[list[bytes]] = [_U32.pack(i) for i in range(_SMALL)]  # lengths of keys and most values
_NO_DEADLINE: Final = _U64.pack(0)
_ENC_BYTE: Final = {k: bytes((v,)) for k, v in _ENC.items()}
# the parts of a put before its key and, with no deadline and no encoding override, between
# its key and its value, for the small lengths: a put is then four parts
_PUT_HEAD: Final[list[bytes]] = [b"s" + p for p in _U32_SMALL]
_PLAIN_MID: Final[list[bytes]] = [_NO_DEADLINE + b"\x00" + p for p in _U32_SMALL]


_U64_SMALL: Final[list[bytes]] = [_U64.pack(i) for i in range(_SMALL)]  # list positions
_L_HEAD: Final[list[bytes]] = [b"L" + p for p in _U32_SMALL]
_H_HEAD: Final[list[bytes]] = [b"H" + p for p in _U32_SMALL]


def _u32(n: int) -> bytes:
    return _U32_SMALL[n] if 0 <= n < _SMALL else _U32.pack(n)


def _u64(n: int) -> bytes:
    return _U64_SMALL[n] if 0 <= n < _SMALL else _U64.pack(n)


_FILLS: Final[list[bytes]] = [_U32.pack(-n & 0xFFFFFFFF) for n in range(6)]  # -0 ... -5


def _i32(n: int) -> bytes:
    """A limit as the journal keeps it: 32 bits, a negative one (a list's fill) as unsigned."""
    if 0 <= n < _SMALL:
        return _U32_SMALL[n]
    return _FILLS[-n] if -6 < n < 0 else _U32.pack(n & 0xFFFFFFFF)


def _put_blobs(out: list[bytes], values: list[bytes]) -> None:
    """`_blobs` appended to `out` part by part."""
    out.append(_u32(len(values)))
    for v in values:
        out.append(_u32(len(v)))
        out.append(v)


def _key(k: str) -> bytes:
    raw = k.encode("latin-1")
    return _u32(len(raw)) + raw


def encode(op: Op) -> bytes:
    """Rule 2's layout; a put's parts are appended one by one, its small lengths and its
    plain middle taken from tables (one SET at P1 is one operation, and a checkpoint encodes
    every key: docs/performance.md, "Fourth pass")."""
    out: list[bytes] = []
    for ch in op:
        # typed, so that the compiled build compares `kind` and encodes a name as str
        # primitives do, not as calls on any object (HSET at P16: ~20% of this function)
        kind: str = ch[0]
        name: str
        if kind == "s":
            name = ch[1]
            raw: bytes = name.encode("latin-1")
            value: bytes = ch[2]
            deadline: int = ch[3]
            n = len(raw)
            out.append(_PUT_HEAD[n] if n < _SMALL else b"s" + _U32.pack(n))
            out.append(raw)
            n = len(value)
            if not deadline and not ch[4] and n < _SMALL:
                out.append(_PLAIN_MID[n])
            else:
                out.append(_U64.pack(deadline) if deadline else _NO_DEADLINE)
                out.append(_ENC_BYTE[ch[4]])
                out.append(_u32(n))
            out.append(value)
        elif kind == "d":
            out += [b"d", _key(ch[1])]
        elif kind == "x":
            out += [b"x", _key(ch[1]), _U64.pack(ch[2]), _U64.pack(ch[3])]
        elif kind == "f":
            out.append(b"f")
        elif kind == "L":  # parts from tables, as a put's (LPUSH/RPOP at P16: one a command)
            name = ch[1]
            raw = name.encode("latin-1")
            n = len(raw)
            out.append(_L_HEAD[n] if n < _SMALL else b"L" + _U32.pack(n))
            out.append(raw)
            out.append(_u64(ch[2]))
            out.append(_u64(ch[3]))
            _put_blobs(out, ch[4])
            out.append(_i32(ch[5]))
        elif kind == "H":
            name = ch[1]
            raw = name.encode("latin-1")
            n = len(raw)
            out.append(_H_HEAD[n] if n < _SMALL else b"H" + _U32.pack(n))
            out.append(raw)
            sets: list[tuple[bytes, bytes]] = ch[2]
            out.append(_u32(2 * len(sets)))
            for f, v in sets:
                out.append(_u32(len(f)))
                out.append(f)
                out.append(_u32(len(v)))
                out.append(v)
            _put_blobs(out, ch[3])
            out.append(_u32(ch[4]))
            out.append(_u32(ch[5]))
        elif kind == "S":  # parts from tables (SADD at P16: one a command)
            out.append(b"S")
            out.append(_key(ch[1]))
            _put_blobs(out, ch[2])
            _put_blobs(out, ch[3])
            for n in ch[4]:
                out.append(_i32(n))
        elif kind == "c" and ch[2] == "set":
            out += [b"c", _key(ch[1]), b"t", _blobs(ch[3]), _U64.pack(ch[4]),
                    b"".join([_U32.pack(n & 0xFFFFFFFF) for n in ch[5]])]
        elif kind == "h":
            out += [b"h", _key(ch[1]), _U32.pack(len(ch[2]))]
            for field, deadline in ch[2]:
                out += [_u32(len(field)), field, _U64.pack(deadline)]
        elif kind == "Z":  # parts from tables (ZADD, ZPOPMIN at P16: one a command)
            out.append(b"Z")
            out.append(_key(ch[1]))
            pairs: list[tuple[bytes, float]] = ch[2]
            out.append(_u32(len(pairs)))
            for m, _ in pairs:
                out.append(_u32(len(m)))
                out.append(m)
            for _, score in pairs:
                out.append(_DOUBLE.pack(score))
            _put_blobs(out, ch[3])
            out.append(_u32(ch[4]))
            out.append(_u32(ch[5]))
        elif kind == "c" and ch[2] == "zset":
            out += [b"c", _key(ch[1]), b"z", _blobs([m for m, _ in ch[3]]),
                    _U64.pack(ch[4]), _U32.pack(ch[5][0] & 0xFFFFFFFF),
                    _U32.pack(ch[5][1] & 0xFFFFFFFF), _doubles([s for _, s in ch[3]])]
        elif kind == "c":
            items = ch[3] if ch[2] == "list" else [x for pair in ch[3] for x in pair]
            code = b"l" if ch[2] == "list" else b"e" if len(ch) > 6 else b"h"
            out += [b"c", _key(ch[1]), code, _blobs(items),
                    _U64.pack(ch[4]), _U32.pack(ch[5][0] & 0xFFFFFFFF),
                    _U32.pack(ch[5][1] & 0xFFFFFFFF)]
            if len(ch) > 6:  # a hash with field deadlines ("e")
                out += [_blobs([f for f, _ in ch[6]]),
                        b"".join([_U64.pack(d) for _, d in ch[6]])]
        else:
            raise ValueError(f"unknown keyspace change {kind!r}")
    return b"".join(out)


def _blobs(values: list[bytes]) -> bytes:
    """A count, then each value as its length and bytes."""
    parts = [_U32.pack(len(values))]
    for v in values:
        parts += [_u32(len(v)), v]
    return b"".join(parts)


def _doubles(scores: list[float]) -> bytes:
    """Sorted-set scores: 8-byte little-endian doubles, as many as the members before them."""
    return struct.pack(f"<{len(scores)}d", *scores)


def _signed(u: int) -> int:
    return u - (1 << 32) if u & 0x80000000 else u


def _pairs(flat: list[bytes]) -> list[tuple[bytes, bytes]]:
    if len(flat) % 2:
        raise ValueError("odd field/value list in a hash change")
    return list(zip(flat[0::2], flat[1::2], strict=True))


class _Reader:
    __slots__ = ("buf", "pos")

    def __init__(self, buf: bytes | memoryview) -> None:
        self.buf = bytes(buf)
        self.pos = 0

    def take(self, n: int) -> bytes:
        end = self.pos + n
        if end > len(self.buf):
            raise ValueError("truncated keyspace operation")
        out = self.buf[self.pos:end]
        self.pos = end
        return out

    def u32(self) -> int:
        return int(_U32.unpack(self.take(4))[0])

    def u64(self) -> int:
        return int(_U64.unpack(self.take(8))[0])

    def doubles(self, n: int) -> list[float]:
        return list(struct.unpack(f"<{n}d", self.take(8 * n)))

    def key(self) -> str:
        return self.take(self.u32()).decode("latin-1")

    def blobs(self) -> list[bytes]:
        n = self.u32()
        if n > len(self.buf) - self.pos:
            raise ValueError("truncated keyspace operation")
        return [self.take(self.u32()) for _ in range(n)]


def decode(body: bytes | memoryview) -> Op:
    r = _Reader(body)
    op: Op = []
    while r.pos < len(r.buf):
        kind = r.take(1)
        if kind == b"s":
            key = r.key()
            deadline = r.u64()
            enc_code = r.take(1)[0]
            if enc_code not in _ENC_NAMES:
                raise ValueError(f"unknown string encoding {enc_code}")
            op.append(("s", key, r.take(r.u32()), deadline, _ENC_NAMES[enc_code]))
        elif kind == b"d":
            op.append(("d", r.key()))
        elif kind == b"x":
            key = r.key()
            op.append(("x", key, r.u64(), r.u64()))
        elif kind == b"f":
            op.append(("f",))
        elif kind == b"L":
            key = r.key()
            pos, remove = r.u64(), r.u64()
            op.append(("L", key, pos, remove, r.blobs(), _signed(r.u32())))
        elif kind == b"H":
            key = r.key()
            sets, dels = _pairs(r.blobs()), r.blobs()
            op.append(("H", key, sets, dels, r.u32(), r.u32()))
        elif kind == b"S":
            key = r.key()
            adds, dels = r.blobs(), r.blobs()
            op.append(("S", key, adds, dels, (r.u32(), r.u32(), r.u32())))
        elif kind == b"h":
            key = r.key()
            n = r.u32()
            if n > len(r.buf) - r.pos:
                raise ValueError("truncated keyspace operation")
            ttls: list[tuple[bytes, int]] = []
            for _ in range(n):
                field = r.take(r.u32())
                ttls.append((field, r.u64()))
            op.append(("h", key, ttls))
        elif kind == b"Z":
            key = r.key()
            members = r.blobs()
            scored = list(zip(members, r.doubles(len(members)), strict=True))
            op.append(("Z", key, scored, r.blobs(), r.u32(), r.u32()))
        elif kind == b"c":
            key = r.key()
            code = r.take(1)
            if code == b"t":  # a set
                members = r.blobs()
                deadline = r.u64()
                op.append(("c", key, "set", members, deadline,
                           (_signed(r.u32()), _signed(r.u32()), _signed(r.u32()))))
                continue
            if code == b"z":
                members = r.blobs()
                deadline = r.u64()
                limits = (_signed(r.u32()), _signed(r.u32()))
                scored = list(zip(members, r.doubles(len(members)), strict=True))
                op.append(("c", key, "zset", scored, deadline, limits))
                continue
            if code not in (b"l", b"h", b"e"):
                raise ValueError(f"unknown collection kind {code!r}")
            items: Any = r.blobs()
            deadline = r.u64()
            limits = (_signed(r.u32()), _signed(r.u32()))
            if code == b"l":
                op.append(("c", key, "list", items, deadline, limits))
            elif code == b"h":
                op.append(("c", key, "hash", _pairs(items), deadline, limits))
            else:
                fields = r.blobs()
                deadlines = [r.u64() for _ in fields]
                op.append(("c", key, "hash", _pairs(items), deadline, limits,
                           list(zip(fields, deadlines, strict=True))))
        else:
            raise ValueError(f"unknown keyspace change {kind!r}")
    return op
