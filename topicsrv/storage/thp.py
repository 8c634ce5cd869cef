"""The heap in transparent huge pages before a fork, so that the fork copies one page-table
entry per 2 MiB instead of 512 (storage/forksave.py: the fork is the one stall a checkpoint
by fork puts on the loop, and it grows with the resident memory: ~60 µs per MB in 4 KiB
pages, ~2 µs in huge pages, measured).

Rule 1 (what): `collapse` asks the kernel to collapse (MADV_COLLAPSE, Linux 6.1+) every
2 MiB-aligned range of the process's private writable anonymous mappings (the Python heap:
pymalloc's arenas, malloc's heap and mmaps) into huge pages. MADV_COLLAPSE does not depend on
the system's THP setting (`madvise` or `always`; `never` refuses it), marks nothing for later
faults (no MADV_HUGEPAGE: a later fault in those mappings still gets a 4 KiB page), and after
a fork a write to a shared huge page copies 4 KiB, not 2 MiB (the kernel splits it), so it
changes neither the server's resident size nor the child's copy-on-write cost.
Rule 2 (where): it runs in a worker thread (the madvise calls release the GIL) before the
checkpoint's cut, never on the loop, at the server's priority (see `collapse`); a range already in huge pages costs next to nothing, so
after the first checkpoint it collapses what the last one split and what the heap grew.
Rule 3 (never fatal): a range the kernel refuses (EINVAL: a thread's stack, which glibc marks
MADV_NOHUGEPAGE) is skipped; a pass where every range was refused (a kernel without
MADV_COLLAPSE, THP `never`) turns it off for the process, and the fork is only slower.
"""

from __future__ import annotations

import ctypes
import errno

MADV_COLLAPSE = 25
HUGE = 1 << 21
_ON = True
_LIBC: ctypes.CDLL | None = None
try:
    _libc = ctypes.CDLL(None, use_errno=True)
    _libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    _libc.madvise.restype = ctypes.c_int
    _LIBC = _libc
except (OSError, AttributeError):
    pass


def ranges(maps: str) -> list[tuple[int, int]]:
    """The 2 MiB-aligned parts of the private writable anonymous mappings in a
    /proc/<pid>/maps text (the heap and anonymous mmaps; not the stack, not files)."""
    out = []
    for line in maps.splitlines():
        fields = line.split(maxsplit=5)
        if len(fields) < 5 or fields[1][:2] != "rw" or fields[1][3] != "p":
            continue
        if len(fields) == 6 and fields[5].strip() not in ("", "[heap]"):
            continue
        start, end = (int(x, 16) for x in fields[0].split("-"))
        lo, hi = (start + HUGE - 1) & ~(HUGE - 1), end & ~(HUGE - 1)
        if hi > lo:
            out.append((lo, hi - lo))
    return out


def collapse() -> int:
    """Rules 1-3 (blocking: a worker thread's job); bytes asked for, 0 when off. Not niced
    (Rule 2): each 2 MiB collapse holds the process's mmap lock while it copies, and a
    collapsing thread parked by the scheduler with that lock held would stall every page
    fault of the loop thread until it runs again."""
    return _collapse()


def _collapse() -> int:
    global _ON
    if not _ON or _LIBC is None:
        return 0
    try:
        with open("/proc/self/maps") as f:
            maps = f.read()
    except OSError:
        _ON = False
        return 0
    asked = refused = 0
    for addr, size in ranges(maps):
        if _LIBC.madvise(addr, size, MADV_COLLAPSE) == 0:
            asked += size
        elif ctypes.get_errno() in (errno.EINVAL, errno.EPERM, errno.ENOSYS):
            refused += 1  # this range (a thread's stack is MADV_NOHUGEPAGE), or every range
        # EAGAIN/ENOMEM (no huge page free now), a range unmapped since: the next one
    if refused and not asked:
        _ON = False  # Rule 3: this kernel (or its THP setting) has none of it
    return asked
