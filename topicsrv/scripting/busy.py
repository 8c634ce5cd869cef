"""The loop side of a script past busy-reply-threshold (runner.py Rule 2): the system task
that resumes it slice by slice, and the awaitable its EVAL returns. Async, so not compiled
with runner.py (buildinfo.HOT_MODULES: trio wants its own coroutines)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import trio

if TYPE_CHECKING:
    from topicsrv.scripting.runner import Job, Runner


async def drive(runner: Runner, job: Job) -> None:
    """Resume the script slice by slice, one loop turn between slices, until it ends."""
    try:
        while not job.done:
            await trio.lowlevel.checkpoint()
            runner.resume(job)
    except trio.Cancelled:  # the loop is ending (shutdown) under a busy script: runner Rule 5
        runner.park()
        raise
    runner.ended(job)


async def wait(job: Job) -> Any:
    """The busy script's outcome, once it ended."""
    assert job.finished is not None
    await job.finished.wait()
    return job.outcome()
