"""TOPIC.ROUTER SET / DEL / INFO / LIST / HELP over real sockets, on both RESP I/O paths, with
an in-process server (forwarding workers running) whose HTTP front shares the engine, so the
RESP replies can be compared with the HTTP state object."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from topicsrv.clock import FakeClock

from .conftest import RESP_IO, InProc, frame, read_until, start_inproc, wait_for

SYNTAX = "syntax error"


@pytest.fixture(params=RESP_IO)
def srv(request: pytest.FixtureRequest) -> Iterator[InProc]:
    s, stop = start_inproc(clock=FakeClock(), http=True, resp_io=request.param)
    yield s
    stop()


def conn(s: InProc, protocol: int = 3) -> redis.Redis:
    return redis.Redis(port=s.port, protocol=protocol, socket_timeout=10, decode_responses=True)


def flat(reply: Any) -> dict[str, Any]:
    """A RESP2 flat map as a dict (a RESP3 map as it is)."""
    return reply if isinstance(reply, dict) else dict(zip(reply[::2], reply[1::2], strict=True))


def http_get(s: InProc, path: str) -> Any:
    with urllib.request.urlopen(f"http://127.0.0.1:{s.http_port}{path}", timeout=10) as resp:
        return json.loads(resp.read())


def router(r: redis.Redis, *args: Any) -> Any:
    return r.execute_command("TOPIC.ROUTER", *args)


def caught_up(r: redis.Redis, name: str, forwarded: int) -> dict[str, Any]:
    box: dict[str, Any] = {}

    def done() -> bool:
        box["s"] = st = flat(router(r, "INFO", name))
        return st["forwarded"] == forwarded and st["lag"] == 0

    wait_for(done)
    return box["s"]


# ---- SET / INFO / LIST / DEL ---------------------------------------------------------------------


@pytest.mark.parametrize("protocol", [2, 3])
def test_set_info_list_del(srv: InProc, protocol: int) -> None:
    r = conn(srv, protocol)
    got = flat(router(r, "SET", "r1", "src", "dst"))
    assert got["created"] in (True, 1) and (got["name"], got["source"], got["dest"]) == (
        "r1", "src", "dst")
    assert got["guarantee"] == "at_least_once" and got["filter"] is None
    again = flat(router(r, "SET", "r1", "src", "dst", "PRESERVE_TAG", "0"))
    assert again["created"] in (False, 0) and again["preserve_tag"] in (False, 0)
    info = flat(router(r, "INFO", "r1"))
    http = http_get(srv, "/v0/routers/r1")
    http.pop("performance")
    if protocol == 3:  # RESP3: the HTTP object as a map, typed the same
        assert info == http
    else:  # RESP2: booleans as 1/0, the same keys in the same order
        assert list(info) == list(http)
    listed = router(r, "LIST")
    assert [flat(x)["name"] for x in listed] == ["r1"]
    r.xadd("src", {"f": "v"})
    caught_up(r, "r1", 1)
    assert router(r, "DEL", "r1") == 1
    assert router(r, "DEL", "r1") == 0  # as XGROUP DESTROY of a missing group
    assert router(r, "LIST") == []
    with pytest.raises(redis.ResponseError, match=r"^router 'r1' .*\(router_not_found\)$"):
        router(r, "INFO", "r1")
    assert r.xlen("dst") == 1  # copies stay
    r.close()


def test_every_option(srv: InProc) -> None:
    r = conn(srv)
    got = router(r, "SET", "r", "a", "b", "preserve_node", "0", "PRESERVE_TAG", "false",
                 "FILTER", "glob", "user:*", "ALLOW_CYCLE", "1", "MAX_HOPS", "3",
                 "GUARANTEE", "exactly_once", "CREATE_DEST", "yes")
    assert {k: got[k] for k in ("preserve_node", "preserve_tag", "filter", "allow_cycle",
                                "max_hops", "hop_cap", "guarantee", "create_dest")} == {
        "preserve_node": False, "preserve_tag": False, "filter": ["tag", "Glob", "user:*"],
        "allow_cycle": True, "max_hops": 3, "hop_cap": 3, "guarantee": "exactly_once",
        "create_dest": True}
    got = router(r, "SET", "r", "a", "b", "FILTER", "EQ", "x", "MAX_HOPS", "AUTO",
                 "FILTER", "EQ", "y")  # the last value of a repeated option wins
    assert (got["filter"], got["max_hops"], got["hop_cap"]) == (["tag", "Eq", "y"], None, None)
    r.close()


@pytest.mark.parametrize("args, error", [
    (["SET", "r", "a"], "wrong number of arguments for 'topic.router|set' command"),
    (["SET", "r", "a", "b", "COLOUR", "red"], SYNTAX),
    (["SET", "r", "a", "b", "FILTER", "EQ"], SYNTAX),
    (["SET", "r", "a", "b", "PRESERVE_NODE"], SYNTAX),
    (["SET", "r", "a", "b", "FILTER", "REGEX", "x"], "FILTER takes EQ or GLOB"),
    (["SET", "r", "a", "b", "PRESERVE_NODE", "2"], "PRESERVE_NODE must be 1 or 0"),
    (["SET", "r", "a", "b", "MAX_HOPS", "x"], "value is not an integer or out of range"),
    (["SET", "r", "a", "b", "MAX_HOPS", "0"], "max_hops"),
    (["SET", "r", "a", "b", "GUARANTEE", "twice"], "GUARANTEE takes AT_LEAST_ONCE or"),
    (["SET", "r", "a", "-bad"], "invalid_request"),
    (["DEL"], "wrong number of arguments for 'topic.router|del' command"),
    (["INFO", "r", "x"], "wrong number of arguments for 'topic.router|info' command"),
    (["LIST", "x"], "wrong number of arguments for 'topic.router|list' command"),
    (["NOPE"], "unknown subcommand 'NOPE'. Try TOPIC.ROUTER HELP."),
])
def test_bad_arguments_change_nothing(srv: InProc, args: list[str], error: str) -> None:
    r = conn(srv)
    with pytest.raises(redis.ResponseError) as e:
        router(r, *args)
    assert error in str(e.value)
    assert router(r, "LIST") == [] and r.exists("a", "b") == 0
    r.close()


def test_graph_refusals_name_their_code(srv: InProc) -> None:
    r = conn(srv)
    router(r, "SET", "ab", "a", "b")
    with pytest.raises(redis.ResponseError, match=r"cycle b -> a -> b; .*\(router_cycle\)$"):
        router(r, "SET", "ba", "b", "a")
    with pytest.raises(redis.ResponseError,
                       match=r"\(topic_exists_incompatible: router_dest_fan_in\)$"):
        router(r, "SET", "cb", "c", "b")
    with pytest.raises(redis.ResponseError,
                       match=r"\(topic_exists_incompatible: router_endpoints_immutable\)$"):
        router(r, "SET", "ab", "a", "c")
    assert r.exists("c") == 0
    assert [x["name"] for x in router(r, "LIST")] == ["ab"]
    assert router(r, "SET", "ba", "b", "a", "ALLOW_CYCLE", "1")["hop_cap"] == 1
    r.close()


# ---- forwarding as stream entries ------------------------------------------------------------------


def test_entries_forward_as_field_value_pairs(srv: InProc) -> None:
    r = conn(srv)
    router(r, "SET", "plain", "src", "dst")
    router(r, "SET", "once", "src", "dst1", "GUARANTEE", "EXACTLY_ONCE")
    for i in range(3):
        r.xadd("src", {"f": str(i), "g": "x"})
    caught_up(r, "plain", 3)
    st = caught_up(r, "once", 3)
    assert [fields for _, fields in r.xrange("dst")] == [
        {"f": str(i), "g": "x"} for i in range(3)]
    assert [(fields["f"], fields["_topics_router"]) for _, fields in r.xrange("dst1")] == [
        (str(i), f"once/src/{st['source_epoch']}/{i + 1}") for i in range(3)]
    assert [i.split("-")[1] for i, _ in r.xrange("dst")] == ["1", "2", "3"]  # dest seqs
    r.close()


# ---- raw replies, HELP, COMMAND DOCS ------------------------------------------------------------------


def test_raw_resp2_reply_is_a_flat_array(srv: InProc) -> None:
    s = srv.connect()
    s.sendall(frame(b"TOPIC.ROUTER", b"SET", b"raw", b"a", b"b"))
    out = read_until(s, b"$7\r\ncreated\r\n:1\r\n")
    assert out.startswith(b"*44\r\n$4\r\nname\r\n$3\r\nraw\r\n")  # 21 fields + created
    assert b"$10\r\nlast_error\r\n$-1\r\n" in out  # JSON null: RESP2's null bulk
    s.sendall(frame(b"TOPIC.ROUTER", b"INFO", b"raw"))
    out = read_until(s, b"$10\r\nlast_error\r\n$-1\r\n")
    assert out.startswith(b"*42\r\n$4\r\nname\r\n")  # INFO: the 21 state fields
    s.close()


def test_help_and_command_docs(srv: InProc) -> None:
    r = conn(srv)
    lines = router(r, "HELP")
    assert lines[0].startswith("TOPIC.ROUTER <subcommand>") and "LIST" in lines
    docs = r.execute_command("COMMAND DOCS", "topic.router")["topic.router"]
    subs = docs["subcommands"]
    assert set(subs) == {"topic.router|set", "topic.router|del", "topic.router|info",
                         "topic.router|list", "topic.router|help"}
    tokens = [a.get("token") or a["name"] for a in subs["topic.router|set"]["arguments"]]
    assert tokens == ["name", "source", "dest", "PRESERVE_NODE", "PRESERVE_TAG", "FILTER",
                      "ALLOW_CYCLE", "MAX_HOPS", "GUARANTEE", "CREATE_DEST"]
    assert "not available" not in docs["summary"]
    info = r.execute_command("COMMAND INFO", "topic.router|set")[0]
    assert info[1] == -5 and info[3:6] == [3, 4, 1]  # source and dest are the keys
    r.close()


def test_router_set_over_max_memory_is_oom_and_creates_nothing(srv: InProc) -> None:
    """Issue 23 item 9: over --max-memory a new router is refused like TOPIC.CREATE (RESP
    `-OOM`, HTTP 507), after its arguments are checked and before any topic is made; an
    update of an existing router (which creates nothing) still works."""
    r = conn(srv)
    r.execute_command("TOPIC.CREATE", "src")
    r.execute_command("TOPIC.ROUTER", "SET", "kept", "src", "kept-dest")
    srv.ctx.memory.limit = 1  # every write is over it now
    try:
        with pytest.raises(redis.exceptions.OutOfMemoryError) as create_err:
            r.execute_command("TOPIC.CREATE", "newt")
        with pytest.raises(redis.exceptions.OutOfMemoryError) as set_err:
            r.execute_command("TOPIC.ROUTER", "SET", "r", "src", "newdest")
        assert str(set_err.value) == str(create_err.value)
        with pytest.raises(redis.exceptions.OutOfMemoryError):
            r.execute_command("TOPIC.ROUTER", "SET", "r2", "newsrc", "newdest2")
        req = urllib.request.Request(
            f"http://127.0.0.1:{srv.http_port}/v0/routers/r3", method="PUT",
            data=json.dumps({"source": "src", "dest": "newdest3"}).encode(),
            headers={"Content-Type": "application/json"})
        with pytest.raises(urllib.error.HTTPError) as http_err:
            urllib.request.urlopen(req, timeout=10)
        assert http_err.value.code == 507
        assert json.loads(http_err.value.read())["error"]["code"] == "insufficient_memory"
        assert r.exists("newt", "newdest", "newsrc", "newdest2", "newdest3") == 0
        assert [x["name"] for x in r.execute_command("TOPIC.ROUTER", "LIST")] == ["kept"]
        assert flat(r.execute_command("TOPIC.ROUTER", "SET", "kept", "src", "kept-dest",
                                      "PRESERVE_NODE", "0"))["created"] == 0
    finally:
        srv.ctx.memory.limit = 0


def test_a_filter_that_can_never_match_is_refused(srv: InProc) -> None:
    """Issue 23 item 8 over RESP: a 1 MB EQ value (tags are at most 256 bytes) is -ERR naming
    why, nothing is created, and TOPIC.ROUTER LIST stays answerable."""
    r = conn(srv)
    with pytest.raises(redis.ResponseError, match="can never match.*invalid_request"):
        r.execute_command("TOPIC.ROUTER", "SET", "big", "s", "d", "FILTER", "EQ", "x" * (1 << 20))
    with pytest.raises(redis.ResponseError, match="can never match"):
        r.execute_command("TOPIC.ROUTER", "SET", "big", "s", "d", "FILTER", "GLOB", "y" * 300 + "*")
    assert r.exists("s", "d") == 0 and r.execute_command("TOPIC.ROUTER", "LIST") == []
    r.execute_command("TOPIC.ROUTER", "SET", "ok", "s", "d", "FILTER", "EQ", "x" * 256)
    assert [x["filter"] for x in r.execute_command("TOPIC.ROUTER", "LIST")] == [
        ["tag", "Eq", "x" * 256]]
