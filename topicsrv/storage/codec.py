"""Frame bodies (sans-IO): binary layouts for records, orjson for control frames.

APPEND body (one engine write):
    u16 name_len, name (utf-8), u64 epoch, u64 first_seq, u64 ts, u32 n,
    n x [u32 size, u32 blob_len, u16 node_len, u16 tag_len, node, tag, blob],
    then, only in an ID-mapped topic (engine/log/xids.py), n x [u64 ms, u64 seq]: the stream IDs
REC body (one segment slot):
    u64 seq, u64 ts, u32 size, u32 blob_len, u16 node_len, u16 tag_len, node, tag, blob,
    then, only in an ID-mapped segment, u64 ms, u64 seq: the slot's stream ID
APPEND_RC body (a write into a router's dest): the APPEND body, then u64 rc (the router's
    cursor when the write ran; recovery merges re-derived copies up to it first)
SLOT_LOST / SLOT_TRIMMED body: u64 seq, u64 ts

Rule: a node/tag length of 0xFFFF means "absent" (an empty string is a real value).
Rule: the stream-ID trailers are optional: a body without one (every body written before
  client-chosen IDs existed) reads as "IDs implicit", and its length says which it is.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import Any, Final

import orjson

from topicsrv.engine.log.records import PreparedRecord

NONE_LEN: Final = 0xFFFF
_APPEND_HEAD: Final = struct.Struct("<QQQI")
_ITEM: Final = struct.Struct("<IIHH")
_REC_HEAD: Final = struct.Struct("<QQIIHH")
_LOST: Final = struct.Struct("<QQ")
_U16: Final = struct.Struct("<H")
_U64: Final = struct.Struct("<Q")

Item = tuple[bytes, int, str | None, str | None]  # blob, size, node, tag


def _label(value: str | None) -> tuple[int, bytes]:
    if value is None:
        return NONE_LEN, b""
    raw = value.encode("utf-8", "surrogatepass")
    return len(raw), raw


def _unlabel(buf: memoryview, pos: int, n: int) -> tuple[str | None, int]:
    if n == NONE_LEN:
        return None, pos
    return bytes(buf[pos:pos + n]).decode("utf-8", "surrogatepass"), pos + n


Xid = tuple[int, int]


def _xid_trailer(xids: list[Xid]) -> bytes:
    return b"".join(_LOST.pack(ms, n) for ms, n in xids)


def encode_append(name: str, epoch: int, first_seq: int, ts: int, items: list[Item],
                  xids: list[Xid] | None = None) -> bytes:
    parts = _append_head(name, epoch, first_seq, ts, len(items))
    for blob, size, node, tag in items:
        _add_item(parts, blob, size, node, tag)
    return _append_end(parts, xids)


def encode_append_of(name: str, epoch: int, first_seq: int, ts: int, blobs: list[bytes],
                     records: list[PreparedRecord], xids: list[Xid] | None = None) -> bytes:
    """`encode_append` of an engine write as it is (blobs and the records they came from),
    without an item tuple per record: the XADD path."""
    parts = _append_head(name, epoch, first_seq, ts, len(blobs))
    for k, blob in enumerate(blobs):
        rec = records[k]
        _add_item(parts, blob, rec.size, rec.node, rec.tag)
    return _append_end(parts, xids)


def _append_head(name: str, epoch: int, first_seq: int, ts: int, n: int) -> list[bytes]:
    raw_name = name.encode()
    return [_U16.pack(len(raw_name)), raw_name, _APPEND_HEAD.pack(epoch, first_seq, ts, n)]


def _add_item(parts: list[bytes], blob: bytes, size: int, node: str | None, tag: str | None) -> None:
    if node is None and tag is None:
        parts.append(_ITEM.pack(size, len(blob), NONE_LEN, NONE_LEN))
    else:
        nl, nb = _label(node)
        tl, tb = _label(tag)
        parts.append(_ITEM.pack(size, len(blob), nl, tl))
        if nb:
            parts.append(nb)
        if tb:
            parts.append(tb)
    parts.append(blob)


def _append_end(parts: list[bytes], xids: list[Xid] | None) -> bytes:
    if xids is not None:
        parts.append(_xid_trailer(xids))
    return b"".join(parts)


def encode_append_rc(name: str, epoch: int, first_seq: int, ts: int, items: list[Item], rc: int,
                     xids: list[Xid] | None = None) -> bytes:
    return encode_append(name, epoch, first_seq, ts, items, xids) + rc_trailer(rc)


def rc_trailer(rc: int) -> bytes:
    """What an APPEND_RC body adds to its APPEND body."""
    return _U64.pack(rc)


def append_xids(body: memoryview, pos: int, n: int, rc: bool = False) -> list[Xid] | None:
    """The stream IDs an APPEND (APPEND_RC: `rc`) body ends with, None when it has none."""
    unpack = _ITEM.unpack_from
    for _ in range(n):
        _, blen, nl, tl = unpack(body, pos)
        pos += _ITEM.size + (0 if nl == NONE_LEN else nl) + (0 if tl == NONE_LEN else tl) + blen
    end = len(body) - (_U64.size if rc else 0)
    if end - pos != n * _LOST.size or not n:
        return None
    return [(int(ms), int(x)) for ms, x in _LOST.iter_unpack(body[pos:end])]


def append_rc(body: memoryview) -> int:
    """The router cursor an APPEND_RC body ends with."""
    (rc,) = _U64.unpack_from(body, len(body) - _U64.size)
    return int(rc)


def append_header(body: memoryview) -> tuple[str, int, int, int, int, int]:
    """(name, epoch, first_seq, ts, n, offset of the first item)."""
    (nlen,) = _U16.unpack_from(body, 0)
    name = bytes(body[2:2 + nlen]).decode()
    epoch, first, ts, n = _APPEND_HEAD.unpack_from(body, 2 + nlen)
    return name, epoch, first, ts, n, 2 + nlen + _APPEND_HEAD.size


def append_items(body: memoryview, pos: int, n: int) -> Iterator[Item]:
    unpack = _ITEM.unpack_from
    isize = _ITEM.size
    for _ in range(n):
        size, blen, nl, tl = unpack(body, pos)
        pos += isize
        node, pos = _unlabel(body, pos, nl)
        tag, pos = _unlabel(body, pos, tl)
        yield bytes(body[pos:pos + blen]), size, node, tag
        pos += blen


def encode_slot(seq: int, ts: int, blob: bytes, size: int, node: str | None, tag: str | None,
                xid: Xid | None = None) -> bytes:
    nl, nb = _label(node)
    tl, tb = _label(tag)
    out = _REC_HEAD.pack(seq, ts, size, len(blob), nl, tl) + nb + tb + blob
    return out if xid is None else out + _LOST.pack(*xid)


def decode_slot(body: memoryview) -> tuple[int, int, bytes, int, str | None, str | None, Xid | None]:
    """(seq, ts, blob, size, node, tag, stream ID or None)."""
    seq, ts, size, blen, nl, tl = _REC_HEAD.unpack_from(body, 0)
    pos = _REC_HEAD.size
    node, pos = _unlabel(body, pos, nl)
    tag, pos = _unlabel(body, pos, tl)
    xid: Xid | None = None
    if len(body) - (pos + blen) == _LOST.size:
        ms, x = _LOST.unpack_from(body, pos + blen)
        xid = (int(ms), int(x))
    return seq, ts, bytes(body[pos:pos + blen]), size, node, tag, xid


def slot_seq(body: memoryview) -> int:
    (seq,) = struct.unpack_from("<Q", body, 0)
    return int(seq)


def encode_lost(seq: int, ts: int) -> bytes:
    return _LOST.pack(seq, ts)


def decode_lost(body: memoryview) -> tuple[int, int]:
    seq, ts = _LOST.unpack_from(body, 0)
    return seq, ts


def encode_json(obj: dict[str, Any]) -> bytes:
    return orjson.dumps(obj)


def decode_json(body: memoryview) -> dict[str, Any]:
    out: dict[str, Any] = orjson.loads(bytes(body))
    return out
