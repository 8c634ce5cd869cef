"""The memory limit (topicsrv/memory.py): Redis's maxmemory with noeviction, on both fronts."""

from __future__ import annotations

import json
import socket
import time
import urllib.error
import urllib.request
from typing import Any

import pytest
import redis

from topicsrv.errors import TopicsError
from topicsrv.memory import MemoryGuard, auto_limit, available_bytes, parse_size

OOM = "command not allowed when used memory > 'maxmemory'."


def test_sizes_parse_as_redis_writes_them() -> None:
    assert parse_size("100") == 100 and parse_size("64k") == 64_000
    assert parse_size("64kb") == 65_536 and parse_size("2GB") == 2 << 30
    assert parse_size("lots") is None and parse_size("-1") is None and parse_size("") is None


def test_auto_limit_is_a_share_of_what_the_process_may_use() -> None:
    assert 0 < auto_limit() < available_bytes()


def test_guard_refuses_past_the_limit_and_counts_incoming_bytes() -> None:
    used = [1000]
    guard = MemoryGuard(2000, rss=lambda: used[0])
    assert not guard.over() and not guard.over(500)
    assert guard.over(1500)  # this write itself would pass the limit
    used[0] = 2500
    guard._sampled_at = -1.0  # next call samples again (it does every 50 ms)
    with pytest.raises(TopicsError) as exc:
        guard.check()
    assert exc.value.status == 507 and exc.value.code == "insufficient_memory"
    assert exc.value.resp_line() == "OOM " + OOM
    assert guard.refused == 2
    assert not MemoryGuard(0, rss=lambda: 1 << 60).over(1 << 40)  # 0 = no limit


def test_guard_samples_again_after_a_burst_of_admitted_writes() -> None:
    used = [0]
    calls = [0]

    def rss() -> int:
        calls[0] += 1
        return used[0]

    guard = MemoryGuard(10 << 20, rss=rss)
    guard.over()
    first = calls[0]
    for _ in range(3):
        guard.over(512 << 10)  # 1.5 MiB admitted within the sampling interval
    assert calls[0] > first


def _http(url: str, method: str = "GET", body: Any = None) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def test_max_memory_refuses_writes_serves_reads_and_lifts_after_a_delete(server_factory) -> None:
    srv = server_factory("--max-memory", "0")
    r = redis.Redis(port=srv.resp_port)
    r.xadd("small", {"f": "v"})
    rss = int(r.info("memory")["used_memory_rss"])
    assert r.config_set("maxmemory", str(rss + (48 << 20)))
    assert int(r.config_get("maxmemory")["maxmemory"]) == rss + (48 << 20)
    batch = {"records": [{"data": "x" * (900 << 10)} for _ in range(4)]}  # 3.6 MB per write
    for _ in range(45):  # 160 MB at most; the limit stops it long before
        status, body = _http(f"{srv.http_url}/v0/topics/big", "POST", batch)
        if status != 200:
            break
    else:
        pytest.fail("writes were never refused")
    assert status == 507 and body["error"]["code"] == "insufficient_memory"
    # the topic holds ~48 MB now; a limit half-way there keeps every write refused while
    # transient buffers come and go
    assert r.config_set("maxmemory", str(rss + (24 << 20)))
    with pytest.raises(redis.exceptions.ResponseError, match="command not allowed when used memory"):
        r.xadd("small", {"f": "v2"})
    with socket.create_connection(("127.0.0.1", srv.resp_port), timeout=10) as raw:
        raw.sendall(b"TOPIC.CREATE newtopic\r\n")  # Redis's exact wire text, prefix included
        assert raw.recv(1000) == b"-OOM " + OOM.encode() + b"\r\n"
    # reads are served, and nothing half-applied: the refused XADD left no record
    assert r.xlen("small") == 1
    assert _http(f"{srv.http_url}/v0/topics/big/diff", "POST", {"from_seq": 0, "limit": 1})[0] == 200
    # deleting data frees memory, and writes are accepted again
    assert _http(f"{srv.http_url}/v0/topics/big", "DELETE")[0] == 200
    deadline = time.monotonic() + 10
    while True:
        try:
            r.xadd("small", {"f": "v3"})
            break
        except redis.exceptions.ResponseError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    assert r.xlen("small") == 2
    assert int(r.info("memory")["maxmemory"]) == rss + (24 << 20)


