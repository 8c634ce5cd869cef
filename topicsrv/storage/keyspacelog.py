"""The keyspace's storage: its WAL frames, its checkpoint file and its replay.

Rule 1 (one class): every keyspace operation (engine/keyspace/ops.py) is written under the
one class `--keyspace-durability`: `fsync` acknowledges after the batch's fdatasync, `disk`
on enqueue, `memory` writes nothing (strings and key TTLs live as long as the process).
Rule 2 (one order): every keyspace frame goes to WAL shard 0, so replay applies operations
in the order the engine committed them. The operations a batch gathers between two other
frames of shard 0 share one frame (wal.py Rule 9: a frame's body is the concatenation of its
operations, applied in order as one), so a P1 SET costs no frame of its own.
Rule 3 (bounded replay): a checkpoint writes the whole keyspace, as it was at the WAL cut
(checkpoint.py Rule 1), to `keyspace-<gen>.bin` (a file header, then T_KEYSPACE frames of a
few hundred keys and elements each, replayed in order), in parts while the server serves
(storage/keyspacesave.py), before checkpoint.json names it; recovery loads that file, then
replays the keyspace frames of the WAL generations from the cut. Older files are unlinked
once the new checkpoint is durable.
Rule 4 (expired stays gone, and its going is journaled): deadlines are absolute; replay
drops nothing itself. A key (or hash field) whose deadline passed by the recovery time is never
visible: every lookup expires it first, counts reap it, and the active cycle reclaims the rest,
each as any expiry, a delete journaled before whatever the next command does with the name.
So the WAL after a restart never holds a change to a name whose old value it does not also
show gone (a list pushed where an expired hash was, after a second crash, replays onto nothing).
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


def remove_old(data_dir: Path, fs: OsOps, keep: str) -> None:
    """Every snapshot but `keep`, and any temporary file a crash left mid-write."""
    for path in data_dir.glob(f"{_PREFIX}*.bin*"):
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
    """Rules 3-4: load the checkpoint's keyspace, replay the WAL's keyspace operations.
    Returns (keys restored, keys among them already expired)."""
    name = ck.get("keyspace")
    base = read_snapshot(data_dir / name) if isinstance(name, str) else []
    return replay(ks, base, wal, now)


def replay(ks: Keyspace, base: ops.Op, wal: list[memoryview] | list[bytes], now: int) -> tuple[int, int]:
    """The checkpoint's operation, then the WAL's (sans-IO: tests drive it); Rule 4."""
    ks.apply(base)
    for body in wal:
        ks.apply(ops.decode(body))
    due = sum(1 for k, d in ks.expiry.deadlines.items() if d <= now and ks.owns(k))
    return len(ks.strings) + len(ks.colls), due
