"""The checkpoint's keyspace file written by a forked child, as Redis's BGSAVE: the loop thread
only forks, then waits on a pipe while it serves.

Rule 1 (the instant is the fork): `start` forks in the checkpoint's cut step (checkpoint.py
Rule 1), so the child's memory is the keyspace of the cut, copy-on-write; the parent keeps no
image of anything (no `Keyspace.saving`), and every later change is in the WAL after the cut.
Rule 2 (what the child may do): it is a copy of a threaded trio process taken from the loop
thread, so it runs only this module's `_child`: it closes every inherited descriptor but its
status pipe (sockets, the WAL, the listeners: a client the parent closes must see its FIN
now, not when the child ends), resets the signals trio and the server handle, asks the kernel
to SIGKILL it should the parent die, lowers its own priority (nice 10: on a busy machine the
kernel runs the server's loop thread first when both want a CPU, instead of parking the loop
mid-turn behind its own save), disables the cyclic GC (a collection would write to
every tracked object's header and copy the whole heap), then walks a Snapshot
(engine/keyspace/snapshot.py) with nothing changing under it, encodes its parts with the same
functions as the sliced path (so the file is byte for byte what keyspacesave.py writes, and
recovery and fsck are unchanged), writes and fsyncs `keyspace-<gen>.bin.tmp` through the
storage's OsOps, reports one line on the pipe and leaves by `os._exit`: no trio, no logging,
no import, no lock another thread could have held at the fork, no atexit handler.
Rule 3 (the parent): `wait` parks on the pipe (no thread, no blocking call on the loop); the
pipe's end-of-file is the child's exit, then it is reaped. The rename, the directory fsync and
the bookkeeping stay with the parent (keyspacesave.py Rule 2). A child that failed (ENOSPC,
killed, any non-zero status) raises OSError with its reason: the checkpoint changes nothing
and its temporary file is removed. A wait that is cancelled (the server stops) kills and reaps
the child and removes the temporary file: no zombie, no stray file.
Rule 4 (memory): while the child lives the parent's objects are frozen out of the GC
(`gc.freeze`: a full collection in the parent would copy every page the child still shares);
they are unfrozen once it is reaped. The child's own reference-count writes copy the pages of
the objects it reads: its copied bytes (Private_Dirty) are reported as Redis's
`rdb_last_cow_size` (docs/storage.md has the measured sizes).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import gc
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import trio

from topicsrv.engine.keyspace import ops
from topicsrv.engine.keyspace.snapshot import PART_UNITS, Snapshot
from topicsrv.storage import frames, keyspacelog
from topicsrv.storage.fsops import TMP_SUFFIX, OsOps

if TYPE_CHECKING:
    from topicsrv.engine.keyspace import Keyspace

FLUSH_BYTES = 4 << 20  # bytes gathered before the child writes them
CHILD_HOOK: Callable[[], None] | None = None  # tests: runs in the child before it writes
CHILD_NICE = 10  # Rule 2: the scheduler's weight of the child, ~1/10 of the loop thread's
_PR_SET_PDEATHSIG = 1
_SIGNALS = tuple(s for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1)
                 if isinstance(s, signal.Signals))
try:  # loaded here, never in the child (Rule 2: no import there)
    _LIBC: ctypes.CDLL | None = ctypes.CDLL(None, use_errno=True)
except OSError:
    _LIBC = None
_EXIT = os._exit  # bound at import: a test that fakes os._exit must not keep a child alive
try:
    _MAX_FD = int(os.sysconf("SC_OPEN_MAX"))
except (ValueError, OSError):
    _MAX_FD = 1 << 16


def available() -> bool:
    return hasattr(os, "fork")


class Child:
    """A forked writer of one keyspace file (Rule 1)."""

    def __init__(self, pid: int, pipe: int, tmp: Path, fork_usec: int, frozen: bool) -> None:
        self.pid = pid  # 0 once reaped
        self.pipe = pipe  # read end: the child's one status line, then end-of-file
        self.tmp = tmp
        self.fork_usec = fork_usec
        self.frozen = frozen  # Rule 4: the parent's gc.freeze() to undo once it is reaped
        self.parts = 0
        self.cow_bytes = 0


def start(ks: Keyspace, data_dir: Path, fs: OsOps, gen: int, units: int = PART_UNITS) -> Child:
    """Rule 1: fork now (the cut step); raises OSError when the kernel refuses the fork."""
    tmp = data_dir / (keyspacelog.file_name(gen) + TMP_SUFFIX)
    r, w = os.pipe()
    parent = os.getpid()
    frozen = gc.isenabled()
    if frozen:
        gc.freeze()  # Rule 4
    t0 = time.perf_counter_ns()
    try:
        pid = os.fork()
    except OSError:
        os.close(r)
        os.close(w)
        if frozen:
            gc.unfreeze()
        raise
    if pid == 0:  # pragma: no cover (runs in the child: it never returns)
        _child(ks, fs, tmp, gen, units, w, parent)
    fork_usec = (time.perf_counter_ns() - t0) // 1000
    os.close(w)
    os.set_blocking(r, False)
    return Child(pid, r, tmp, fork_usec, frozen)


async def wait(child: Child, fs: OsOps) -> None:
    """Rule 3: returns once the child wrote and fsynced `child.tmp`; raises OSError when it
    did not (the temporary file is gone then)."""
    try:
        status = b""
        while True:
            await trio.lowlevel.wait_readable(child.pipe)
            try:
                got = os.read(child.pipe, 4096)
            except BlockingIOError:
                continue
            if not got:
                break
            status += got
        _, code = await trio.to_thread.run_sync(os.waitpid, child.pid, 0)
        child.pid = 0
        _judge(child, status, code)
    except BaseException:
        await abandon(child, fs)
        raise
    finally:
        _release(child)


async def abandon(child: Child, fs: OsOps) -> None:
    """Rule 3: kill and reap the child if it still runs, remove its file; safe to repeat."""
    with trio.CancelScope(shield=True):
        if child.pid:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child.pid, signal.SIGKILL)
            await trio.to_thread.run_sync(os.waitpid, child.pid, 0)
            child.pid = 0
        with contextlib.suppress(OSError):
            fs.unlink(child.tmp)
    _release(child)


def _release(child: Child) -> None:
    if child.pipe >= 0:
        os.close(child.pipe)
        child.pipe = -1
    if child.frozen:
        gc.unfreeze()
        child.frozen = False


def _judge(child: Child, status: bytes, code: int) -> None:
    words = status.decode("utf-8", "replace").split(" ", 2)
    if code == 0 and words[0] == "ok" and len(words) == 3:
        child.parts, child.cow_bytes = int(words[1]), int(words[2])
        return
    if words[0] == "err" and len(words) == 3:
        raise OSError(int(words[1]) or errno.EIO, words[2])
    if os.WIFSIGNALED(code):
        why = f"was killed by signal {os.WTERMSIG(code)}"
    else:
        why = f"exited with status {os.waitstatus_to_exitcode(code)}"
    raise OSError(errno.EIO, f"the checkpoint's writer process {why}")


# ---- the child (Rule 2) ----------------------------------------------------------------------


def _child(ks: Keyspace, fs: OsOps, tmp: Path, gen: int, units: int, w: int,
           parent: int) -> None:  # pragma: no cover (a forked process: coverage cannot see it)
    code = 1
    try:
        gc.disable()
        if w > 3:
            os.closerange(3, w)
        os.closerange(max(w + 1, 3), max(_MAX_FD, w + 2))
        with contextlib.suppress(ValueError):  # not the main thread: trio set none there
            signal.set_wakeup_fd(-1)
            for sig in _SIGNALS:
                signal.signal(sig, signal.SIG_DFL)
        if _LIBC is not None:
            _LIBC.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        if os.getppid() != parent:  # the parent died before the prctl
            _EXIT(1)
        with contextlib.suppress(OSError):  # Rule 2: background work yields to the loop
            os.nice(CHILD_NICE)
        if CHILD_HOOK is not None:
            CHILD_HOOK()
        parts, cow = _write(ks, fs, tmp, gen, units)
        _say(w, f"ok {parts} {cow}")
        code = 0
    except OSError as exc:
        _say(w, f"err {exc.errno or 0} {exc.strerror or exc}")
    except BaseException as exc:  # noqa: BLE001 (nothing may escape a forked child)
        _say(w, f"err 0 {type(exc).__name__}: {exc}")
    finally:
        _EXIT(code)


def _write(ks: Keyspace, fs: OsOps, tmp: Path, gen: int, units: int) -> tuple[int, int]:
    """The file of keyspacesave.py, in one pass: nothing changes under this snapshot."""
    snap = Snapshot(ks)
    fd = fs.open_new(tmp)
    try:
        buf = [frames.file_header(frames.WAL_MAGIC, keyspacelog.SHARD, gen)]
        size = parts = 0
        while (part := snap.next_part(units)) is not None:
            body = frames.encode(frames.T_KEYSPACE, ops.encode(part))
            buf.append(body)
            size += len(body)
            parts += 1
            if size >= FLUSH_BYTES:
                fs.writev(fd, buf)
                buf, size = [], 0
        if buf:
            fs.writev(fd, buf)
        fs.fsync(fd)
    finally:
        fs.close(fd)
    return parts, _private_dirty()


def _private_dirty() -> int:
    """Bytes this process copied on write (Rule 4), 0 where /proc does not say."""
    try:
        fd = os.open("/proc/self/smaps_rollup", os.O_RDONLY)
    except OSError:
        return 0
    try:
        text = os.read(fd, 1 << 16)
    finally:
        os.close(fd)
    for line in text.split(b"\n"):
        if line.startswith(b"Private_Dirty:"):
            return int(line.split()[1]) * 1024
    return 0


def _say(w: int, line: str) -> None:
    with contextlib.suppress(OSError):
        os.write(w, line.encode("utf-8", "replace")[:4000])
