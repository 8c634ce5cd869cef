"""A replica's routers: what its primary did to them, done again here (storage/replapply.py).

Rule 1 (definitions): the primary's T_ROUTER frame is applied as the primary applied it: a put
installs the router with the spec, cursor and source epoch the primary logged (or takes the
new spec of the one installed), a del detaches it. The replica's own journal logs the change
(`router_logged`), so its recovery re-derives the dest's copies as the primary's would.
Rule 2 (steps): each forwarding step of the primary that moved a cursor reaches a replica as a
T_FORWARD frame: the cursor the step ended at, the step's clock, the dest's next seq
after it, and the router's count of evicted unforwarded seqs when it began (a router restored
from a checkpoint does not know it: routerfwd.py Rule 6). The replica runs the same forwarding (routerfwd.forward, up to that cursor, on that
clock). Forwarding is deterministic given the source's records (storage/rederive.py Rule 2),
and at that point of the stream the replica holds its source exactly as the primary did, so
the copies take the primary's dest seqs, stream IDs and timestamps, and no copy crosses the
link. A dest whose next seq then differs from the primary's has diverged: `Diverged` (the
link drops and the replica takes a full sync: tasks/replica.py Rule 4).
Rule 3: a replica's own worker never forwards (tasks/routers.py, repl/state.py `acting`); a
promoted replica's workers resume from the cursors the last steps left.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from topicsrv.engine.routing import routerfwd, routers

if TYPE_CHECKING:
    from topicsrv.engine.core import Engine
    from topicsrv.engine.log.topic import Topic

BATCH = 4096  # source seqs per step while following (the primary's steps are 1000)


class Diverged(ValueError):
    """The replica's router state no longer matches its primary's (Rule 2)."""


class _At:
    """The primary's clock for the step a replica runs again (Rule 2)."""

    def __init__(self, now: int) -> None:
        self.now = now

    def now_ms(self) -> int:
        return self.now


def apply_op(engine: Engine, dest: Topic, op: dict[str, Any]) -> None:
    """Rule 1: the primary's router change on `dest`."""
    if op.get("op") == "del":
        name = str(op.get("name"))
        if name in engine.routers:
            routers.delete(engine, name)
        return
    spec = routers.spec_from_json(op["spec"])
    router = engine.routers.get(spec.name)
    if router is not None:
        if (router.spec.source, router.spec.dest) != (spec.source, spec.dest):
            raise Diverged(f"router {spec.name!r} routes {router.spec.source!r} -> "
                           f"{router.spec.dest!r} here, {spec.source!r} -> {spec.dest!r} on the primary")
        router.spec = spec
    else:
        src = engine.find(spec.source)
        if src is None or spec.dest != dest.name:
            raise Diverged(f"router {spec.name!r}: its source {spec.source!r} is missing here")
        router = routers.Router(spec, int(op["cursor"]), int(op["source_epoch"]), gone=0)
        routers.attach(engine, router, src, dest)
        router.status = "caught_up" if router.cursor >= src.head_seq else "forwarding"
    routers.refresh_caps(engine)
    engine.journal.router_logged(dest, routers.put_op(router))
    engine.notify(spec.source)  # a replica's worker starts (paused) once its endpoints are seen
    engine.notify(spec.dest)


def follow(engine: Engine, name: str, dest: Topic, to: int, ts: int, next_seq: int,
           gone: int | None = None) -> None:
    """Rule 2: the primary's step of router `name`, which ended at cursor `to`; `gone`: the
    router's count of evicted unforwarded seqs when it began (routerfwd.py Rule 6), which a
    router restored from a checkpoint does not know."""
    router = engine.routers.get(name)
    if router is None or router.spec.dest != dest.name:
        raise Diverged(f"the primary forwarded with router {name!r} into {dest.name!r}, "
                       "which this replica does not have")
    if router.cursor >= to:
        return  # a step this replica already ran (a resumed stream: storage/replapply.py Rule 2)
    router.gone = gone
    clock = engine.clock
    engine.clock = _At(ts)
    try:
        while router.cursor < to:
            before = (router.cursor, dest.next_seq)
            step = routerfwd.forward(engine, router, BATCH, until=to)
            if step.blocked is not None or (router.cursor, dest.next_seq) == before:
                break
    finally:
        engine.clock = clock
    if (router.cursor, dest.next_seq) != (to, next_seq):
        raise Diverged(f"router {name!r}: the primary's step ended at cursor {to} with "
                       f"{dest.name!r} at seq {next_seq}, here at cursor {router.cursor} and seq "
                       f"{dest.next_seq}")
