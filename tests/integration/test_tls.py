"""TLS on both fronts (issue 17): HTTPS on the HTTP port and RESP on `--tls-port`, with
certificates generated per run (tests/tlscerts.py), checked with the clients users have:
redis-py `ssl=True`, `redis-cli --tls`, urllib over HTTPS. Client certificates (`--tls-ca`)
are required when configured; plain text, garbage and silence on a TLS port cost only that
connection."""

from __future__ import annotations

import json
import os
import shutil
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from conftest import ROOT, run_in_thread
from tests.tlscerts import Certs, make_certs
from topicsrv import tls
from topicsrv.context import ServerConfig

REDIS_CLI = shutil.which("redis-cli")


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("certs"))


def start(certs: Certs, **config: Any) -> tuple[Any, Any]:
    cfg = ServerConfig(http_port=0, resp_port=0, tls_port=0, tls_cert=certs.server_cert,
                       tls_key=certs.server_key, storage=False, **config)
    return run_in_thread(cfg)


@pytest.fixture(scope="module", params=["reactor", "tasks"])
def srv(certs: Certs, request: pytest.FixtureRequest) -> Iterator[Any]:
    """Plain RESP (on the I/O path of the param), RESP over TLS and HTTPS, one server."""
    ctx, stop = start(certs, resp_io=request.param)
    yield ctx
    stop()


def tls_port(ctx: Any) -> int:
    return int(ctx.addresses["resp-tls"][1])


def https(ctx: Any, path: str, certs: Certs, body: Any = None,
          method: str = "GET") -> tuple[int, Any]:
    context = ssl.create_default_context(cafile=str(certs.ca))
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(f"https://127.0.0.1:{ctx.addresses['http'][1]}{path}",
                                 data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10, context=context) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def tls_redis(ctx: Any, certs: Certs, **kw: Any) -> redis.Redis:
    kw.setdefault("socket_timeout", 10)
    return redis.Redis(port=tls_port(ctx), ssl=True, ssl_ca_certs=str(certs.ca), **kw)


def test_redis_py_over_tls_and_plain_share_one_server(srv: Any, certs: Certs) -> None:
    secure = tls_redis(srv, certs)
    plain = redis.Redis(port=srv.addresses["resp"][1], socket_timeout=10)
    assert secure.ping() is True
    secure.xadd("tls-ev", {"via": "tls"})
    plain.xadd("tls-ev", {"via": "plain"})
    assert [f[b"via"] for _, f in secure.xrange("tls-ev")] == [b"tls", b"plain"]
    blobs = [os.urandom(900 << 10) for _ in range(4)]  # many TLS records each way
    for blob in blobs:
        secure.xadd("tls-big", {"blob": blob})
    assert [f[b"blob"] for _, f in secure.xrange("tls-big")] == blobs
    # one front: the plain client sees the TLS client in CLIENT LIST
    assert f"laddr=127.0.0.1:{tls_port(srv)}" in plain.execute_command("CLIENT", "LIST").decode()


def test_a_pipeline_that_fills_both_directions_does_not_deadlock(srv: Any,
                                                                 certs: Certs) -> None:
    """redis-py writes the whole pipeline before reading: 600 x 32 KiB ECHOs fill the socket
    buffers both ways, so the server must keep reading while its replies wait (tlsio Rule 2)."""
    secure = tls_redis(srv, certs, socket_timeout=30)
    payload = os.urandom(32 << 10)
    pipe = secure.pipeline(transaction=False)
    for _ in range(600):
        pipe.echo(payload)
    t0 = time.monotonic()
    assert pipe.execute() == [payload] * 600
    assert time.monotonic() - t0 < 20


def test_blocking_xread_over_tls_is_woken_by_a_plain_client(srv: Any, certs: Certs) -> None:
    import threading

    secure = tls_redis(srv, certs)
    plain = redis.Redis(port=srv.addresses["resp"][1], socket_timeout=10)
    out: list[Any] = []
    t = threading.Thread(target=lambda: out.append(
        secure.xread({"tls-block": "$"}, block=10_000)))
    t.start()
    time.sleep(0.2)
    plain.xadd("tls-block", {"k": "v"})
    t.join(10)
    assert out and out[0][0][1][0][1] == {b"k": b"v"}


def _messages(ps: Any, n: int) -> list[tuple[Any, bytes, bytes]]:
    out: list[tuple[Any, bytes, bytes]] = []
    deadline = time.monotonic() + 20
    while len(out) < n and time.monotonic() < deadline:
        m = ps.get_message(timeout=1.0)
        if m is not None and m["type"] in ("message", "pmessage"):
            out.append((m["pattern"], m["channel"], m["data"]))
    return out


