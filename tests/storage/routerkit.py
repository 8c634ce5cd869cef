"""Helpers of the router storage tests: forward synchronously, read a topic's layout."""

from __future__ import annotations

from typing import Any

import orjson

from topicsrv.engine import Engine
from topicsrv.engine.log.records import prepare_json
from topicsrv.engine.routing import routers
from topicsrv.storage import frames
from topicsrv.storage.walread import wal_files


def settle(engine: Engine, limit: int = 1000) -> None:
    """Forward every router until all are caught up (what the workers do, synchronously)."""
    for _ in range(10_000):
        steps = [routers.forward(engine, r, limit=limit) for r in list(engine.routers.values())]
        if all(s.caught_up or s.blocked is not None for s in steps):
            return
    raise AssertionError("routers never caught up")


def step(engine: Engine, name: str, limit: int) -> None:
    routers.forward(engine, engine.routers[name], limit=limit)


def layout(engine: Engine, name: str) -> dict[int, Any]:
    """{seq: data} of every record a reader gets from the start (tombstones skipped)."""
    out: dict[int, Any] = {}
    seq = 0
    while True:
        res = engine.diff(name, seq, 1000)
        for s, rec in zip(res.seqs, res.records, strict=True):
            out[s] = orjson.loads(rec)["data"]
        if res.next_from_seq <= seq and not res.records:
            return out
        seq = res.next_from_seq
        if res.caught_up:
            return out


def metas(engine: Engine, name: str) -> list[dict[str, Any]]:
    res = engine.diff(name, 0, 10_000)
    return [orjson.loads(rec).get("meta") or {} for rec in res.records]


def write_nowait(engine: Engine, topic: str, datas: list[Any]) -> dict[str, Any]:
    result, _ = engine.write(topic, [prepare_json({"data": d}, i) for i, d in enumerate(datas)])
    return result


def wal_frames(data_dir: Any) -> list[tuple[int, int]]:
    """(type, bytes) of every frame in every WAL file (headers excluded)."""
    out = []
    for _, _, path in wal_files(data_dir / "wal"):
        buf = memoryview(path.read_bytes())
        for got in frames.scan(buf, frames.FILE_HEADER_SIZE):
            assert isinstance(got, frames.Frame), got
            out.append((got.ftype, got.end - got.offset))
    return out
