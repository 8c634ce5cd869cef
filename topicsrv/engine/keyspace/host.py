"""The engine the keyspace lives in, as the keyspace sees it (`Host`), and how a change of a
string or collection key reaches the engine's listeners (engine/core.py Rules 3-4): `told`
says whether anyone would hear of it, `tell` tells them. Both run once per write at P1
(space.py's `commit`, runs.py's `finish`): compiled (buildinfo.HOT_MODULES).
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import TYPE_CHECKING, Any, Protocol

from sortedcontainers import SortedDict

from topicsrv.clock import Clock

if TYPE_CHECKING:
    from topicsrv.engine.journal import CommitToken, Journal


class Host(Protocol):
    """What the keyspace needs of the engine (a narrow view of engine/core.py's Engine)."""

    topics: SortedDict  # a scanorder.TopicMap
    journal: Journal
    clock: Clock

    def now(self) -> int: ...

    def notify(self, name: str) -> None: ...

    listeners: list[Callable[[str], None]]
    interests: dict[int, Collection[str]]
    held: dict[str, bool] | None

    def delete_topic(self, name: str) -> tuple[Any, CommitToken | None]: ...


def told(host: Host) -> bool:
    """Whether a string change is gathered or told to anyone at all (Rules 3-4 of
    engine/core.py): changes are held, or some listener has no interest (it hears every
    name) or a non-empty one. Nobody watching and no waiter armed: a write skips `tell`."""
    if host.held is not None:
        return True
    interests = host.interests
    for listener in host.listeners:
        wanted = interests.get(id(listener))
        if wanted is None or wanted:
            return True
    return False


def tell(host: Host, names: Collection[str]) -> None:
    """engine/core.py Rules 3-4: string keys changed: gathered while changes are held, else
    told to each of `host.listeners` whose interest (`host.interests`, by id) holds the name
    (no interest: every name)."""
    held = host.held
    if held is not None:
        for name in names:
            if name not in held:
                held[name] = False  # a string change: not for topic_listeners (Rule 4)
        return
    interests = host.interests
    for listener in host.listeners:
        wanted = interests.get(id(listener))
        if wanted is None:
            for name in names:
                listener(name)
        elif wanted:
            for name in names:
                if name in wanted:
                    listener(name)
