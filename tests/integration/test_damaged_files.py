"""Real processes (issue 40): a server started on a damaged functions.json names it in one log
line, serves everything else, lists it on /v0/ready and `topicsrv check` reports it; FUNCTION
FLUSH replaces it and functions work again, also after a restart (storage/functions.py Rule 3,
Storage Rule 5)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import redis

from conftest import JsonClient
from topicsrv.storage import functions as stored

LIB_A = "#!lua name=a\nredis.register_function('fa', function() return 'a' end)"
LIB_B = "#!lua name=b\nredis.register_function('fb', function() return 'b' end)"


def _check(data: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "topicsrv", "check", "--data-dir", str(data)],
                          capture_output=True, text=True, timeout=60)


def test_a_damaged_functions_file_is_reported_and_function_flush_recovers(
        server_factory: Any, tmp_path: Path) -> None:
    data = tmp_path / "data"
    srv = server_factory(data_dir=data)
    r = redis.Redis(port=srv.resp_port, socket_timeout=10, decode_responses=True)
    r.function_load(LIB_A)
    r.function_load(LIB_B)
    r.close()
    srv.stop()
    path = data / stored.NAME
    raw = path.read_bytes()
    path.write_bytes(raw[:len(raw) // 2])  # what a short write left before issue 40
    before = _check(data)
    assert before.returncode == 1 and f"DAMAGE: {stored.NAME}: " in before.stdout

    srv = server_factory(data_dir=data)
    http = JsonClient(srv.http_port)
    [damage] = http.ok("GET", "/v0/ready")["damaged"]
    assert damage["file"] == stored.NAME and damage["repair"] == "FUNCTION FLUSH"
    r = redis.Redis(port=srv.resp_port, socket_timeout=10, decode_responses=True)
    with pytest.raises(redis.ResponseError, match=f"^{stored.NAME} in the data dir is damaged"):
        r.fcall("fa", 0)
    with pytest.raises(redis.ResponseError, match=f"^{stored.NAME} in the data dir is damaged"):
        r.function_list()
    assert r.xadd("s", {"f": "v"}) and r.xlen("s") == 1  # everything else is served
    assert r.eval("return 1", 0) == 1
    assert r.function_flush()
    assert http.ok("GET", "/v0/ready")["damaged"] == []
    assert (data / stored.DAMAGED_COPY).read_bytes() == raw[:len(raw) // 2]
    assert r.function_load(LIB_A) == "a" and r.fcall("fa", 0) == "a"
    r.close()
    srv.stop()
    log = srv.log_path.read_text()
    assert len([line for line in log.splitlines() if f"{stored.NAME} is damaged" in line]) == 1
    assert _check(data).returncode == 0

    srv = server_factory(data_dir=data)
    assert JsonClient(srv.http_port).ok("GET", "/v0/ready")["damaged"] == []
    r = redis.Redis(port=srv.resp_port, socket_timeout=10, decode_responses=True)
    assert r.fcall("fa", 0) == "a" and r.xlen("s") == 1
    r.close()
