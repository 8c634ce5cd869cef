"""The active expiry cycle: a task that reclaims due keys (strings and topics) and due hash
fields a few times a second, as Redis's activeExpireCycle at `hz 10`.

Rule 1: each tick does bounded work (engine/keyspace/space.py ACTIVE_BUDGET heap pops); when
a tick used its whole budget, the next one comes at once (after a checkpoint), so a burst of
expiries drains without starving the clients.
Rule 2: lazy expiry on access is the engine's; this task only reclaims memory and makes
expired topics' drops durable even when nobody looks at them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio

from topicsrv.engine.keyspace.space import ACTIVE_BUDGET

if TYPE_CHECKING:
    from topicsrv.engine.core import Engine

TICK_S = 0.1


async def expire_keys(engine: Engine, tick_s: float = TICK_S) -> None:
    ks = engine.keyspace
    while True:
        before = len(ks.expiry.heap) + len(ks.fexpiry.heap)
        ks.active_expire()
        if before - len(ks.expiry.heap) - len(ks.fexpiry.heap) >= ACTIVE_BUDGET:
            await trio.lowlevel.checkpoint()  # Rule 1: more are due
        else:
            await trio.sleep(tick_s)
