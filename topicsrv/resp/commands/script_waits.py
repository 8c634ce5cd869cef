"""What a script's reply waits for (resp/commands/scripts.py Rules 2-3): the commit of its
writes, and the end of a script past busy-reply-threshold. Async, so not compiled with
scripts.py (buildinfo.HOT_MODULES: trio wants its own coroutines)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from topicsrv.resp.commands.base import Err
from topicsrv.scripting.service import DISCARDED

if TYPE_CHECKING:
    from topicsrv.scripting.lua import Run
    from topicsrv.scripting.service import Scripting


class Tokens:
    """The commit tokens of one script's writes, awaited as one (scripts.py Rule 3)."""

    __slots__ = ("tokens",)

    def __init__(self, tokens: list[Any]) -> None:
        self.tokens = tokens

    async def wait(self) -> float:
        for t in self.tokens:
            await t.wait()
        return 0.0


async def finish_later(aw: Any, run: Run, sc: Scripting,
                       reply_of: Callable[[Any, Run], Any]) -> Any:
    """The reply of a script past the threshold, once it ended (`reply_of`: scripts.py's)."""
    result = await aw
    if sc.discarded:  # SHUTDOWN NOSAVE dropped its writes, whatever it returned (service Rule 6)
        return Err(DISCARDED)
    return reply_of(result, run)