@pytest.mark.parametrize("protocol", [2, 3])
def test_pubsub_over_tls_and_plain_on_one_bus(srv: Any, certs: Certs, protocol: int) -> None:
    """A TLS subscriber (channel + pattern) gets a plain publisher's messages in order, a plain
    subscriber gets a TLS publisher's, with the same receiver counts; RESP2 and RESP3."""
    ch, pat, pch = f"tls{protocol}-ch", f"tls{protocol}-*", f"plain{protocol}-ch"
    secure = tls_redis(srv, certs, protocol=protocol)
    plain = redis.Redis(port=srv.addresses["resp"][1], socket_timeout=10, protocol=protocol)
    s_sub, p_sub = secure.pubsub(), plain.pubsub()
    s_sub.subscribe(ch)
    s_sub.psubscribe(pat)
    p_sub.subscribe(pch)
    for ps, n in ((s_sub, 2), (p_sub, 1)):  # the subscribe confirmations
        for _ in range(n):
            assert ps.get_message(timeout=5) is not None
    big = b"x" * 100_000  # larger than one TLS record
    assert [plain.publish(ch, b"%d" % i) for i in range(50)] == [2] * 50
    assert plain.publish(ch, big) == 2
    assert [secure.publish(pch, b"%d" % i) for i in range(50)] == [1] * 50
    got = _messages(s_sub, 102)  # 51 as the channel's subscriber, 51 as the pattern's
    assert len(got) == 102
    want_ch = [(None, ch.encode(), b"%d" % i) for i in range(50)] + [(None, ch.encode(), big)]
    assert [m for m in got if m[0] is None] == want_ch
    assert [m[2] for m in got if m[1] == ch.encode() and m[0] == pat.encode()] == \
        [b"%d" % i for i in range(50)] + [big]
    assert [m[2] for m in _messages(p_sub, 50)] == [b"%d" % i for i in range(50)]
    s_sub.close()
    p_sub.close()
    assert plain.publish(ch, b"gone") == 0  # both left the bus


@pytest.mark.skipif(REDIS_CLI is None, reason="redis-cli is not installed (apt-get install "
                    "redis-tools)")
def test_redis_cli_tls(srv: Any, certs: Certs) -> None:
    def cli(*args: str) -> str:
        assert REDIS_CLI is not None
        done = subprocess.run([REDIS_CLI, "-p", str(tls_port(srv)), "--tls", "--cacert",
                               str(certs.ca), *args], capture_output=True, text=True, timeout=20)
        return done.stdout.strip() + done.stderr.strip()

    cli("XADD", "cli-tls", "*", "a", "1")
    assert cli("XLEN", "cli-tls") == "1"
    assert cli("PING") == "PONG"


