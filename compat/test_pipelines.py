"""Long pipelines, differential (redis-server vs topicsrv on both --resp-io paths): a client
that writes its whole pipeline before reading a reply is served to the end, as redis-server
serves it (redis-py's `pipeline(transaction=False)`, a MULTI/EXEC of thousands, and
`redis-benchmark -P 1000`). The 1M-command run and the output limit are in
tests/integration/test_resp_pipelines.py."""

from __future__ import annotations

import shutil
import subprocess
from typing import Any

import pytest
import redis
from compat_harness import per_io_path  # type: ignore[import-not-found]

server, ours = per_io_path("topicsrv-pipe-")  # this module runs once per RESP I/O path


def test_redis_py_pipeline_of_100k_xadds(targets: list[Any], key: str) -> None:
    """The issue's case: redis-py sends all 100,000 commands before it reads a reply (this
    hung forever on both I/O paths while the server stopped reading with replies pending)."""
    n = 100_000
    for target in targets:
        r = redis.Redis(port=target.port, socket_timeout=60)
        k = f"{key}:{target.name}"
        p = r.pipeline(transaction=False)
        for i in range(n):
            p.xadd(k, {"i": str(i)})
        ids = p.execute()
        assert len(ids) == n and len(set(ids)) == n, target.name
        assert r.xlen(k) == n
        assert [f[b"i"] for _, f in r.xrange(k, count=2)] == [b"0", b"1"]
        r.delete(k)
        r.close()


def test_a_transaction_of_thousands(targets: list[Any], key: str) -> None:
    n = 20_000
    for target in targets:
        r = redis.Redis(port=target.port, socket_timeout=60)
        k = f"{key}:{target.name}"
        with r.pipeline() as p:  # MULTI, 20,000 x +QUEUED, EXEC
            for i in range(n):
                p.xadd(k, {"i": str(i)})
            assert len(p.execute()) == n, target.name
        assert r.xlen(k) == n
        r.delete(k)
        r.close()


def test_redis_benchmark_pipelined_1000(targets: list[Any], key: str) -> None:
    exe = shutil.which("redis-benchmark")
    if exe is None:
        pytest.skip("redis-benchmark is not installed (scripts/ensure-tools.sh installs it)")
    n = 100_000
    for target in targets:
        k = f"{key}:{target.name}"
        out = subprocess.run([exe, "-p", str(target.port), "-n", str(n), "-c", "2", "-P", "1000",
                              "-q", "XADD", k, "*", "f", "v"],
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, (target.name, out.stderr)
        assert "requests per second" in out.stdout, (target.name, out.stdout, out.stderr)
        r = redis.Redis(port=target.port)
        assert r.xlen(k) == n, target.name
        r.delete(k)
        r.close()
