"""The RESP front through a real topicsrv process with redis-py (RESP2 and RESP3), raw
sockets, redis-cli and plain urllib for the HTTP side."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import threading
import time
import urllib.request
from typing import Any

import pytest
import redis

from tests.resp.conftest import frame, read_to_eof, read_until


def r_(server: Any, protocol: int = 2, **kw: Any) -> redis.Redis:
    return redis.Redis(port=server.resp_port, protocol=protocol, socket_timeout=10, **kw)


def http(server: Any, method: str, path: str, body: Any = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(server.http_url + path, data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        return json.loads(resp.read())


def seq_of(entry_id: bytes) -> int:
    return int(entry_id.split(b"-")[1])


@pytest.mark.parametrize("protocol", [2, 3])
def test_stream_round_trip_binary_and_repeated_fields(server: Any, protocol: int) -> None:
    r = r_(server, protocol)
    key = f"rt{protocol}"
    i1 = r.xadd(key, {"a": b"\x00\xff\r\n", "b": "2"})
    i2 = r.execute_command("XADD", key, "*", "f", "1", "f", "2")  # repeated field
    assert r.xlen(key) == 2
    assert r.xrange(key)[0] == (i1, {b"a": b"\x00\xff\r\n", b"b": b"2"})
    s = socket.create_connection(("127.0.0.1", server.resp_port), timeout=5)
    s.sendall(frame(b"XRANGE", key.encode(), i2, b"+"))
    assert read_until(s, b"\r\n2\r\n").endswith(
        b"*4\r\n$1\r\nf\r\n$1\r\n1\r\n$1\r\nf\r\n$1\r\n2\r\n")  # repeated fields kept
    assert r.xrevrange(key, count=1)[0][0] == i2
    assert r.xrange(key, min=i2, max="+") == [(i2, {b"f": b"2"})]
    assert r.xrange(key, min="(" + i1.decode(), max="+")[0][0] == i2
    assert seq_of(i2) == seq_of(i1) + 1
    info = r.xinfo_stream(key)
    assert info["length"] == 2 and info["last-generated-id"] == i2
    assert r.type(key) == b"stream"
    assert r.exists(key) == 1


def test_xadd_errors_and_options(server: Any) -> None:
    r = r_(server)
    with pytest.raises(redis.ResponseError, match="must be greater than 0-0"):
        r.execute_command("XADD", "e1", "0-0", "f", "v")
    with pytest.raises(redis.ResponseError, match="wrong number of arguments for 'xadd'"):
        r.execute_command("XADD", "e1", "*", "f")
    with pytest.raises(redis.ResponseError, match="The MAXLEN argument must be >= 0."):
        r.execute_command("XADD", "e1", "MAXLEN", "-1", "*", "f", "v")
    assert r.xadd("e2", {"f": "v"}, nomkstream=True) is None
    assert r.exists("e2") == 0
    r.execute_command("XADD", "e1", "NODE", "n1", "TAG", "t1", "*", "f", "v")
    got = http(server, "POST", "/v0/topics/e1/diff", {"from_seq": 0})
    assert got["records"][0]["$node"] == "n1" and got["records"][0]["$tag"] == "t1"
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        r.sadd("e1", "m")  # a topic is a stream: not a set (issue 36)


def test_trim_tombstone_reaches_redis_py_but_xdel_is_silent(server: Any) -> None:
    r = r_(server)
    ids = [r.xadd("tomb", {"i": str(i)}) for i in range(10)]
    lagging = ids[1]  # the reader has consumed seqs 1 and 2
    r.xdel("tomb", ids[2], ids[3])  # a permanent delete right after the cursor: silent
    got = r.xread({"tomb": lagging}, count=2)
    entries = got[0][1]
    assert [e[1][b"i"] for e in entries] == [b"4", b"5"]
    r.xadd("tomb", {"i": "10"}, maxlen=3)  # a capacity trim past the reader: not silent
    got = r.xread({"tomb": entries[-1][0]})
    first_id, first = got[0][1][0]
    assert first[b"$type"] == b"tombstone" and first[b"reason"] == b"cap"
    assert int(first[b"gap_from"]) == seq_of(entries[-1][0]) + 1
    assert seq_of(first_id) == int(first[b"gap_to"]) == int(first[b"earliest_seq"]) - 1
    rest = got[0][1][1:]
    assert [e[1][b"i"] for e in rest] == [b"8", b"9", b"10"]
    assert seq_of(rest[0][0]) > seq_of(first_id)
    # resuming from the tombstone's id is exact: nothing again, no second tombstone
    again = r.xread({"tomb": first_id})
    assert [e[1][b"i"] for e in again[0][1]] == [b"8", b"9", b"10"]
    assert r.xtrim("tomb", maxlen=1) == 2
    got = r.xread({"tomb": rest[0][0]})
    assert got[0][1][0][1][b"$type"] == b"tombstone"


@pytest.mark.parametrize("protocol", [2, 3])
def test_xadd_read_over_http_and_http_read_over_resp(server: Any, protocol: int) -> None:
    r = r_(server, protocol)
    key = f"x{protocol}"
    eid = r.xadd(key, {"name": "ann", "n": "1"})
    got = http(server, "POST", f"/v0/topics/{key}/diff", {"from_seq": 0})
    rec = got["records"][0]
    assert rec["$seq"] == seq_of(eid) and rec["data"] == {"name": "ann", "n": "1"}
    assert str(rec["$ts"]) == eid.split(b"-")[0].decode()
    w = http(server, "POST", f"/v0/topics/{key}",
             {"records": [{"data": {"k": "v"}, "tag": "t"}, {"data": [1, 2], "meta": {"m": "x"}}]})
    seqs = w["seqs"]
    entries = r.xrange(key, min=f"0-{seqs[0]}", max="+")
    assert [seq_of(e[0]) for e in entries] == seqs
    assert entries[0][1] == {b"k": b"v", b"$tag": b"t"}
    assert entries[1][1] == {b"data": b"[1,2]", b"$meta": b'{"m":"x"}'}


def test_xread_block_woken_by_http_write_and_by_xadd(server: Any) -> None:
    r = r_(server)
    r.xadd("blk", {"a": "0"})
    result: dict[str, Any] = {}

    def reader() -> None:
        result["got"] = r_(server).xread({"blk": "$"}, block=0)

    th = threading.Thread(target=reader)
    th.start()
    # the reader is parked before the write (BLOCK 0 would otherwise return nothing new)
    assert eventually(lambda: r.info("clients")["blocked_clients"] == 1)
    assert th.is_alive()
    http(server, "POST", "/v0/topics/blk", {"records": [{"data": {"via": "http"}}]})
    th.join(10)
    assert result["got"][0][1][0][1] == {b"via": b"http"}
    th = threading.Thread(target=reader)
    th.start()
    assert eventually(lambda: r.info("clients")["blocked_clients"] == 1)
    r.xadd("blk", {"via": "resp"})
    th.join(10)
    assert result["got"][0][1][0][1] == {b"via": b"resp"}
    t = time.monotonic()
    assert r.xread({"blk": "$", "nokey": "$"}, block=200) == []
    assert 0.15 < time.monotonic() - t < 5


def test_client_kill_ends_a_blocked_read(server: Any) -> None:
    r = r_(server)
    blocked = socket.create_connection(("127.0.0.1", server.resp_port), timeout=10)
    blocked.sendall(frame(b"CLIENT", b"SETNAME", b"blocker"))
    assert read_until(blocked, b"\r\n") == b"+OK\r\n"
    blocked.sendall(frame(b"XREAD", b"BLOCK", b"0", b"STREAMS", b"killme", b"$"))
    assert eventually(lambda: any(c["name"] == "blocker" and "b" in c["flags"] for c in r.client_list()))
    line = next(c for c in r.client_list() if c["name"] == "blocker")
    assert "b" in line["flags"] and line["cmd"] == "xread"
    cid = int(line["id"])
    assert r.client_kill_filter(_id=cid) == 1
    read_to_eof(blocked)  # closed promptly, the wait cancelled
    assert eventually(lambda: r.info("clients")["blocked_clients"] == 0)
    # a disconnect while blocked cleans up too
    gone = socket.create_connection(("127.0.0.1", server.resp_port), timeout=10)
    gone.sendall(frame(b"XREAD", b"BLOCK", b"0", b"STREAMS", b"killme", b"$"))
    assert eventually(lambda: r.info("clients")["blocked_clients"] == 1)
    gone.close()
    assert eventually(lambda: r.info("clients")["blocked_clients"] == 0)


def eventually(check: Any, timeout: float = 10.0) -> bool:
    """Poll `check` until true (a loaded machine delays the server's cleanup, not its outcome)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.02)
    return bool(check())


def test_connection_and_server_commands(server: Any) -> None:
    r = r_(server)
    r.xadd("srv", {"f": "v"})
    assert r.ping() is True
    assert r.echo("hi") == b"hi"
    assert r.execute_command("SELECT", "0") in (True, b"OK")
    with pytest.raises(redis.ResponseError, match="DB index is out of range"):
        r.execute_command("SELECT", "1")
    r.client_setname("me")
    assert r.client_getname() == "me"
    assert r.client_info()["name"] == "me"
    assert isinstance(r.client_id(), int)
    assert r.execute_command("CLIENT", "SETINFO", "LIB-NAME", "x") == b"OK"
    info = r.info()
    assert {"redis_version", "connected_clients", "used_memory", "total_commands_processed"} <= set(info)
    assert "db0" in r.info("keyspace")
    assert r.config_get("save") == {"save": ""}
    assert r.config_get("nosuchthing") == {}
    s = socket.create_connection(("127.0.0.1", server.resp_port), timeout=5)
    s.sendall(frame(b"COMMAND", b"DOCS", b"xadd"))
    docs = read_until(s, b"NOMKSTREAM")
    assert docs.startswith(b"*2\r\n$4\r\nxadd\r\n") and b"$9\r\narguments\r\n" in docs
    assert len(r.command()) > 40
    secs, micros = r.time()
    assert abs(secs - time.time()) < 60
    with pytest.raises(redis.ResponseError, match=r"^unknown command 'FOO', with args beginning with: 'a' $"):
        r.execute_command("FOO", "a")
    with pytest.raises(redis.ResponseError, match="unknown subcommand 'NOPE'. Try CLIENT HELP."):
        r.execute_command("CLIENT", "NOPE")


def test_keys_scan_del_flush(server: Any) -> None:
    r = r_(server)
    for i in range(25):
        r.xadd(f"scan:{i:02d}", {"f": "v"})
    found = set(r.scan_iter(match="scan:*", count=7))
    assert found == {f"scan:{i:02d}".encode() for i in range(25)}
    assert set(r.keys("scan:0?")) == {f"scan:0{i}".encode() for i in range(10)}
    assert list(r.scan_iter(match="scan:*", _type="string")) == []
    assert r.delete("scan:00", "scan:01", "nope") == 2
    assert r.unlink("scan:02") == 1
    assert r.dbsize() == len(list(r.scan_iter()))


def test_topic_extensions(server: Any) -> None:
    r3 = r_(server, 3)
    created = r3.execute_command("TOPIC.CREATE", "ext", "CAP_RECORDS", "2", "TTL_MS", "0")
    assert created[b"created"] is True and created[b"config"][b"cap_records"] == 2
    for i in range(4):
        r3.xadd("ext", {"i": str(i)})
    info = r3.execute_command("TOPIC.INFO", "ext")
    assert info[b"count"] == 2 and info[b"evict_floor"] == 3
    diff = r3.execute_command("TOPIC.DIFF", "ext", "1", "LIMIT", "10")
    assert diff[b"tombstone"][b"reason"] == b"cap" and diff[b"next_from_seq"] == 4
    deleted = r3.execute_command("TOPIC.DELETE", "ext", "BEFORE", "4")
    assert deleted[b"deleted"] == 1
    r2 = r_(server, 2)
    flat = r2.execute_command("TOPIC.INFO", "ext")
    assert flat[0] == b"topic" and flat[1] == b"ext"
    assert r2.execute_command("TOPIC.ROUTER", "LIST") == []  # routers: tests/resp/test_routers.py
    with pytest.raises(redis.ResponseError, match=r"^WRONGTYPE .*\(not_a_queue: 'ext' is a log topic"):
        r2.execute_command("TOPIC.CLAIM", "ext", "n1")
    with pytest.raises(redis.ResponseError, match="unknown config field"):
        r2.execute_command("TOPIC.CREATE", "ext", "BOGUS", "1")


def test_raw_inline_and_protocol_error(server: Any) -> None:
    s = socket.create_connection(("127.0.0.1", server.resp_port), timeout=5)
    s.sendall(b"PING\r\nxadd inl * f v\r\n")
    out = read_until(s, b"-1\r\n")
    assert out.startswith(b"+PONG\r\n$")
    s.sendall(frame(b"PING") + b"*1\r\n$-3\r\n")
    assert read_to_eof(s) == b"+PONG\r\n-ERR Protocol error: invalid bulk length\r\n"


def test_requirepass(server_factory: Any) -> None:
    srv = server_factory("--requirepass", "s3cret", "--no-storage")
    with pytest.raises(redis.AuthenticationError):
        redis.Redis(port=srv.resp_port, password="wrong").ping()
    ok = redis.Redis(port=srv.resp_port, password="s3cret", protocol=3)
    assert ok.ping() is True
    s = socket.create_connection(("127.0.0.1", srv.resp_port), timeout=5)
    s.sendall(b"PING\r\n")
    assert read_until(s, b"\r\n") == b"-NOAUTH Authentication required.\r\n"
    s.sendall(frame(b"AUTH", b"nope"))
    assert read_until(s, b"\r\n") == (
        b"-WRONGPASS invalid username-password pair or user is disabled.\r\n")
    s.sendall(frame(b"AUTH", b"s3cret") + frame(b"XLEN", b"a"))
    assert read_until(s, b":0\r\n") == b"+OK\r\n:0\r\n"


@pytest.mark.skipif(shutil.which("redis-cli") is None, reason="redis-cli is not installed")
def test_redis_cli_scripted(server: Any) -> None:
    def cli(*args: str) -> str:
        return subprocess.run(["redis-cli", "-p", str(server.resp_port), *args],
                              capture_output=True, text=True, timeout=20, check=True).stdout

    eid = cli("XADD", "cli", "*", "a", "1").strip()
    assert seq_of(eid.encode()) >= 1
    assert cli("--raw", "XRANGE", "cli", "-", "+").split() == [eid, "a", "1"]
    assert "a" in cli("-3", "XREAD", "STREAMS", "cli", "0")
    assert cli("XLEN", "cli").strip() == "1"


@pytest.mark.skipif(shutil.which("redis-benchmark") is None, reason="redis-benchmark missing")
def test_redis_benchmark_runs(server: Any) -> None:
    out = subprocess.run(["redis-benchmark", "-p", str(server.resp_port), "-n", "2000", "-q",
                          "-t", "ping"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "PING" in out.stdout
    out = subprocess.run(["redis-benchmark", "-p", str(server.resp_port), "-n", "2000", "-q",
                          "XADD", "bench", "*", "f", "v"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "XADD" in out.stdout
    assert r_(server).xlen("bench") == 2000


def test_fuzz_against_the_real_process(server: Any) -> None:
    from hypothesis import HealthCheck, given, settings

    from tests.resp.test_fuzz import WORDS, _check_over_socket, _chunks

    witness = socket.create_connection(("127.0.0.1", server.resp_port), timeout=5)

    @settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
    @given(_chunks(WORDS))
    def run(chunks: list[bytes]) -> None:
        _check_over_socket(server.resp_port, chunks, witness)

    run()
    assert r_(server).ping() is True
    assert server.proc is not None and server.proc.poll() is None
