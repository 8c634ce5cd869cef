"""The storage's only door to the OS for writes: a seam where tests inject faults.

Rule 1: every write, sync, truncate and unlink the storage does goes through one `OsOps`
object, so a fault injector (tests) can fail exactly one kind of call with ENOSPC or EIO.
Rule 2: these calls block; the async layers run them in worker threads, never on the loop.
Rule 3 (whole or not at all): every file the server writes outside the WAL and the segment
.data appends (checkpoint.json, keyspace-<gen>.bin, segment .idx files, functions.json, cold
copies, a WAL tail set aside) goes through `write_file`: a temporary file takes every byte
(a short write continues with the rest; a write that accepts nothing or fails raises), is
fsynced, renamed over the old file, and the directory is fsynced. When a step up to the
rename fails the old file is untouched, the temporary file is removed, and the OSError
reaches the caller, whose job is to change nothing else (docs/operations.md: a full disk, by
kind of write). Only the directory fsync comes after the rename: when it fails the file is
already the new one, and after a crash it is either one, whole.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Sequence
from pathlib import Path

IOV_MAX = 512
TMP_SUFFIX = ".tmp"  # write_file's temporary file: `<name>.tmp` beside the file


class OsOps:
    def open_append(self, path: Path) -> int:
        return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_CLOEXEC", 0), 0o644)

    def open_rw(self, path: Path) -> int:
        return os.open(path, os.O_RDWR | getattr(os, "O_CLOEXEC", 0))

    def close(self, fd: int) -> None:
        os.close(fd)

    def writev(self, fd: int, buffers: Sequence[bytes]) -> int:
        """Write every buffer (looping over short writes and IOV_MAX); returns bytes written."""
        total = 0
        bufs = list(buffers)
        while bufs:
            chunk = bufs[:IOV_MAX]
            want = sum(len(b) for b in chunk)
            n = os.writev(fd, chunk)
            if n <= 0:  # a regular file that takes no byte would loop forever here
                raise OSError(errno.ENOSPC, f"short write: 0 of {want} bytes accepted")
            total += n
            if n == want:
                bufs = bufs[IOV_MAX:]
                continue
            # short write: drop what went out, keep the remainder
            rest: list[bytes] = []
            skip = n
            for b in chunk:
                if skip >= len(b):
                    skip -= len(b)
                    continue
                rest.append(b[skip:])
                skip = 0
            bufs = rest + bufs[IOV_MAX:]
        return total

    def pwrite(self, fd: int, data: bytes, offset: int) -> None:
        if os.pwrite(fd, data, offset) != len(data):
            raise OSError("short pwrite")

    def fdatasync(self, fd: int) -> None:
        os.fdatasync(fd)

    def fsync(self, fd: int) -> None:
        os.fsync(fd)

    def ftruncate(self, fd: int, size: int) -> None:
        os.ftruncate(fd, size)

    def open_new(self, path: Path) -> int:
        return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0), 0o644)

    def replace(self, src: Path, dst: Path) -> None:
        os.replace(src, dst)

    def write_file(self, path: Path, data: bytes) -> None:
        """Replace `path` with `data`, whole or not at all (Rule 3)."""
        tmp = path.with_name(path.name + TMP_SUFFIX)
        try:
            fd = self.open_new(tmp)
            try:
                self.writev(fd, [data])
                self.fsync(fd)
            finally:
                self.close(fd)
            self.replace(tmp, path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass  # gone already, or the disk refuses even that: the old file is intact
            raise
        self.fsync_dir(path.parent)

    def fsync_dir(self, path: Path) -> None:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def unlink(self, path: Path) -> None:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
