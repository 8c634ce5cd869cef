"""The server's life cycle in-process: /v0/ready reports recovery progress while it runs, and
a shutdown lets a write that is waiting for its fsync get its reply before the process stops
(nothing acknowledged lost, nothing in flight answered with a dropped connection)."""

from __future__ import annotations

import signal
import socket
import threading
import time
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from conftest import JsonClient, free_port, run_in_thread
from tests.storage.harness import running, write
from topicsrv import server as srv
from topicsrv.context import ServerConfig
from topicsrv.lifecycle import Drain, idle
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
    # stopped accepting: the listeners close on the loop's next turn after `stopped` flips
    # (their accept tasks are cancelled), so a connect at once may still reach the backlog
    deadline = time.monotonic() + 5
    while True:
        try:
            socket.create_connection(("127.0.0.1", http_port), timeout=2).close()
        except OSError:
            break
        assert time.monotonic() < deadline, "the HTTP listener still accepts after SHUTDOWN"
        time.sleep(0.01)
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


# imported by the server process through PYTHONPATH: while the file HOLD exists, an fdatasync
# says so in ENTERED and waits for GO, so a write stays in flight for as long as a test needs
_HELD_FSYNC = '''
import os, time
from topicsrv.storage.fsops import OsOps
_real = OsOps.fdatasync
def _held(self, fd):
    if os.path.exists(os.environ["HOLD"]):
        open(os.environ["ENTERED"], "w").close()
        while not os.path.exists(os.environ["GO"]):
            time.sleep(0.01)
    _real(self, fd)
OsOps.fdatasync = _held
'''


def test_sigterm_after_routers_created_over_http_waits_for_the_request_in_flight(
        tmp_path: Path, server_factory: Any) -> None:
    """Two routers PUT over HTTP (their workers start inside those requests), then an HTTP write
    waits for a held fsync and the process gets SIGTERM: the stop counts that one request
    (never a negative count from the routers' waits), waits for it within the grace, the
    write is acknowledged, and the record is there after a restart."""
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "sitecustomize.py").write_text(_HELD_FSYNC)
    gate = {name: str(tmp_path / name) for name in ("HOLD", "ENTERED", "GO")}
    srv = server_factory("--shutdown-grace", "60", data_dir=tmp_path / "data",
                         env={"PYTHONPATH": str(hooks), **gate})
    api = JsonClient(srv.http_port)
    api.ok("PUT", "/v0/topics/jobs", {"durability": "fsync"})
    for dest in ("a", "b"):
        api.ok("PUT", f"/v0/routers/orders-to-{dest}", {"source": "orders", "dest": f"o.{dest}"})
    api.ok("POST", "/v0/topics/orders", {"records": [{"data": 1}]})  # the routers wake and wait
    Path(gate["HOLD"]).touch()
    replies: dict[str, Any] = {}

    def http_write() -> None:
        try:
            replies["http"] = JsonClient(srv.http_port, timeout=60).call(
                "POST", "/v0/topics/jobs", {"records": [{"data": "h"}]})
        except OSError as exc:  # the request cut by the stop
            replies["http"] = exc

    writer = threading.Thread(target=http_write)
    writer.start()
    while not Path(gate["ENTERED"]).exists():
        time.sleep(0.01)
    assert srv.proc is not None
    srv.proc.send_signal(signal.SIGTERM)
    while True:  # the stop has begun once the listener is closed
        try:
            socket.create_connection(("127.0.0.1", srv.http_port), timeout=2).close()
        except OSError:
            break
        time.sleep(0.01)
    Path(gate["GO"]).touch()
    writer.join(60)
    assert srv.proc.wait(60) == 0
    srv.stop()
    assert isinstance(replies["http"], tuple), replies  # answered, not cut
    status, body = replies["http"]
    assert status == 200 and body["seqs"] == [1], body
    log = srv.log_path.read_text()
    assert "shutdown: stopped accepting; 1 request(s) in flight finished" in log, log
    Path(gate["HOLD"]).unlink()
    again = server_factory(data_dir=tmp_path / "data")
    records, _ = JsonClient(again.http_port).read_all("jobs")
    assert [r["data"] for r in records.values()] == ["h"]


def test_only_the_request_and_its_nested_tasks_leave_it_for_a_wait() -> None:
    """lifecycle Rule 4: a long poll's wait in a nursery nested in the request leaves the count;
    a worker the request spawns into a longer-lived nursery inherits the context but leaves
    nothing, so the count never goes negative."""
    drain = Drain()
    seen: list[int] = []

    async def wait_once(release: trio.Event) -> None:
        with idle():
            seen.append(drain.busy)
            await release.wait()

    async def request(service: trio.Nursery, release: trio.Event) -> None:
        with drain.request():
            service.start_soon(wait_once, release)  # a router worker created by a PUT
            await trio.testing.wait_all_tasks_blocked()
            assert seen == [1] and drain.busy == 1
            async with trio.open_nursery() as nested:  # the long poll's `serve`
                nested.start_soon(wait_once, release)
                await trio.testing.wait_all_tasks_blocked()
                assert seen == [1, 0] and drain.busy == 0
                release.set()
            assert drain.busy == 1
        assert drain.busy == 0

    async def main() -> None:
        release = trio.Event()
        async with trio.open_nursery() as outer:
            service: list[trio.Nursery] = []

            async def run_service(task_status: trio.TaskStatus[None]) -> None:
                async with trio.open_nursery() as nursery:  # a router service's nursery
                    service.append(nursery)
                    task_status.started()
                    await release.wait()

            await outer.start(run_service)
            outer.start_soon(request, service[0], release)  # a connection task

    trio.run(main)
