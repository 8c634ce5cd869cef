"""Fixtures shared by tests/ and compat/: real server processes on free loopback ports.

Rule 1: a server under test is a real `python -m topicsrv serve` process (or a real
redis-server), started on ports it picked itself (port 0) and stopped by its own pid.
Rule 2: a fixture that needs a tool the machine lacks skips and says which tool and why.
"""

from __future__ import annotations

import http.client
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from redis import backoff as redis_backoff
from redis.retry import Retry

ROOT = Path(__file__).resolve().parent

# Property tests assert behaviour, never speed (STYLE.md: no latency in tests): hypothesis's
# per-example deadline and its "too slow" health check are timings that a busy 2-core CI
# machine can trip, so they are off for every property test (their example counts stay).
settings.register_profile("topicsrv", deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("topicsrv")

# redis-py's retry backoff draws its jitter from the global `random`. The crash tests' client
# threads retry for a while after a kill -9; when one is still backing off while a property
# test of the same worker draws its examples, Hypothesis sees the global state move and warns
# "Do not use the random module inside strategies". The backoff gets a generator of its own,
# which changes no retry, delay or reply.
redis_backoff.random = random.Random()  # type: ignore[assignment]
# for the client of a thread that a kill -9 or a stop cuts off: no retry, so the thread ends
# at once and no command is sent twice to a server that went
NO_RETRY = Retry(redis_backoff.NoBackoff(), 0)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])



def run_in_thread(config: Any, clock: Any = None) -> tuple[Any, Any]:
    """A whole server (`topicsrv.server.run`: both fronts and the background services) with
    trio in a daemon thread, for in-process tests: (its ServerContext, a stop function)."""
    import threading
    from functools import partial

    import trio

    from topicsrv import server as srv

    box: dict[str, Any] = {}
    ready = threading.Event()

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            box["cancel"] = nursery.cancel_scope
            box["token"] = trio.lowlevel.current_trio_token()
            box["ctx"] = await nursery.start(partial(srv.run, config, clock=clock,
                                                     handle_signals=False))
            ready.set()

    thread = threading.Thread(target=trio.run, args=(main,), daemon=True)
    thread.start()
    assert ready.wait(15), "the in-process server did not start"

    def stop() -> None:
        trio.from_thread.run_sync(box["cancel"].cancel, trio_token=box["token"])
        thread.join(10)

    return box["ctx"], stop


def kill_under_load(srv: Any, loop: Callable[[int, int, threading.Event, list[int]], None],
                    clients: int, at_least: int) -> list[list[int]]:
    """Run `loop(port, client, stop, acked)` in `clients` threads until each acknowledged
    `at_least` operations, SIGKILL the server while they run, and return what each had
    acknowledged (a loop returns on a connection error)."""
    stop = threading.Event()
    acked: list[list[int]] = [[] for _ in range(clients)]
    threads = [threading.Thread(target=loop, args=(srv.resp_port, c, stop, acked[c]))
               for c in range(clients)]
    for t in threads:
        t.start()
    while min(len(a) for a in acked) < at_least:
        time.sleep(0.01)
    srv.kill()
    stop.set()
    for t in threads:
        t.join()
    return acked


class JsonClient:
    """A minimal HTTP/JSON client over one keep-alive connection (real-process tests)."""

    def __init__(self, port: int, timeout: float = 10) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        data = json.dumps(body).encode() if body is not None else None
        self.conn.request(method, path, body=data, headers={"Content-Type": "application/json"})
        resp = self.conn.getresponse()
        raw = resp.read()
        return resp.status, json.loads(raw) if raw else None

    def ok(self, method: str, path: str, body: Any = None) -> Any:
        status, out = self.call(method, path, body)
        assert status in (200, 201), (status, out)
        return out

    def read_all(self, topic: str) -> tuple[dict[int, dict[str, Any]], set[int]]:
        """Every record of `topic` a reader from seq 0 gets (seq -> the record as the diff
        returns it), and the seqs inside the `lost` tombstones it is given on the way."""
        out: dict[int, dict[str, Any]] = {}
        lost: set[int] = set()
        cursor = 0
        while True:
            body = self.ok("POST", f"/v0/topics/{topic}/diff", {"from_seq": cursor, "limit": 10000})
            for rec in body["records"]:
                out[rec["$seq"]] = rec
            tomb = body["tombstone"]
            if tomb is not None and tomb["reason"] == "lost":
                lost.update(range(tomb["gap_from"], tomb["gap_to"] + 1))
            if body["caught_up"] or (body["next_from_seq"] == cursor and not body["records"]):
                return out, lost
            cursor = body["next_from_seq"]


