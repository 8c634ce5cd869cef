"""The keyspace's storage: its WAL frames, its checkpoint file and its replay.

Rule 1 (one class): every keyspace operation (engine/keyspace/ops.py) is written under the
one class `--keyspace-durability`: `fsync` acknowledges after the batch's fdatasync, `disk`
on enqueue, `memory` writes nothing (strings and key TTLs live as long as the process).
Rule 2 (one order): every keyspace frame goes to WAL shard 0, so replay applies operations
in the order the engine committed them. The operations a batch gathers between two other
frames of shard 0 share one frame (wal.py Rule 9: a frame's body is the concatenation of its
operations, applied in order as one), so a P1 SET costs no frame of its own.
Rule 3 (bounded replay): a checkpoint writes the whole keyspace, taken at the WAL cut
(checkpoint.py Rule 1), to `keyspace-<gen>.bin` (a file header and ONE T_KEYSPACE frame)
before checkpoint.json names it; recovery loads that file, then replays the keyspace frames
of the WAL generations from the cut. Older files are unlinked once the new checkpoint is
durable.
Rule 4 (expired stays gone): deadlines are absolute; after replay every key whose deadline
is at or before the recovery time is dropped before the server serves anything.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from topicsrv.engine.keyspace import ops
from topicsrv.storage import frames
from topicsrv.storage.fsops import OsOps

if TYPE_CHECKING:
    from topicsrv.engine.keyspace import Keyspace

CLASSES = ("memory", "disk", "fsync")
SHARD = 0  # Rule 2
_PREFIX = "keyspace-"


def file_name(gen: int) -> str:
    return f"{_PREFIX}{gen}.bin"


def write_snapshot(data_dir: Path, fs: OsOps, op: ops.Op, gen: int) -> str:
    """Rule 3: the file checkpoint.json will name (atomically written and fsynced)."""
    name = file_name(gen)
    body = frames.file_header(frames.WAL_MAGIC, SHARD, gen) + frames.encode(frames.T_KEYSPACE, ops.encode(op))
    fs.write_file(data_dir / name, body)
    return name


def remove_old(data_dir: Path, fs: OsOps, keep: str) -> None:
    for path in data_dir.glob(f"{_PREFIX}*.bin"):
        if path.name != keep:
            fs.unlink(path)


def read_snapshot(path: Path) -> ops.Op:
    """The checkpointed keyspace; ValueError when the file is damaged."""
    buf = memoryview(path.read_bytes())
    if frames.parse_file_header(buf, frames.WAL_MAGIC) is None:
        raise ValueError(f"{path.name}: bad file header")
    out: ops.Op = []
    for got in frames.scan(buf, frames.FILE_HEADER_SIZE):
        if isinstance(got, frames.Damage):
            raise ValueError(f"{path.name}: {got.reason} at offset {got.offset}")
        if got.ftype != frames.T_KEYSPACE:
            raise ValueError(f"{path.name}: unexpected frame type {got.ftype}")
        out += ops.decode(got.body)
    return out


def restore(ks: Keyspace, data_dir: Path, ck: dict[str, Any], wal: list[memoryview],
            now: int) -> tuple[int, int]:
    """Rules 3-4: load the checkpoint's keyspace, replay the WAL's keyspace operations, drop
    what expired. Returns (keys restored, keys dropped as expired)."""
    name = ck.get("keyspace")
    base = read_snapshot(data_dir / name) if isinstance(name, str) else []
    return replay(ks, base, wal, now)


def replay(ks: Keyspace, base: ops.Op, wal: list[memoryview] | list[bytes], now: int) -> tuple[int, int]:
    """The checkpoint's operation, then the WAL's, then Rule 4 (sans-IO: tests drive it)."""
    ks.apply(base)
    for body in wal:
        ks.apply(ops.decode(body))
    due = [k for k, d in ks.expiry.deadlines.items() if d <= now]
    gone = 0
    for k in due:
        if ks.owns(k):
            ks.apply([("d", k)])
            gone += 1
    return len(ks.strings) + len(ks.colls), gone
