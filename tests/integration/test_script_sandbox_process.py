"""Issue 34 items 1-3 against a real server process: the read-only user's script finds no
Python object, cannot plant a string method for a later script, and a helper's value past the
script memory cap is an error while both ports keep answering. Also the secrets files: a
server started with --token-file / --requirepass-file / --read-token-file holds no secret in
its arguments."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
import redis

PW, RT, TOKEN = "s3cret-pw", "read-only-token", "http-token"
RO = "#!lua flags=no-writes\n"


@pytest.fixture
def secured(server_factory, tmp_path: Path):  # type: ignore[no-untyped-def]
    for name, value in (("token", TOKEN), ("pass", PW), ("read", RT)):
        (tmp_path / name).write_text(value + "\n")
    return server_factory("--token-file", str(tmp_path / "token"),
                          "--requirepass-file", str(tmp_path / "pass"),
                          "--read-token-file", str(tmp_path / "read"))


def test_reader_script_escape_and_hang_are_gone(secured) -> None:  # type: ignore[no-untyped-def]
    srv = secured
    reader = redis.Redis(port=srv.resp_port, username="reader", password=RT, socket_timeout=20)
    admin = redis.Redis(port=srv.resp_port, password=PW, socket_timeout=20)
    # item 1: the errors of redis.log / acl_check_cmd are Redis's error tables, not Python
    got = reader.execute_command(
        "EVAL_RO", RO + "local out = {} for _, f in ipairs({"
        "function() return redis.log(0/0, 'x') end, function() return redis.log(1/0, 'x') end,"
        "function() return redis.acl_check_cmd() end,"
        "function() return redis.acl_check_cmd('nosuch') end}) do "
        "local ok, e = pcall(f) out[#out + 1] = type(e) "
        "out[#out + 1] = tostring(pcall(function() return e.__class__.__mro__ end)) end "
        "return out", 0)
    assert b"userdata" not in got and got[0] == b"table"
    # item 2: a reader's change to the shared string metatable is refused
    for code in ("getmetatable('').__index.upper = function() "
                 "return redis.pcall('SET', 'pwned', '1') end",
                 "getmetatable('').__index = {upper = function() "
                 "return redis.pcall('SET', 'pwned', '1') end}"):
        with pytest.raises(redis.ResponseError, match="Attempt to modify a readonly table"):
            reader.execute_command("EVAL_RO", RO + code + " return 1", 0)
    assert admin.eval("return ('x'):upper()", 0) == b"X"
    assert admin.exists("pwned") == 0
    # item 3: the value that hung the server is an error; both ports answer after it
    for code in ("return tostring(pcall(struct.pack, 'c300000000', 'a'))",
                 "return tostring(pcall(cjson.encode, string.rep('\\1', 50000000)))"):
        try:
            assert reader.execute_command("EVAL_RO", RO + code, 0) == b"false"
        except redis.ResponseError as e:
            assert "not enough memory" in str(e)
    assert admin.ping() is True
    req = urllib.request.Request(f"{srv.http_url}/v0/health",
                                 headers={"Authorization": f"Bearer {TOKEN}"})
    with urllib.request.urlopen(req, timeout=10) as r:
        assert r.status == 200
    assert admin.set("after", "1") is True


def test_secrets_files_keep_secrets_out_of_the_arguments(secured) -> None:  # type: ignore[no-untyped-def]
    srv = secured
    cmdline = Path(f"/proc/{srv.proc.pid}/cmdline").read_bytes()
    for secret in (PW, RT, TOKEN):
        assert secret.encode() not in cmdline
    with pytest.raises(redis.AuthenticationError):
        redis.Redis(port=srv.resp_port, password="wrong", socket_timeout=10).ping()
    assert redis.Redis(port=srv.resp_port, password=PW, socket_timeout=10).ping() is True
    req = urllib.request.Request(f"{srv.http_url}/v0/topics",
                                 headers={"Authorization": f"Bearer {TOKEN}"})
    with urllib.request.urlopen(req, timeout=10) as r:
        assert isinstance(json.loads(r.read()), (dict, list))


def test_a_secret_on_the_command_line_is_warned_about_and_both_forms_refused(
        tmp_path: Path) -> None:
    (tmp_path / "pass").write_text("x\n")
    run = subprocess.run([sys.executable, "-m", "topicsrv", "serve", "--data-dir",
                          str(tmp_path / "d"), "--requirepass", "y", "--requirepass-file",
                          str(tmp_path / "pass")], capture_output=True, text=True, timeout=60)
    assert run.returncode == 1
    assert "both --requirepass" in run.stderr and "Traceback" not in run.stderr
    run = subprocess.run([sys.executable, "-m", "topicsrv", "serve", "--data-dir",
                          str(tmp_path / "d"), "--requirepass-file", str(tmp_path / "none")],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 1 and "--requirepass-file" in run.stderr


def test_a_secret_given_as_an_argument_is_warned_about(server_factory) -> None:  # type: ignore[no-untyped-def]
    srv = server_factory("--requirepass", "visible")
    assert "visible to every local user" in srv.log_path.read_text()
