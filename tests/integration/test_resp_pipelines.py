"""Long pipelines on a real process, both RESP I/O paths: a raw-socket client writes
1,000,000 XADDs and reads nothing until it has written them all, and is served to the end; so
are redis-py's non-transactional pipeline (100,000 and 1,000,000 XADDs in one execute(); the
1M run on the tasks path only with TOPICSRV_STRESS=1) and `redis-benchmark -P 1000 -n 1000000 XADD ...`; a client that never
reads is disconnected once its unread replies pass --client-output-limit (logged, counted),
with the server's memory bounded by that limit, not by what it was asked."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import redis

XADD = b"*5\r\n$4\r\nXADD\r\n$4\r\nbulk\r\n$1\r\n*\r\n$1\r\ni\r\n$1\r\n1\r\n"


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def _info(port: int) -> str:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(b"*2\r\n$4\r\nINFO\r\n$5\r\nstats\r\n")
        buf = b""
        while not buf.endswith(b"\r\n\r\n"):
            buf += s.recv(65536)
    return buf.decode()


@pytest.mark.slow
@pytest.mark.parametrize("io", ["reactor", "tasks"])
def test_a_million_pipelined_xadds_written_before_any_read(server_factory: Any, io: str) -> None:
    srv = server_factory("--resp-io", io, "--no-storage")
    n = 1_000_000
    s = socket.create_connection(("127.0.0.1", srv.resp_port), timeout=60)
    s.sendall(XADD * n + b"*2\r\n$4\r\nXLEN\r\n$4\r\nbulk\r\n")  # ~46 MB, no read meanwhile
    want = b":%d\r\n" % n
    buf = bytearray()
    while not buf.endswith(want):
        chunk = s.recv(1 << 20)
        assert chunk, "the server closed the connection"
        buf += chunk
    assert buf.count(b"\r\n$") + buf.startswith(b"$") == n  # one id per XADD
    s.close()


def _redis_py_bulk_load(port: int, n: int) -> None:
    """redis-py's own non-transactional pipeline: n XADDs sent by one execute() (redis-py
    writes them all before it reads the first reply), then XLEN."""
    r = redis.Redis(port=port, socket_timeout=120)
    with r.pipeline(transaction=False) as p:
        for i in range(n):
            p.xadd("bulk", {"i": i})
        ids = p.execute()
    assert len(ids) == n and all(isinstance(x, bytes) for x in ids)
    assert r.xlen("bulk") == n
    r.close()


@pytest.mark.parametrize("io", ["reactor", "tasks"])
def test_redis_py_pipeline_of_100k_xadds(server_factory: Any, io: str) -> None:
    srv = server_factory("--resp-io", io, "--no-storage")
    _redis_py_bulk_load(srv.resp_port, 100_000)


_STRESS_ONLY = pytest.mark.skipif(
    os.environ.get("TOPICSRV_STRESS") != "1",
    reason="~40 s on 2 cores, mostly redis-py building and parsing 1M commands: make test runs "
    "the default I/O path (reactor) only; TOPICSRV_STRESS=1 runs this one too")


@pytest.mark.slow
@pytest.mark.parametrize("io", ["reactor", pytest.param("tasks", marks=_STRESS_ONLY)])
def test_redis_py_pipeline_of_a_million_xadds(server_factory: Any, io: str) -> None:
    srv = server_factory("--resp-io", io, "--no-storage")
    _redis_py_bulk_load(srv.resp_port, 1_000_000)


@pytest.mark.skipif(shutil.which("redis-benchmark") is None,
                    reason="redis-benchmark is not installed (Debian: apt-get install redis-tools)")
@pytest.mark.parametrize("io", ["reactor", "tasks"])
def test_redis_benchmark_a_million_xadds_pipelined_by_1000(server_factory: Any, io: str) -> None:
    srv = server_factory("--resp-io", io, "--no-storage")
    n = 1_000_000
    out = subprocess.run(
        ["redis-benchmark", "-h", "127.0.0.1", "-p", str(srv.resp_port), "-P", "1000", "-n",
         str(n), "-c", "1", "-q", "XADD", "bench", "*", "f", "v"],
        capture_output=True, text=True, timeout=300, check=True)
    assert "requests per second" in out.stdout, out.stdout + out.stderr
    r = redis.Redis(port=srv.resp_port, socket_timeout=30)
    assert r.xlen("bench") == n
    r.close()


@pytest.mark.parametrize("io", ["reactor", "tasks"])
def test_a_client_that_never_reads_is_disconnected_at_the_limit(server_factory: Any,
                                                                io: str) -> None:
    limit = 4 << 20
    srv = server_factory("--resp-io", io, "--no-storage", "--client-output-limit", str(limit))
    s = socket.create_connection(("127.0.0.1", srv.resp_port), timeout=30)
    record = b"y" * 100_000
    s.sendall(b"*5\r\n$4\r\nXADD\r\n$3\r\nbig\r\n$1\r\n*\r\n$1\r\nf\r\n$%d\r\n%b\r\n"
              % (len(record), record))
    assert s.recv(100).startswith(b"$")
    rss_before = _rss_kib(srv.proc.pid)
    # 20,000 x a 100 KB reply = 2 GB asked for, never read: the server must cut it off
    xrange = b"*4\r\n$6\r\nXRANGE\r\n$3\r\nbig\r\n$1\r\n-\r\n$1\r\n+\r\n"
    closed = False
    try:
        for _ in range(200):
            s.sendall(xrange * 100)
    except TimeoutError:
        pass  # a slow machine: the server has not cut us off yet; read below
    except OSError:
        closed = True  # the server closed while we were still writing
    s.settimeout(30)
    deadline = time.monotonic() + 30
    while not closed and time.monotonic() < deadline:
        try:
            closed = s.recv(1 << 20) == b""  # what the kernel had buffered, then EOF
        except OSError:
            closed = True
    assert closed
    grew_mib = (_rss_kib(srv.proc.pid) - rss_before) / 1024
    assert grew_mib < 64, grew_mib  # the limit (4 MiB) and buffers, never the 2 GB
    deadline = time.monotonic() + 10  # counted before the close; INFO may race a busy loop
    while "client_output_limit_disconnections:1" not in (stats := _info(srv.resp_port)):
        assert time.monotonic() < deadline, stats
        time.sleep(0.05)
    srv.stop()
    log = srv.log_path.read_text()
    assert "closed for overcoming of output buffer limits" in log
