"""Run an engine with real storage in-process (the same wiring as the server)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import trio

from topicsrv.clock import Clock
from topicsrv.engine import Engine
from topicsrv.engine.log.records import prepare_json
from topicsrv.storage.store import Storage


@asynccontextmanager
async def running(path: Path, *, clock: Clock | None = None, crash: bool = False,
                  **kw: Any) -> AsyncIterator[tuple[Engine, Storage]]:
    """Open storage on `path`, recover, run its tasks; on exit close cleanly, or, with
    crash=True, stop without flushing or checkpointing (what SIGKILL leaves behind)."""
    engine = Engine(clock=clock)
    st = Storage(engine, path, **kw)
    st.refuse_until_recovered()
    await st.open()
    async with trio.open_nursery() as nursery:
        await nursery.start(st.run)
        await st.settled.wait()
        try:
            yield engine, st
        finally:
            nursery.cancel_scope.cancel()
    if crash:
        for sh in st.shards:
            sh.close()
    else:
        await st.close()


async def write(engine: Engine, topic: str, datas: list[Any], **kw: Any) -> dict[str, Any]:
    result, token = engine.write(topic, [prepare_json({"data": d, **kw}, i) for i, d in enumerate(datas)])
    if token is not None:
        await token.wait()
    return result


def live(engine: Engine, topic: str) -> dict[int, bytes]:
    t = engine.get(topic)
    out = {}
    for seg in t.segs:
        if not seg.live:  # a Run may stand for any number of seqs
            continue
        for seq in range(max(seg.base, t.front), seg.next_seq):
            rec = t.record_at(seq)
            if rec is not None:
                out[seq] = rec[0]
    return out
