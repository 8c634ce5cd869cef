"""The checkpoint's keyspace file, written by a forked child (storage/forksave.py, the
default) or, where fork is unavailable, refused or turned off (`serve --checkpoint-fork no`),
in parts on the loop while the server goes on serving.

Rule 0 (which path): `begin` forks in the cut step when `Saves.fork` says so and the kernel
agrees; a refused fork (ENOMEM, EAGAIN) is logged and that checkpoint takes the sliced path.
Both write the same bytes (the same Snapshot, the same encoders) under the same Rule 2, and
`write` ends both the same way: the file renamed into place by the parent, its name returned.
The final checkpoint of `close()` is always sliced: no client is served then, so a fork
would only cost memory.
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
import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING

import trio

from topicsrv.engine.keyspace import ops
from topicsrv.engine.keyspace.snapshot import PART_UNITS, Snapshot
from topicsrv.storage import forksave, frames, keyspacelog
from topicsrv.storage.fsops import TMP_SUFFIX, OsOps

if TYPE_CHECKING:
    from topicsrv.engine.keyspace import Keyspace

FLUSH_BYTES = 4 << 20  # bytes gathered before a worker thread writes them (Rule 1)
log = logging.getLogger("topicsrv.storage")


class Saves:
    """What INFO persistence and LASTSAVE report about checkpoints (Redis's rdb_* fields)."""

    def __init__(self) -> None:
        self.saves = 0  # checkpoints written
        self.last_save_time = int(time.time())  # of the last one written (LASTSAVE)
        self.last_ok = True
        self.in_progress = False
        self.parts = 0  # keyspace parts written by the last checkpoint
        self.fork = True  # Rule 0: `serve --checkpoint-fork`
        self.forks = 0  # children forked (INFO stats total_forks)
        self.fork_usec = 0  # how long the last fork held the loop (INFO latest_fork_usec)
        self.cow_bytes = 0  # what the last child copied on write (INFO rdb_last_cow_size)
        self.started = 0.0  # monotonic start of the running save
        self.last_seconds = -1  # how long the last save took (INFO rdb_last_bgsave_time_sec)

    def begun(self) -> None:
        if not self.in_progress:  # checkpoint.py may start it before the cut (the collapse)
            self.in_progress = True
            self.started = time.monotonic()

    def done(self, ok: bool) -> None:
        self.in_progress = False
        self.last_seconds = int(time.monotonic() - self.started)
        self.last_ok = ok
        if ok:
            self.saves += 1
            self.last_save_time = int(time.time())


Pending = Snapshot | forksave.Child


def begin(ks: Keyspace, data_dir: Path, fs: OsOps, gen: int, saves: Saves,
          fork: bool) -> Pending:
    """Rules 0-1: in the cut step."""
    if fork and forksave.available():
        try:
            child = forksave.start(ks, data_dir, fs, gen)
        except OSError as exc:
            log.warning("checkpoint: fork refused (%s); the keyspace is written in parts by the "
                        "server itself this time", exc)
        else:
            saves.forks += 1
            saves.fork_usec = child.fork_usec
            return child
    snap = Snapshot(ks)
    ks.saving = snap
    return snap


async def write(pending: Pending, data_dir: Path, fs: OsOps, gen: int, saves: Saves,
                units: int = PART_UNITS) -> str:
    """Rules 0-2: the file's name once it is whole and durable."""
    path = data_dir / keyspacelog.file_name(gen)
    tmp = path.with_name(path.name + TMP_SUFFIX)
    if isinstance(pending, forksave.Child):
        await forksave.wait(pending, fs)
        try:
            await trio.to_thread.run_sync(_install, fs, tmp, path)
        except BaseException:
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(_discard, fs, -1, tmp)
            raise
        saves.parts, saves.cow_bytes = pending.parts, pending.cow_bytes
        return path.name
    snap = pending
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


def _install(fs: OsOps, tmp: Path, path: Path) -> None:
    """The child fsynced the file (forksave.py Rule 2); its name becomes durable here."""
    fs.replace(tmp, path)
    fs.fsync_dir(path.parent)


def _discard(fs: OsOps, fd: int, tmp: Path) -> None:
    if fd >= 0:
        with contextlib.suppress(OSError):
            fs.close(fd)
    with contextlib.suppress(OSError):
        fs.unlink(tmp)  # every unlink goes through OsOps (fsops.py Rule 1)
