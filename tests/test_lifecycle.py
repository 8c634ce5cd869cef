"""The server's life cycle in-process: /v0/ready reports recovery progress while it runs, and
a shutdown lets a write that is waiting for its fsync get its reply before the process stops
(nothing acknowledged lost, nothing in flight answered with a dropped connection)."""

from __future__ import annotations

import socket
import threading
import time
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import trio

from conftest import JsonClient, free_port, run_in_thread
from tests.storage.harness import running, write
from topicsrv import server as srv
from topicsrv.context import ServerConfig
from topicsrv.storage import recovery
from topicsrv.storage.fsops import OsOps


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
        status, body = JsonClient(port).call("GET", "/v0/ready")
        assert status == 503 and body["error"]["code"] == "not_ready"
        rec = body["error"]["detail"]["recovery"]
        assert rec["phase"] == "replaying"
        assert rec["wal_frames"] >= 40 and rec["records"] >= 30  # 2 records a frame
        assert 0 < rec["wal_percent"] < 100
        assert JsonClient(port).call("GET", "/v0/health")[0] == 200  # alive while recovering
        gate.set()
        for _ in range(200):
            if JsonClient(port).call("GET", "/v0/ready")[0] == 200:
                break
            threading.Event().wait(0.05)
        status, body = JsonClient(port).call("GET", "/v0/ready")
        assert status == 200 and body["ready"] is True
    finally:
        gate.set()
        if "token" in box:
            trio.from_thread.run_sync(box["cancel"].cancel, trio_token=box["token"])
        thread.join(10)


def test_a_graceful_stop_answers_the_writes_waiting_for_their_fsync(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """SHUTDOWN while an HTTP write and a RESP XADD wait for a (held) fsync: no new client is
    accepted, both writes get their acknowledgement, the process then stops, and both records
    are there after a restart."""
    entered, go, hold = threading.Event(), threading.Event(), [False]
    real = OsOps.fdatasync

    def held_fdatasync(self: OsOps, fd: int) -> None:
        if hold[0]:
            entered.set()
            assert go.wait(20)
        real(self, fd)

    monkeypatch.setattr(OsOps, "fdatasync", held_fdatasync)
    cfg = ServerConfig(http_port=0, resp_port=0, data_dir=tmp_path, shutdown_grace_s=30)
    ctx, stop = run_in_thread(cfg)
    http_port, resp_port = ctx.addresses["http"][1], ctx.addresses["resp"][1]
    JsonClient(http_port).ok("PUT", "/v0/topics/jobs", {"durability": "fsync"})
    hold[0] = True
    replies: dict[str, Any] = {}

    def http_write() -> None:
        replies["http"] = JsonClient(http_port, timeout=30).call(
            "POST", "/v0/topics/jobs", {"records": [{"data": "h"}]})

    def resp_write() -> None:
        with socket.create_connection(("127.0.0.1", resp_port), timeout=30) as s:
            s.sendall(b"*5\r\n$4\r\nXADD\r\n$4\r\njobs\r\n$1\r\n*\r\n$1\r\nf\r\n$1\r\nr\r\n")
            replies["resp"] = s.recv(100)

    writers = [threading.Thread(target=f) for f in (http_write, resp_write)]
    for w in writers:
        w.start()
    assert entered.wait(10)
    while ctx.drain.busy < 2:  # both requests are waiting for the fsync
        time.sleep(0.01)
    with socket.create_connection(("127.0.0.1", resp_port), timeout=10) as admin:
        admin.sendall(b"*1\r\n$8\r\nSHUTDOWN\r\n")
        assert admin.recv(100) == b""  # no reply, as Redis
    while not ctx.admission.stopped:
        time.sleep(0.01)
    with pytest.raises(OSError):  # stopped accepting: the listeners are closed
        socket.create_connection(("127.0.0.1", http_port), timeout=2).close()
    go.set()
    for w in writers:
        w.join(30)
    status, body = replies["http"]
    assert status == 200 and body["durability"] == "fsync" and len(body["seqs"]) == 1, body
    assert replies["resp"].startswith(b"$"), replies["resp"]
    stop()
    hold[0] = False
    ctx2, stop2 = run_in_thread(ServerConfig(http_port=0, resp_port=None, data_dir=tmp_path))
    try:
        status, diff = JsonClient(ctx2.addresses["http"][1]).call(
            "POST", "/v0/topics/jobs/diff", {"from_seq": 0})
        assert status == 200 and len(diff["records"]) == 2, diff
    finally:
        stop2()
