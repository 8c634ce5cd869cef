"""How Storage opens a data dir (store.py Rules 4 and 5): mutations refused until recovery is
done, a data dir that cannot be read named in one StartupError, and the damaged files the
server can run without (functions.json) named once in the log and kept for /v0/ready.

Rule 1: `open` never lets a traceback reach the operator: a damaged checkpoint or an OSError
becomes one StartupError naming the file and what to do; nothing in the data dir is changed.
Rule 2: `damaged` (file name -> what is wrong) holds each file found damaged at `open`
until the command that replaces it ran (`_REPAIRS`: the command per file).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING

from topicsrv.errors import StartupError
from topicsrv.storage import functions, images

if TYPE_CHECKING:
    from topicsrv.engine.core import Engine
    from topicsrv.storage import recovery

log = logging.getLogger("topicsrv.storage")

_REPAIRS = {functions.NAME: functions.REPAIR}  # Rule 2: the command that replaces the file


class Startup:
    """The opening half of Storage (a mixin: store.py's Storage is the only user)."""

    engine: Engine
    data_dir: Path
    damaged: dict[str, str]
    _open: Callable[[], Awaitable[recovery.Recovered]]  # the recovery itself (store.py)

    def refuse_until_recovered(self) -> None:
        """Until `open` finished, every mutation answers 503 not_ready (reads see no topics)."""
        from topicsrv.storage.store import _NotReady

        self.engine.journal = _NotReady()

    async def open(self) -> recovery.Recovered:
        """Recover fsync/disk/ephemeral topics into the engine; memory topics stay pending.
        A data dir that cannot be opened or read raises StartupError: one message for the
        operator naming the file and what to do, never a traceback."""
        try:
            return await self._open()
        except images.CheckpointError as exc:
            raise StartupError(
                f"cannot start: {exc}. Nothing was changed. Run `python -m topicsrv check "
                f"--data-dir {self.data_dir}` for a full report, then restore {images.CHECKPOINT} "
                "from a backup; the segment files alone do not say which records are live.") from exc
        except OSError as exc:
            where = f" ({exc.filename})" if exc.filename else ""
            raise StartupError(
                f"cannot start: the data dir {self.data_dir} cannot be opened: "
                f"{exc.strerror or exc}{where}. Free disk space or fix its permissions, then "
                f"restart; `python -m topicsrv check --data-dir {self.data_dir}` verifies it.") from exc

    def _check_files(self) -> None:
        """Rule 5, before anything can store functions."""
        problem = functions.check(self.data_dir)
        if problem is not None:
            self.damaged[functions.NAME] = problem
            log.error("%s is damaged: %s. Started without function libraries: FUNCTION and FCALL "
                      "answer an error naming it until %s replaces it with an empty set (keeping "
                      "its bytes as %s); everything else is served", self.data_dir / functions.NAME,
                      problem, functions.REPAIR, functions.DAMAGED_COPY)

    def damage_report(self) -> list[dict[str, str]]:
        """Rule 5, for /v0/ready: each damaged file, what is wrong, what replaces it."""
        return [{"file": name, "problem": problem, "repair": _REPAIRS[name]}
                for name, problem in sorted(self.damaged.items())]