def test_https_reads_writes_and_refuses_plain_http(srv: Any, certs: Certs) -> None:
    assert https(srv, "/v0/health", certs)[0] == 200
    status, _ = https(srv, "/v0/topics/web", certs, {"records": [{"data": {"n": 1}}]}, "POST")
    assert status == 200
    status, diff = https(srv, "/v0/topics/web/diff", certs, {"from_seq": 0}, "POST")
    assert status == 200 and diff["records"][0]["data"] == {"n": 1}
    # an SSE watch over TLS (a reader task and the frames share the TLS stream)
    import http.client

    conn = http.client.HTTPSConnection("127.0.0.1", srv.addresses["http"][1], timeout=10,
                                       context=ssl.create_default_context(cafile=str(certs.ca)))
    conn.request("GET", "/v0/topics/web/watch?from_seq=0")
    resp = conn.getresponse()
    assert resp.status == 200
    lines = [resp.readline() for _ in range(3)]
    assert any(b'"n":1' in line.replace(b" ", b"") for line in lines), lines
    conn.close()
    # plain HTTP to the HTTPS port: the connection ends, nothing is served
    with socket.create_connection(("127.0.0.1", srv.addresses["http"][1]), timeout=10) as s:
        s.sendall(b"GET /v0/health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        got = read_to_eof(s)
    assert b"HTTP/1.1 200" not in got
    assert https(srv, "/v0/health", certs)[0] == 200


def read_to_eof(s: socket.socket, timeout: float = 10.0) -> bytes:
    s.settimeout(timeout)
    buf = b""
    try:
        while chunk := s.recv(65536):
            buf += chunk
    except ConnectionResetError:
        pass
    return buf


def test_plain_text_and_garbage_on_the_tls_port_are_closed(srv: Any, certs: Certs) -> None:
    for data in (b"PING\r\n", b"*1\r\n$4\r\nPING\r\n", os.urandom(3000), b"\x16\x03\x01\xff\xff"):
        with socket.create_connection(("127.0.0.1", tls_port(srv)), timeout=10) as s:
            s.sendall(data)
            got = read_to_eof(s)  # closed, not left hanging (the recv would time out)
        assert b"PONG" not in got
    assert tls_redis(srv, certs).ping() is True
    assert redis.Redis(port=srv.addresses["resp"][1]).ping() is True


def test_a_silent_client_is_closed_after_the_handshake_timeout(
        srv: Any, certs: Certs, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tls, "HANDSHAKE_TIMEOUT_S", 0.3)
    before = tls.STATS.timed_out
    for port in (tls_port(srv), srv.addresses["http"][1]):
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            t0 = time.monotonic()
            assert read_to_eof(s) == b""
            assert time.monotonic() - t0 < 5
    assert tls.STATS.timed_out == before + 2
    assert tls_redis(srv, certs).ping() is True


@pytest.fixture(scope="module")
def mtls(certs: Certs) -> Iterator[Any]:
    ctx, stop = start(certs, tls_ca=certs.ca, resp_io="tasks")
    yield ctx
    stop()


def test_client_certificates_are_required_with_tls_ca(mtls: Any, certs: Certs) -> None:
    ok = tls_redis(mtls, certs, ssl_certfile=str(certs.client_cert),
                   ssl_keyfile=str(certs.client_key))
    assert ok.ping() is True
    for kw in ({}, {"ssl_certfile": str(certs.stranger_cert),
                    "ssl_keyfile": str(certs.stranger_key)}):
        with pytest.raises(redis.ConnectionError):
            tls_redis(mtls, certs, **kw).ping()
    context = ssl.create_default_context(cafile=str(certs.ca))
    url = f"https://127.0.0.1:{mtls.addresses['http'][1]}/v0/health"
    with pytest.raises((urllib.error.URLError, ssl.SSLError, ConnectionError)):
        urllib.request.urlopen(url, timeout=10, context=context)
    context.load_cert_chain(str(certs.client_cert), str(certs.client_key))
    with urllib.request.urlopen(url, timeout=10, context=context) as r:
        assert r.status == 200
    assert ok.ping() is True


def test_cli_resp_over_tls_only(certs: Certs, tmp_path: Path) -> None:
    """`--resp-port off --tls-port 0`: the startup line names https and resp-tls only."""
    cmd = [sys.executable, "-m", "topicsrv", "serve", "--no-storage", "--bind", "127.0.0.1",
           "--http-port", "0", "--resp-port", "off", "--tls-port", "0",
           "--tls-cert", str(certs.server_cert), "--tls-key", str(certs.server_key)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            cwd=ROOT)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        names = dict(part.split("=", 1) for part in line.split()[1:])
        assert sorted(names) == ["https", "resp-tls"], line
        port = int(names["resp-tls"].rsplit(":", 1)[1])
        r = redis.Redis(port=port, ssl=True, ssl_ca_certs=str(certs.ca), socket_timeout=10)
        assert r.ping() is True
    finally:
        proc.terminate()
        proc.wait(20)


@pytest.mark.parametrize(("args", "says"), [
    (["--tls-cert", "CERT"], "--tls-cert and --tls-key go together"),
    (["--tls-port", "0"], "--tls-port needs --tls-cert and --tls-key"),
    (["--tls-cert", "CERT", "--tls-key", "CERT"], "cannot load --tls-cert"),
    (["--tls-cert", "CERT", "--tls-key", "KEY", "--tls-ca", "/nonexistent/ca.pem"],
     "cannot load --tls-ca /nonexistent/ca.pem"),
])
def test_bad_tls_flags_are_one_clear_line(certs: Certs, args: list[str], says: str,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    from topicsrv.cli import main

    args = [str(certs.server_cert) if a == "CERT" else str(certs.server_key) if a == "KEY"
            else a for a in args]
    assert main(["serve", "--no-storage", "--http-port", "0", "--resp-port", "0", *args]) == 1
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err


def test_protected_mode_refusals_are_readable_over_tls(certs: Certs) -> None:
    """A refused client on a TLS port reads the refusal inside TLS (admission `secure`), not
    plain text its TLS layer would take for garbage."""
    ctx, stop = start(certs, trusted_nets=("127.0.0.1/32",), resp_io="tasks")
    remote = "127.0.0.2"  # a loopback source the server was told to treat as remote
    try:
        context = ssl.create_default_context(cafile=str(certs.ca))
        with socket.create_connection(("127.0.0.1", tls_port(ctx)), timeout=10,
                                      source_address=(remote, 0)) as raw, \
                context.wrap_socket(raw, server_hostname="localhost") as s:
            assert read_to_eof(s).startswith(b"-DENIED Redis is running in protected mode")
        with socket.create_connection(("127.0.0.1", ctx.addresses["http"][1]), timeout=10,
                                      source_address=(remote, 0)) as raw, \
                context.wrap_socket(raw, server_hostname="localhost") as s:
            got = read_to_eof(s)
        assert got.startswith(b"HTTP/1.1 403") and b'"denied"' in got
        assert tls_redis(ctx, certs).ping() is True  # a local client is served
    finally:
        stop()
