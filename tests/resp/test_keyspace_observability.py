"""What operators and clients see of the keyspace (in-process server, fake clock): INFO stats
`expired_keys` and INFO keyspace, CLIENT LIST for string commands, /metrics keyspace families,
the status snapshot's key counts, HTTP reads that never show a topic whose key TTL passed, and
COMMAND COUNT/INFO of the string commands."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from topicsrv.clock import FakeClock

from .conftest import InProc, start_inproc


@pytest.fixture
def srv() -> Iterator[tuple[InProc, FakeClock]]:
    clock = FakeClock()
    s, stop = start_inproc(clock=clock, http=True)
    yield s, clock
    stop()


def _http(s: InProc, path: str) -> tuple[int, Any]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{s.http_port}{path}", timeout=10) as resp:
            raw = resp.read()
            return resp.status, raw.decode() if path == "/metrics" else json.loads(raw)
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def _metric(text: str, line_start: str) -> float:
    (line,) = [ln for ln in text.splitlines() if ln.startswith(line_start + " ")]
    return float(line.split()[-1])


def test_expired_keys_counts_lazy_and_topic_expiries(srv: tuple[InProc, FakeClock]) -> None:
    s, clock = srv
    r = redis.Redis(port=s.port, socket_timeout=10)
    r.set("a", "1", px=100)
    r.set("b", "22", px=300)
    r.set("c", "333")
    r.xadd("s", {"f": "v"})
    r.pexpire("s", 100)
    assert r.info("keyspace")["db0"] == {"keys": 4, "expires": 3, "avg_ttl": 166}
    assert r.info("stats")["expired_keys"] == 0
    clock.advance(100)
    assert r.get("a") is None  # lazy expiry of a string
    assert r.info("stats")["expired_keys"] == 1
    status, body = _http(s, "/v0/topics")
    assert status == 200 and body["topics"] == []  # the list expires the topic first
    assert _http(s, "/v0/topics/s")[0] == 404
    assert r.info("stats")["expired_keys"] == 2
    assert r.info("keyspace")["db0"] == {"keys": 2, "expires": 1, "avg_ttl": 200}
    metrics = _http(s, "/metrics")[1]
    assert _metric(metrics, 'topicsrv_keyspace_keys{kind="string"}') == 2
    assert _metric(metrics, 'topicsrv_keyspace_keys{kind="stream"}') == 0
    assert _metric(metrics, "topicsrv_keyspace_expires") == 1
    assert _metric(metrics, "topicsrv_keyspace_expired_keys_total") == 2
    assert _metric(metrics, "topicsrv_keyspace_evicted_keys_total") == 0
    assert _metric(metrics, "topicsrv_keyspace_string_bytes") == len("b22") + len("c333")
    server = _http(s, "/v0/status")[1]["server"]
    assert (server["keys"], server["strings"], server["topics"], server["expires"]) == (2, 2, 0, 1)
    assert r.info("memory")["used_memory"] == len("b22") + len("c333")


def test_http_reads_hide_a_topic_whose_ttl_passed(srv: tuple[InProc, FakeClock]) -> None:
    s, clock = srv
    r = redis.Redis(port=s.port, socket_timeout=10)
    r.xadd("gone", {"f": "v"})
    r.xadd("kept", {"f": "v"})
    r.pexpire("gone", 50)
    assert [t["topic"] for t in _http(s, "/v0/topics")[1]["topics"]] == ["gone", "kept"]
    assert [t["name"] for t in _http(s, "/v0/status?top=10")[1]["topics"]] == ["gone", "kept"]
    clock.advance(50)
    # the status snapshot changes nothing: the topic is left out, still in the engine
    assert [t["name"] for t in _http(s, "/v0/status?top=11")[1]["topics"]] == ["kept"]  # uncached
    assert "gone" in s.ctx.engine.topics
    assert [t["topic"] for t in _http(s, "/v0/topics")[1]["topics"]] == ["kept"]
    assert "gone" not in s.ctx.engine.topics
    status, body = _http(s, "/v0/topics/gone")
    assert status == 404 and body["error"]["code"] == "topic_not_found"


def test_client_list_shows_string_commands_and_multi(srv: tuple[InProc, FakeClock]) -> None:
    s, _ = srv
    r, watcher = redis.Redis(port=s.port, socket_timeout=10), redis.Redis(port=s.port, socket_timeout=10)
    r.client_setname("writer")
    r.set("k", "v")

    def me() -> dict[str, str]:
        (entry,) = [c for c in watcher.client_list() if c["name"] == "writer"]
        return entry

    assert (me()["cmd"], me()["flags"], me()["multi"]) == ("set", "N", "-1")
    r.incrby("n", 5)
    assert me()["cmd"] == "incrby"
    r.execute_command("MULTI")
    r.execute_command("GETEX", "k", "PX", "1000")
    r.execute_command("MSET", "a", "1", "b", "2")
    assert (me()["cmd"], me()["flags"], me()["multi"]) == ("mset", "x", "2")
    assert r.execute_command("EXEC") == [b"v", b"OK"]
    assert (me()["cmd"], me()["flags"], me()["multi"]) == ("exec", "N", "-1")


def test_command_count_and_key_specs_of_string_commands(srv: tuple[InProc, FakeClock]) -> None:
    s, _ = srv
    conn = redis.Connection(port=s.port, socket_timeout=10)
    conn.send_command("COMMAND", "COUNT")
    count = conn.read_response()
    conn.send_command("COMMAND", "LIST")
    names = {n.decode() for n in conn.read_response()}
    conn.disconnect()
    # COUNT is the top-level commands; LIST names the subcommands too (`object|encoding`)
    assert count == len({n for n in names if "|" not in n})
    assert {"set", "get", "incrbyfloat", "getex", "lcs", "copy", "object|encoding"} <= names
    r = redis.Redis(port=s.port, socket_timeout=10)
    info = r.execute_command("COMMAND", "INFO", "rename", "set", "keys")
    rename, set_, keys = info["rename"], info["set"], info["keys"]
    assert [ks[b"flags"] for ks in rename["key_specifications"]] == [[b"RW", b"access", b"delete"],
                                                                   [b"OW", b"update"]]
    assert [ks[b"begin_search"][b"spec"][b"index"] for ks in rename["key_specifications"]] == [1, 2]
    assert set_["key_specifications"][0][b"notes"] == b"RW and ACCESS due to the optional `GET` argument"
    assert sorted(keys["tips"]) == [b"nondeterministic_output_order", b"request_policy:all_shards"]
    assert "@dangerous" in keys["acl_categories"]