class ServerProcess:
    """A topicsrv process; `http_url`, `http_port`, `resp_port` once started."""

    def __init__(self, data_dir: Path, *extra: str, env: dict[str, str] | None = None) -> None:
        self.data_dir = Path(data_dir)
        self.extra = list(extra)
        self.env = env
        self.proc: subprocess.Popen[str] | None = None
        self.http_port = 0
        self.resp_port = 0
        self.log_path = self.data_dir.parent / f"{self.data_dir.name}.log"

    @property
    def http_url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    def start(self, timeout: float = 30.0, ready: bool = True) -> ServerProcess:
        """Start and wait for the `listening` line, then (by default) for /v0/ready."""
        self._spawn(timeout)
        if ready and self.http_port:
            self.wait_ready(timeout=max(timeout, 60.0))
        return self

    def _spawn(self, timeout: float) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "topicsrv", "serve", "--data-dir", str(self.data_dir),
               "--bind", "127.0.0.1", "--http-port", "0", "--resp-port", "0", *self.extra]
        env = {**os.environ, **(self.env or {})}
        log = open(self.log_path, "a")  # noqa: SIM115 - closed with the process
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log, text=True,
                                     cwd=ROOT, env=env)
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"server exited: {self.log_path.read_text()[-3000:]}")
                continue
            if line.startswith("listening"):
                for part in line.split()[1:]:
                    name, _, addr = part.partition("=")
                    port = int(addr.rsplit(":", 1)[1])
                    if name == "http":
                        self.http_port = port
                    elif name == "resp":
                        self.resp_port = port
                return
        raise RuntimeError("server did not report its ports in time")

    def wait_ready(self, timeout: float = 60.0) -> None:
        import urllib.request

        headers = {}
        for i, arg in enumerate(self.extra):
            if arg == "--token" and i + 1 < len(self.extra):
                headers["Authorization"] = f"Bearer {self.extra[i + 1]}"
            if arg == "--token-file" and i + 1 < len(self.extra):
                token = Path(self.extra[i + 1]).read_text().splitlines()[0]
                headers["Authorization"] = f"Bearer {token}"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"server exited: {self.log_path.read_text()[-3000:]}")
            try:
                req = urllib.request.Request(self.http_url + "/v0/ready", headers=headers)
                with urllib.request.urlopen(req, timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.05)
        raise RuntimeError("server never became ready")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30.0) -> int | None:
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        code = self.proc.returncode
        if self.proc.stdout:
            self.proc.stdout.close()
        self.proc = None
        return code

    def kill(self) -> None:
        self.stop(signal.SIGKILL)


def serve_io_path(resp_io: str, prefix: str) -> Iterator[ServerProcess]:
    """A topicsrv on a temporary data dir with `--resp-io resp_io`, stopped and removed after
    (for modules that run their tests once per RESP I/O path)."""
    tmp = Path(tempfile.mkdtemp(prefix=prefix))
    srv = ServerProcess(tmp / "data", "--resp-io", resp_io).start()
    try:
        yield srv
    finally:
        srv.stop()
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture
def server_factory(tmp_path: Path) -> Iterator[object]:
    """Start topicsrv processes: `server_factory(*extra_args, data_dir=None)`."""
    started: list[ServerProcess] = []

    def make(*extra: str, data_dir: Path | None = None, env: dict[str, str] | None = None,
             ready: bool = True) -> ServerProcess:
        srv = ServerProcess(data_dir or tmp_path / f"data{len(started)}", *extra, env=env)
        started.append(srv)
        return srv.start(ready=ready)

    yield make
    for srv in started:
        srv.stop()


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    """One topicsrv process shared by a test module (use unique topic names per test)."""
    tmp = Path(tempfile.mkdtemp(prefix="topicsrv-test-"))
    srv = ServerProcess(tmp / "data").start()
    try:
        yield srv
    finally:
        srv.stop()
        shutil.rmtree(tmp, ignore_errors=True)


class RedisProcess:
    def __init__(self, port: int, proc: subprocess.Popen[bytes], workdir: Path) -> None:
        self.port = port
        self.proc = proc
        self.workdir = workdir


def start_redis(*extra: str) -> RedisProcess:
    """A redis-server on a free loopback port, persistence off; `extra`: more options
    (`"--replicaof", "127.0.0.1", "6379"`)."""
    exe = shutil.which("redis-server")
    if exe is None:
        pytest.skip("redis-server is not installed and scripts/ensure-tools.sh could not install it "
                    "(needs root and apt-get); differential tests need a real redis-server")
    port = free_port()
    workdir = Path(tempfile.mkdtemp(prefix="redis-ref-"))
    proc = subprocess.Popen(
        [exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
         "--dir", str(workdir), "--protected-mode", "yes", *extra],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return RedisProcess(port, proc, workdir)
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError("redis-server did not start")


@pytest.fixture(scope="module")
def redis_server() -> Iterator[RedisProcess]:
    """A real redis-server (persistence off) for differential tests."""
    ref = start_redis()
    try:
        yield ref
    finally:
        ref.proc.terminate()
        ref.proc.wait(10)
        shutil.rmtree(ref.workdir, ignore_errors=True)
