"""A full sync's files on the wire (sans-IO): for each file, u32 name length, the name
(UTF-8, relative to the data dir), u64 length, the bytes."""

from __future__ import annotations

import struct

_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")


def pack_files(files: list[tuple[str, bytes]]) -> bytes:
    out: list[bytes] = []
    for name, data in files:
        raw = name.encode()
        out += [_U32.pack(len(raw)), raw, _U64.pack(len(data)), data]
    return b"".join(out)


def unpack_files(buf: bytes) -> list[tuple[str, bytes]]:
    """ValueError when `buf` is not what pack_files makes."""
    out: list[tuple[str, bytes]] = []
    pos = 0
    try:
        while pos < len(buf):
            (n,) = _U32.unpack_from(buf, pos)
            name = buf[pos + 4:pos + 4 + n].decode()
            pos += 4 + n
            (size,) = _U64.unpack_from(buf, pos)
            pos += 8
            if pos + size > len(buf):
                raise ValueError("a file runs past the payload")
            out.append((name, buf[pos:pos + size]))
            pos += size
    except (struct.error, UnicodeDecodeError) as exc:
        raise ValueError(f"malformed full sync payload: {exc}") from exc
    return out
