"""The checkpoint's keyspace file, written in parts while the server goes on serving.

Rule 1 (the loop never waits on the keyspace's size): the checkpoint's cut step only starts a
Snapshot (engine/keyspace/snapshot.py: nothing is copied then); `write` then takes one part
at a time (about PART_UNITS keys and elements), encodes it as one T_KEYSPACE frame and lets
the loop serve others before the next; the bytes go to the file from a worker thread every
FLUSH_BYTES. A change made meanwhile keeps the image of its key first (snapshot.py Rule 2),
so the file is the keyspace of the cut and the WAL after the cut holds every later change:
recovery is the same as for a file written at once (keyspacelog.py Rule 3).
Rule 2 (whole or not at all): the file is `keyspace-<gen>.bin.tmp` until it is whole and
fsynced; then it is renamed and the folder fsynced (fsops.py Rule 3). On any failure the
temporary file is removed and the OSError goes to the checkpoint, which then changes nothing
(checkpoint.py Rule 5). The keyspace forgets the snapshot however `write` ends.
Rule 3 (no full collection): a part's changes live only while it is encoded; the cyclic GC
is paused while a part is built, so none of them survives a young collection into the old
generation. Otherwise a checkpoint of ten million elements promoted millions of them and
set off a full collection of the whole heap (hundreds of ms on 1M keys: bench/ckptbench.py).
"""

from __future__ import annotations

import contextlib
import gc
import time
from pathlib import Path
from typing import TYPE_CHECKING

import trio

from topicsrv.engine.keyspace import ops
from topicsrv.engine.keyspace.snapshot import PART_UNITS, Snapshot
from topicsrv.storage import frames, keyspacelog
from topicsrv.storage.fsops import TMP_SUFFIX, OsOps

if TYPE_CHECKING:
    from topicsrv.engine.keyspace import Keyspace

FLUSH_BYTES = 4 << 20  # bytes gathered before a worker thread writes them (Rule 1)


class Saves:
    """What INFO persistence and LASTSAVE report about checkpoints (Redis's rdb_* fields)."""

    def __init__(self) -> None:
        self.saves = 0  # checkpoints written
        self.last_save_time = int(time.time())  # of the last one written (LASTSAVE)
        self.last_ok = True
        self.in_progress = False
        self.parts = 0  # keyspace parts written by the last checkpoint

    def done(self, ok: bool) -> None:
        self.in_progress = False
        self.last_ok = ok
        if ok:
            self.saves += 1
            self.last_save_time = int(time.time())


def begin(ks: Keyspace) -> Snapshot:
    """Rule 1: in the cut step."""
    snap = Snapshot(ks)
    ks.saving = snap
    return snap


async def write(snap: Snapshot, data_dir: Path, fs: OsOps, gen: int, saves: Saves,
                units: int = PART_UNITS) -> str:
    """Rules 1-2: the file's name once it is whole and durable."""
    path = data_dir / keyspacelog.file_name(gen)
    tmp = path.with_name(path.name + TMP_SUFFIX)
    fd = -1
    try:
        fd = await trio.to_thread.run_sync(fs.open_new, tmp)
        buf = [frames.file_header(frames.WAL_MAGIC, keyspacelog.SHARD, gen)]
        size = 0
        parts = 0
        while (body := _next_frame(snap, units)) is not None:
            buf.append(body)
            size += len(body)
            parts += 1
            if size >= FLUSH_BYTES:
                await trio.to_thread.run_sync(fs.writev, fd, buf)
                buf, size = [], 0
            else:
                await trio.lowlevel.checkpoint()
        snap.ks.saving = None
        await trio.to_thread.run_sync(_finish, fs, fd, buf, tmp, path)
        fd = -1
        saves.parts = parts
        return path.name
    except BaseException:
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(_discard, fs, fd, tmp)
        raise
    finally:
        snap.ks.saving = None


def _next_frame(snap: Snapshot, units: int) -> bytes | None:
    """The next part as one frame, built with the cyclic GC paused (Rule 3)."""
    paused = gc.isenabled()
    if paused:
        gc.disable()
    try:
        part = snap.next_part(units)
        return None if part is None else frames.encode(frames.T_KEYSPACE, ops.encode(part))
    finally:
        if paused:
            gc.enable()


def _finish(fs: OsOps, fd: int, buf: list[bytes], tmp: Path, path: Path) -> None:
    try:
        if buf:
            fs.writev(fd, buf)
        fs.fsync(fd)
    finally:
        fs.close(fd)
    fs.replace(tmp, path)
    fs.fsync_dir(path.parent)


def _discard(fs: OsOps, fd: int, tmp: Path) -> None:
    if fd >= 0:
        with contextlib.suppress(OSError):
            fs.close(fd)
    with contextlib.suppress(OSError):
        fs.unlink(tmp)  # every unlink goes through OsOps (fsops.py Rule 1)