def test_max_memory_flag_reaches_both_fronts(server_factory) -> None:
    srv = server_factory("--max-memory", "1mb")  # below any Python process: every write refused
    r = redis.Redis(port=srv.resp_port)
    assert int(r.config_get("maxmemory")["maxmemory"]) == 1 << 20
    with pytest.raises(redis.exceptions.ResponseError, match="^command not allowed"):
        r.xadd("k", {"f": "v"})  # redis-py strips the OOM prefix into its exception class
    status, body = _http(f"{srv.http_url}/v0/topics/k", "POST", {"records": [{"data": 1}]})
    assert status == 507 and body["error"]["message"] == OOM
    assert r.exists("k") == 0 and _http(f"{srv.http_url}/v0/topics/k")[0] == 404
    assert r.ping() and _http(f"{srv.http_url}/v0/topics")[0] == 200


def test_config_set_maxmemory_applies_all_or_nothing(server_factory) -> None:
    r = redis.Redis(port=server_factory("--max-memory", "0").resp_port)
    assert r.config_set("maxmemory", "100mb")
    with pytest.raises(redis.exceptions.ResponseError, match="must be a memory value"):
        r.config_set("maxmemory", "lots")
    with pytest.raises(redis.exceptions.ResponseError, match="can't set immutable config"):
        r.execute_command("CONFIG", "SET", "maxmemory", "1mb", "bind", "0.0.0.0")
    assert r.config_get("maxmemory") == {"maxmemory": str(100 << 20)}


def test_max_memory_counts_strings_refuses_set_and_keeps_get_and_del(server_factory) -> None:
    """String values count toward --max-memory like records: past the limit SET answers
    Redis's -OOM and writes nothing (also queued in MULTI: EXECABORT); GET and DEL work, and
    deleting the strings lifts the refusal."""
    srv = server_factory("--max-memory", "0")
    r = redis.Redis(port=srv.resp_port)
    r.set("first", "v")
    rss = int(r.info("memory")["used_memory_rss"])
    assert r.config_set("maxmemory", str(rss + (32 << 20)))
    value = b"x" * (2 << 20)
    stored = []
    for i in range(64):  # 128 MB at most; the limit stops it long before
        try:
            r.set(f"big{i}", value)
        except redis.exceptions.ResponseError as exc:
            assert str(exc) == OOM
            break
        stored.append(i)
    else:
        pytest.fail("SET was never refused")
    refused = f"big{len(stored)}"
    assert r.exists(refused) == 0
    assert len(stored) >= 8, (len(stored), rss, r.info("memory")["used_memory_rss"])
    assert int(r.info("memory")["used_memory"]) >= len(stored) * len(value)  # strings counted
    # a limit half-way to what the strings hold keeps every write refused while transient
    # buffers come and go (as the records test above)
    assert r.config_set("maxmemory", str(rss + len(stored) * len(value) // 2))
    with socket.create_connection(("127.0.0.1", srv.resp_port), timeout=10) as raw:
        raw.sendall(b"SET other v\r\n")  # Redis's exact wire text, prefix included
        assert raw.recv(1000) == b"-OOM " + OOM.encode() + b"\r\n"
        raw.sendall(b"MULTI\r\nSET other v\r\nEXEC\r\n")
        want = b"+OK\r\n-OOM " + OOM.encode() + b"\r\n-EXECABORT Transaction discarded because of previous errors.\r\n"
        got = b""
        while len(got) < len(want):
            got += raw.recv(1000)
        assert got == want
    assert r.exists("other") == 0
    assert r.get("first") == b"v" and r.get(f"big{stored[-1]}") == value
    assert r.delete(*[f"big{i}" for i in stored]) == len(stored)
    deadline = time.monotonic() + 10
    while True:
        try:
            assert r.set("after", "v") is True
            break
        except redis.exceptions.ResponseError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    assert r.get("after") == b"v"
