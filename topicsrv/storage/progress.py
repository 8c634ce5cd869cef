"""How far a recovery has come, for the log and for `/v0/ready` while it runs.

Rule 1: recovery (a worker thread) writes these fields; the event loop only reads them
(`snapshot`). Each write is one attribute store of an int or a str, so a reader sees a value
that was true at some instant, never a torn one, and no lock is needed.
Rule 2: the phases, in order: `reading_wal` (the WAL files are read and checked),
`replaying` (checkpointed state, segment files and the WAL frames are applied, topic by
topic), `memory_topics` (memory-class topics rebuilt after ready is not part of this: the
server is ready before them), `done`.
Rule 3: the percentage is of the WAL frames to replay, the part of a recovery that grows with
the time since the last checkpoint; records/s counts every record loaded (segments and WAL).
Rule 4: the log gets a progress line at most once per LOG_EVERY_S, so a short recovery logs
nothing but its summary.
"""

from __future__ import annotations

import logging
import time
from typing import Any

log = logging.getLogger("topicsrv.storage")

LOG_EVERY_S = 1.0


class Progress:
    __slots__ = ("phase", "records", "frames_total", "frames_done", "t0", "_last_log")

    def __init__(self) -> None:
        self.phase = "starting"
        self.records = 0
        self.frames_total = 0
        self.frames_done = 0
        self.t0 = time.monotonic()
        self._last_log = self.t0

    def percent(self) -> int:
        """Percent of the WAL frames replayed (100 when there were none)."""
        total = self.frames_total
        if self.phase == "reading_wal":
            return 0
        return 100 if total == 0 else min(100, self.frames_done * 100 // total)

    def tick(self) -> None:
        """Called as records and frames are applied: a log line at most once a second."""
        t = time.monotonic()
        if t - self._last_log >= LOG_EVERY_S:
            self._last_log = t
            elapsed = max(t - self.t0, 1e-9)
            log.info("recovery: %s, %d records so far (%.0f records/s), %d%% of the WAL "
                     "replayed (%d of %d frames)", self.phase, self.records,
                     self.records / elapsed, self.percent(), self.frames_done,
                     self.frames_total)

    def snapshot(self) -> dict[str, Any]:
        elapsed = max(time.monotonic() - self.t0, 1e-9)
        return {"phase": self.phase, "records": self.records,
                "records_per_s": round(self.records / elapsed),
                "wal_frames": self.frames_total, "wal_frames_replayed": self.frames_done,
                "wal_percent": self.percent(), "elapsed_s": round(elapsed, 1)}
