"""Frames: the one checksummed unit of every storage file (sans-IO; docs/storage.md).

    offset 0   u32 LE  frame_len   bytes after this field: 10 + len(body)
    offset 4   u8      type        a T_* constant below
    offset 5   u64 LE  checksum    xxh3-64 of (type byte || body)
    offset 13  u8      flag        0x00 as written; 0xD5 = deleted (segment records only)
    offset 14  body

Rule 1: the flag byte is outside the checksum and inside frame_len, so flipping it in place
rewrites neither the frame nor its checksum and never changes the stride.
Rule 2: only the exact sentinel 0xD5 reads deleted; any other value (a torn write) is live.
Rule 3: a reader never trusts a frame whose length runs past the buffer or whose checksum
fails: `scan` stops there and reports the offset (the caller decides: truncate or report).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final

import xxhash

HEADER: Final = struct.Struct("<IBQB")
HEADER_SIZE: Final = HEADER.size  # 14
FLAG_OFFSET: Final = 13
DELETED_FLAG: Final = 0xD5
MAX_FRAME: Final = 1 << 30

# WAL frame types
T_TOPIC: Final = 1  # topic create/update: orjson {name, epoch, type, seq_base, config, created_ts}
T_DROP: Final = 2  # topic delete: orjson {name, epoch}
T_APPEND: Final = 3  # binary (codec.encode_append)
T_DELETE: Final = 4  # orjson {name, epoch, selector, bound}
T_TRIM: Final = 5  # orjson {name, epoch, front}
T_CEIL: Final = 6  # HeadWatermark: orjson {name, epoch, ceiling}
T_SEGDROP: Final = 7  # a whole dead segment is about to be unlinked: orjson {name, epoch, base}
T_LOSTRANGE: Final = 8  # seqs that were handed out and could not be made durable: {name, epoch, first, count}
T_GROUPS: Final = 9  # a topic's consumer groups, whole (older versions): {name, epoch, groups}
T_GROUPOP: Final = 10  # one consumer-group definition change (engine/groups/groupops.py): {name, epoch, op}
T_LEASES: Final = 11  # a queue's leases-log events (engine/queues/leases.py): {name, epoch, ev: [event, ...]}
T_APPEND_RC: Final = 12  # APPEND of a router's dest: the APPEND body + u64 the router's cursor (codec)
T_ROUTER: Final = 13  # a router definition change, in its dest's shard: {name, epoch, op, rc?}
T_XSETID: Final = 14  # XSETID: the stream's last ID (engine/log/xids.py): {name, epoch, last_id: [ms, seq]}
T_IDMP: Final = 15  # idempotency table (engine/log/idempotency.py): {name, epoch, add: hit} or {.., cfg: {..}}
T_KEYSPACE: Final = 19  # one keyspace operation (engine/keyspace/ops.py, binary), always in shard 0
T_GROUP: Final = 20  # a commit group's frames in one frame per copy (earlier versions; read only)
T_GROUP_CHUNK: Final = 21  # a commit group's frames, a copy per owning shard in chunks (storage/txgroup.py)
# replication only, never in a file (repl/backlog.py): a commit group's frames back to back, and
# an empty frame asking replicas for an acknowledgement
T_REPL_GROUP: Final = 40
T_REPL_PING: Final = 41
T_GROUPPROG: Final = 42  # a group's delivery progress (engine/groups/groupops.py Rule 3)
T_FUNCTIONS: Final = 43  # the FUNCTION libraries, whole: orjson list of their code (latin-1)
# a router's forwarding step (engine/routing/routerrepl.py Rule 2): {name: dest, epoch, router,
# to: the cursor it ended at, ts: its clock, next: the dest's next seq after it}
T_FORWARD: Final = 44
# segment frame types
T_REC: Final = 16  # binary (codec.encode_slot): one record slot
T_SLOT_LOST: Final = 17  # binary: a LOST slot (seq, ts)
T_SLOT_TRIMMED: Final = 18  # binary: a TRIMMED slot (seq, ts): a router dest's `source_trim` gap

RECORD_FRAMES: Final = (T_APPEND, T_APPEND_RC)  # WAL frames whose body is codec.encode_append's

WAL_MAGIC: Final = b"TWAL"
SEG_MAGIC: Final = b"TSEG"
FILE_HEADER: Final = struct.Struct("<4sHHQ")  # magic, version, shard (WAL) / 0, gen (WAL) / base (segment)
FILE_HEADER_SIZE: Final = FILE_HEADER.size  # 16
VERSION: Final = 1

_xxh: Final = xxhash.xxh3_64_intdigest


def checksum(ftype: int, body: bytes | memoryview) -> int:
    h = xxhash.xxh3_64()
    h.update(bytes((ftype,)))
    h.update(body)
    return h.intdigest()


def encode(ftype: int, body: bytes, flag: int = 0) -> bytes:
    return HEADER.pack(10 + len(body), ftype, _xxh(bytes((ftype,)) + body), flag) + body


def file_header(magic: bytes, a: int, b: int) -> bytes:
    return FILE_HEADER.pack(magic, VERSION, a, b)


def parse_file_header(buf: bytes | memoryview, magic: bytes) -> tuple[int, int] | None:
    if len(buf) < FILE_HEADER_SIZE:
        return None
    m, version, a, b = FILE_HEADER.unpack_from(buf, 0)
    if m != magic or version != VERSION:
        return None
    return a, b


# a module-level name for the body's type: the compiled build (topicsrv/buildinfo.py) resolves a
# dataclass field's annotation in the module's globals, where a builtin's name is not
Body = memoryview


@dataclass(slots=True)
class Frame:
    offset: int
    ftype: int
    flag: int
    body: Body

    @property
    def deleted(self) -> bool:
        return self.flag == DELETED_FLAG

    @property
    def end(self) -> int:
        return self.offset + HEADER_SIZE + len(self.body)


@dataclass(slots=True)
class Damage:
    offset: int
    reason: str


def read_at(buf: memoryview, offset: int) -> Frame | Damage:
    """The frame at `offset`, or why there is none."""
    if offset + HEADER_SIZE > len(buf):
        return Damage(offset, "torn frame header")
    length, ftype, csum, flag = HEADER.unpack_from(buf, offset)
    if length < 10 or length > MAX_FRAME:
        return Damage(offset, f"bad frame length {length}")
    end = offset + 4 + length
    if end > len(buf):
        return Damage(offset, f"torn frame: {length} bytes announced, {len(buf) - offset - 4} present")
    body = buf[offset + HEADER_SIZE:end]
    if checksum(ftype, body) != csum:
        return Damage(offset, "checksum mismatch")
    return Frame(offset, ftype, flag, body)


def scan(buf: memoryview, offset: int) -> Iterator[Frame | Damage]:
    """Every good frame from `offset`; a Damage (then stop) at the first bad one."""
    n = len(buf)
    while offset < n:
        got = read_at(buf, offset)
        yield got
        if isinstance(got, Damage):
            return
        offset = got.end
