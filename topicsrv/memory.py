"""The memory limit: `--max-memory`, Redis's `maxmemory` with the `noeviction` policy.

Rule 1: used memory is what the process holds resident (RSS from /proc/self/statm, or the
peak from getrusage where /proc is missing). It is sampled at most every SAMPLE_S, and at once
when more than ADMIT_BYTES of writes were admitted since the last sample, so a burst of writes
cannot run far past the limit between samples.
Rule 2: over the limit, commands that add data are refused: RESP commands flagged `denyoom`
answer `-OOM command not allowed when used memory > 'maxmemory'.`, HTTP writes and topic
creation answer 507 `insufficient_memory`. Reads, deletes and topic drops keep working, so a
user can always free memory (nothing is ever evicted by the server: noeviction).
Rule 3: before a write is refused, memory the process freed is handed back to the system
(gc + glibc `malloc_trim`) at most once per TRIM_S, so deleting data lifts the refusal.
Rule 4: `limit == 0` disables the check. The default ("auto") is AUTO_FRACTION of what the
process may use: the cgroup's memory.max when one is set, else physical memory, so the server
refuses writes instead of being killed by the kernel's OOM killer.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import logging
import os
import resource
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from topicsrv.errors import TopicsError

log: Final = logging.getLogger("topicsrv.memory")

SAMPLE_S: Final = 0.05
TRIM_S: Final = 1.0
ADMIT_BYTES: Final = 1 << 20
AUTO_FRACTION: Final = 0.8
OOM_MESSAGE: Final = "command not allowed when used memory > 'maxmemory'."

_PAGE: Final = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_STATM: Final = "/proc/self/statm"


_UNITS: Final = {"": 1, "b": 1, "k": 1000, "kb": 1024, "m": 1000**2, "mb": 1024**2, "g": 1000**3,
          "gb": 1024**3}


def parse_size(text: str) -> int | None:
    """A byte size as Redis writes them (1048576, 64k, 512mb, 2gb), or None if it is not one."""
    raw = text.strip().lower()
    digits = raw.rstrip("kmgb")
    unit = raw[len(digits):]
    if not digits.isdigit() or unit not in _UNITS:
        return None
    return int(digits) * _UNITS[unit]


def rss_bytes() -> int:
    """The resident set size of this process, in bytes."""
    try:
        with open(_STATM, "rb") as f:
            return int(f.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def available_bytes() -> int:
    """What this process may use: the cgroup v2/v1 limit when set, else physical memory."""
    candidates = []
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            text = Path(path).read_text().strip()
        except OSError:
            continue
        if text.isdigit() and int(text) < (1 << 60):
            candidates.append(int(text))
    try:
        candidates.append(os.sysconf("SC_PHYS_PAGES") * _PAGE)
    except (ValueError, OSError, AttributeError):
        pass
    return min(candidates) if candidates else 0


def auto_limit() -> int:
    return int(available_bytes() * AUTO_FRACTION)


def _load_trim() -> Any:
    name = ctypes.util.find_library("c")
    if not name:
        return None
    try:
        fn = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_size_t]
    fn.restype = ctypes.c_int
    return fn


class MemoryGuard:
    """Admission of writes against the memory limit (one per server)."""

    def __init__(self, limit: int, *, rss: Callable[[], int] = rss_bytes) -> None:
        self.limit = max(0, int(limit))
        self._rss = rss
        self._used = 0
        self._sampled_at = -1.0
        self._admitted = 0
        self._trimmed_at = -1.0
        self._trim = _load_trim()
        self.refused = 0  # writes refused since start (INFO / metrics)

    def used(self) -> int:
        """The last sampled used memory (refreshed when stale)."""
        now = time.monotonic()
        if now - self._sampled_at >= SAMPLE_S or self._admitted >= ADMIT_BYTES:
            self._sample(now)
        return self._used

    def _sample(self, now: float) -> None:
        self._used = int(self._rss())
        self._sampled_at = now
        self._admitted = 0

    def over(self, incoming: int = 0) -> bool:
        """True when a write of `incoming` bytes must be refused. Cheap when far from the limit."""
        if not self.limit:
            return False
        self._admitted += incoming
        if self.used() + incoming <= self.limit:
            return False
        now = time.monotonic()
        if now - self._trimmed_at >= TRIM_S:  # give freed memory back, then look again
            self._trimmed_at = now
            gc.collect()
            if self._trim is not None:
                self._trim(0)
            self._sample(now)
            if self._used + incoming <= self.limit:
                return False
        self.refused += 1
        return True

    def check(self, incoming: int = 0) -> None:
        """Raise 507 `insufficient_memory` (RESP `-OOM ...`) when a write must be refused."""
        if self.over(incoming):
            raise oom_error()


def oom_error() -> TopicsError:
    return TopicsError("insufficient_memory", OOM_MESSAGE, resp_prefix="OOM")
