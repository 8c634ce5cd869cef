"""The server's life cycle in-process: /v0/ready reports recovery progress while it runs, and
a shutdown lets a write that is waiting for its fsync get its reply before the process stops
(nothing acknowledged lost, nothing in flight answered with a dropped connection)."""

from __future__ import annotations

import http.client
import json
import threading
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import trio

from conftest import free_port
from tests.storage.harness import running, write
from topicsrv import server as srv
from topicsrv.context import ServerConfig
from topicsrv.storage import recovery
from topicsrv.storage.fsops import OsOps


def _get(port: int, path: str) -> tuple[int, Any]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        return resp.status, json.loads(resp.read() or b"null")
    finally:
        conn.close()


async def _crashed_data_dir(path: Path, frames: int) -> None:
    """`frames` WAL frames of an fsync topic and no checkpoint after them (a SIGKILL)."""
    async with running(path, crash=True) as (engine, _):
        engine.put_topic("jobs", {"durability": "fsync"})
        for i in range(frames):
            await write(engine, "jobs", [{"i": i}, {"i": i, "b": 1}])


def test_ready_reports_recovery_progress_until_it_is_done(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    trio.run(_crashed_data_dir, tmp_path, 40)
    gate, halfway = threading.Event(), threading.Event()
    apply = recovery.Builder._apply
    seen = [0]

    def slow_apply(self: recovery.Builder, *a: Any) -> None:
        apply(self, *a)
        seen[0] += 1
        if seen[0] == 20:  # hold recovery half way through the WAL
            halfway.set()
            assert gate.wait(20)

    monkeypatch.setattr(recovery.Builder, "_apply", slow_apply)
    port = free_port()
    cfg = ServerConfig(http_port=port, resp_port=None, data_dir=tmp_path)
    box: dict[str, Any] = {}

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            box["cancel"] = nursery.cancel_scope
            box["token"] = trio.lowlevel.current_trio_token()
            await nursery.start(partial(srv.run, cfg, handle_signals=False))

    thread = threading.Thread(target=trio.run, args=(main,), daemon=True)
    thread.start()
    try:
        assert halfway.wait(20)
        status, body = _get(port, "/v0/ready")
        assert status == 503 and body["error"]["code"] == "not_ready"
        rec = body["error"]["detail"]["recovery"]
        assert rec["phase"] == "replaying"
        assert rec["wal_frames"] >= 40 and rec["records"] >= 30  # 2 records a frame
        assert 0 < rec["wal_percent"] < 100
        assert _get(port, "/v0/health")[0] == 200  # alive while recovering
        gate.set()
        for _ in range(200):
            if _get(port, "/v0/ready")[0] == 200:
                break
            threading.Event().wait(0.05)
        status, body = _get(port, "/v0/ready")
        assert status == 200 and body["ready"] is True
    finally:
        gate.set()
        if "token" in box:
            trio.from_thread.run_sync(box["cancel"].cancel, trio_token=box["token"])
        thread.join(10)


class _SlowSync(OsOps):
    """fdatasync that waits for the test's go-ahead: a write stays in flight on purpose."""

    def __init__(self, entered: threading.Event, go: threading.Event) -> None:
        self.entered, self.go = entered, go
        self.hold = False

    def fdatasync(self, fd: int) -> None:
        if self.hold:
            self.entered.set()
            assert self.go.wait(20)
        super().fdatasync(fd)
