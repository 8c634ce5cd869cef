"""FUNCTION on a full disk and on a damaged functions.json (issue 40; resp/commands/functions.py
Rules 1 and 3): a change that cannot be stored answers the error and leaves the libraries as
they were, in memory and on disk; a damaged file found at startup makes FCALL and FUNCTION
answer an error naming it, /v0/ready lists it, everything else is served, and FUNCTION FLUSH
brings functions back. A whole in-process server with storage, over real sockets."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import redis

from conftest import run_in_thread
from tests.storage.diskfull import ENOSPC_TEXT, FullDisk
from topicsrv.context import ServerConfig
from topicsrv.storage import functions as stored

LIB_A = "#!lua name=a\nredis.register_function('fa', function() return 'a1' end)"
LIB_A2 = "#!lua name=a\nredis.register_function('fa', function() return 'a2' end)"
LIB_B = "#!lua name=b\nredis.register_function('fb', function() return 'b' end)"
DAMAGED = b'{"libraries": ["#!lua name=a\\nredis.register_fun'
# redis-py drops the ERR prefix
NOT_STORED = f"the function libraries could not be stored in {stored.NAME} ({ENOSPC_TEXT}); nothing was changed"


@contextmanager
def served(data_dir: Path) -> Iterator[tuple[redis.Redis, int]]:
    cfg = ServerConfig(http_port=0, resp_port=0, storage=True, data_dir=data_dir, wal_shards=1)
    ctx, stop = run_in_thread(cfg)
    r = redis.Redis(port=ctx.addresses["resp"][1], socket_timeout=10, decode_responses=True)
    try:
        yield r, ctx.addresses["http"][1]
    finally:
        r.close()
        stop()


def ready(http_port: int) -> Any:
    with urllib.request.urlopen(f"http://127.0.0.1:{http_port}/v0/ready", timeout=5) as resp:
        assert resp.status == 200
        return json.loads(resp.read())


def names(r: redis.Redis) -> list[str]:
    return sorted(dict(zip(lib[::2], lib[1::2], strict=True))["library_name"] for lib in r.function_list())


def test_function_changes_on_a_full_disk_answer_the_error_and_change_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with served(tmp_path) as (r, _):
        assert r.function_load(LIB_A) == "a"
        before = (tmp_path / stored.NAME).read_bytes()
        disk = FullDisk(monkeypatch, f"*/{stored.NAME}*")
        with pytest.raises(redis.ResponseError) as err:
            r.function_load(LIB_B)
        assert str(err.value) == NOT_STORED
        assert disk.short == 1
        assert names(r) == ["a"]
        with pytest.raises(redis.ResponseError, match="Function not found"):
            r.fcall("fb", 0)
        for change in (lambda: r.function_load(LIB_A2, replace=True), lambda: r.function_delete("a"),
                       lambda: r.function_flush()):
            with pytest.raises(redis.ResponseError, match="could not be stored"):
                change()
            assert names(r) == ["a"] and r.fcall("fa", 0) == "a1"  # also after FLUSH's new Lua state
        assert (tmp_path / stored.NAME).read_bytes() == before
        assert r.set("k", "v") and r.get("k") == "v"  # the rest of the server is not involved
        disk.free()
        assert r.function_load(LIB_B) == "b"
        assert r.function_load(LIB_A2, replace=True) == "a"
    with served(tmp_path) as (r, _):
        assert names(r) == ["a", "b"] and r.fcall("fa", 0) == "a2"


def test_a_damaged_functions_file_is_reported_and_function_flush_recovers(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / stored.NAME).write_bytes(DAMAGED)
    with served(tmp_path) as (r, http_port):
        [damage] = ready(http_port)["damaged"]
        assert damage["file"] == stored.NAME and damage["repair"] == "FUNCTION FLUSH"
        assert "not valid JSON" in damage["problem"]
        for call in (lambda: r.fcall("fa", 0), lambda: r.fcall_ro("fa", 0), lambda: r.function_list(),
                     lambda: r.function_load(LIB_B), lambda: r.function_delete("a")):
            with pytest.raises(redis.ResponseError) as err:
                call()
            assert str(err.value).startswith(f"{stored.NAME} in the data dir is damaged (not valid JSON")
            assert str(err.value).endswith("FUNCTION FLUSH replaces it with an empty set")
        assert (tmp_path / stored.NAME).read_bytes() == DAMAGED  # nothing overwrote it
        assert r.eval("return 7", 0) == 7 and r.set("k", "v")  # everything else is served
        disk = FullDisk(monkeypatch, f"*/{stored.NAME}*")
        with pytest.raises(redis.ResponseError, match="could not be stored"):
            r.function_flush()
        assert len(ready(http_port)["damaged"]) == 1
        assert (tmp_path / stored.NAME).read_bytes() == DAMAGED
        disk.free()
        assert r.function_flush()
        assert ready(http_port)["damaged"] == []
        assert (tmp_path / stored.DAMAGED_COPY).read_bytes() == DAMAGED
        assert r.function_list() == []
        assert r.function_load(LIB_B) == "b" and r.fcall("fb", 0) == "b"
    with served(tmp_path) as (r, http_port):
        assert ready(http_port)["damaged"] == []
        assert names(r) == ["b"]
