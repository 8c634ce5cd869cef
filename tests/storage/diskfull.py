"""A disk that fills up while one kind of file is written (issue 40), for tests of every file
the server writes outside the WAL (storage/fsops.py Rule 3).

`FullDisk(monkeypatch, pattern, ...)` patches `os.write` and `os.writev` (for any code, not
only the storage's `OsOps`): the first write to a file whose path matches a pattern accepts
half of its bytes and returns that short count, as write(2) does when the disk fills mid-write;
every later write to such a file fails with ENOSPC, until `free()`. Writes to other files (the
WAL, sockets) go through unchanged.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Sequence
from fnmatch import fnmatch

import pytest

ENOSPC_TEXT = os.strerror(errno.ENOSPC)  # "No space left on device"


class FullDisk:
    def __init__(self, monkeypatch: pytest.MonkeyPatch, *patterns: str) -> None:
        if not os.path.isdir("/proc/self/fd"):
            pytest.skip("needs /proc/self/fd to tell which file a write goes to")
        self.patterns = patterns
        self.full = True
        self.short = 0  # writes that accepted part of their bytes
        self.refused = 0  # writes that failed with ENOSPC
        self.real_write = os.write
        self.real_writev = os.writev
        monkeypatch.setattr(os, "write", self._write)
        monkeypatch.setattr(os, "writev", self._writev)

    def free(self) -> None:
        """Room again: every write goes through."""
        self.full = False

    def _hit(self, fd: int) -> bool:
        if not self.full:
            return False
        try:
            path = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            return False
        return any(fnmatch(path, p) for p in self.patterns)

    def _fill(self, fd: int, data: bytes) -> int:
        if self.short == 0 and len(data) > 1:
            self.short += 1
            return self.real_write(fd, data[:len(data) // 2])
        self.refused += 1
        raise OSError(errno.ENOSPC, ENOSPC_TEXT)

    def _write(self, fd: int, data: bytes) -> int:
        return self._fill(fd, bytes(data)) if self._hit(fd) else self.real_write(fd, data)

    def _writev(self, fd: int, buffers: Sequence[bytes]) -> int:
        if self._hit(fd):
            return self._fill(fd, b"".join(bytes(b) for b in buffers))
        return self.real_writev(fd, buffers)
