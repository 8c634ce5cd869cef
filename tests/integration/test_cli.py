"""The command line a user runs: help text, flag validation, and limits that reach the server."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from topicsrv.cli import _size, build_parser


def test_serve_help_explains_every_flag() -> None:
    out = subprocess.run([sys.executable, "-m", "topicsrv", "serve", "--help"],
                         capture_output=True, text=True, check=True).stdout
    for flag in ["--data-dir", "--bind", "--http-port", "--resp-port", "--token", "--requirepass",
                 "--proto-max-bulk-len", "--client-output-limit", "--wal-shards", "--cold-dir"]:
        assert flag in out


@pytest.mark.parametrize("text,value", [("1048576", 1 << 20), ("512mb", 512 << 20), ("64kb", 65536),
                                        ("1k", 1000), ("2GB", 2 << 30)])
def test_sizes_read_like_redis(text: str, value: int) -> None:
    assert _size(text) == value


def test_bad_flags_are_refused_with_a_message() -> None:
    run = subprocess.run([sys.executable, "-m", "topicsrv", "serve", "--proto-max-bulk-len", "lots"],
                         capture_output=True, text=True)
    assert run.returncode == 2 and "is not a size" in run.stderr
    run = subprocess.run([sys.executable, "-m", "topicsrv", "serve", "--http-port", "70000"],
                         capture_output=True, text=True)
    assert run.returncode == 2 and "port" in run.stderr
    assert build_parser().parse_args(["serve"]).proto_max_bulk_len == 512 << 20


def test_proto_max_bulk_len_reaches_the_resp_front(server_factory) -> None:
    srv = server_factory("--proto-max-bulk-len", "1kb")
    with socket.create_connection(("127.0.0.1", srv.resp_port), timeout=10) as s:
        s.sendall(b"*3\r\n$4\r\nECHO\r\n$2000\r\n")
        reply = s.recv(4096)
    assert reply.startswith(b"-ERR Protocol error: invalid bulk length")
    with socket.create_connection(("127.0.0.1", srv.resp_port), timeout=10) as s:
        s.sendall(b"*2\r\n$4\r\nECHO\r\n$3\r\nabc\r\n")
        assert s.recv(100) == b"$3\r\nabc\r\n"


@pytest.mark.parametrize("flag", ["--http-port", "--resp-port"])
def test_a_port_in_use_is_one_line_naming_the_port_and_the_flag(tmp_path, flag: str) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        ports = {"--http-port": "0", "--resp-port": "0", flag: str(port)}
        run = subprocess.run([sys.executable, "-m", "topicsrv", "serve", "--no-storage",
                              "--bind", "127.0.0.1", *[x for kv in ports.items() for x in kv]],
                             capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert run.returncode == 1 and run.stdout == ""
    lines = [line for line in run.stderr.splitlines() if " WARNING " not in line]
    assert lines == [f"topicsrv: {flag} {port}: 127.0.0.1:{port} is already in use "
                     "(another server?); pick a free port"], run.stderr


def test_listening_is_said_once(server_factory) -> None:
    srv = server_factory()
    srv.stop()
    assert "listening" not in srv.log_path.read_text()  # stdout had it (the fixture read it)
