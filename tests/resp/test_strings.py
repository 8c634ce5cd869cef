"""Strings over the RESP front (in-process server, fake clock): expiry seen by GET and by
WATCH/EXEC, the read-only user's ACL (GET yes, SET no), HTTP PUT over a string key (409
key_type_conflict), COMMAND INFO categories, INFO keyspace."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
import redis

from topicsrv.clock import FakeClock

from .conftest import InProc, start_inproc

PW, RT = "s3cret", "read-only-token"


@pytest.fixture(scope="module")
def srv() -> Iterator[tuple[InProc, FakeClock]]:
    clock = FakeClock()
    s, stop = start_inproc(clock=clock, http=True, requirepass=PW, read_token=RT)
    yield s, clock
    stop()


def conn(s: InProc, user: str = "default", password: str = PW) -> redis.Redis:
    return redis.Redis(port=s.port, username=user, password=password, socket_timeout=10)


def test_expiry_on_the_fake_clock(srv: tuple[InProc, FakeClock]) -> None:
    s, clock = srv
    r = conn(s)
    assert r.set("exp:a", "v", px=1000) is True
    assert r.pttl("exp:a") == 1000 and r.get("exp:a") == b"v"
    clock.advance(1000)
    assert r.get("exp:a") is None and r.exists("exp:a") == 0 and r.ttl("exp:a") == -2
    assert r.info("keyspace").get("db0", {}).get("expires", 0) == 0


def test_idletime_counts_from_the_last_write_or_read(srv: tuple[InProc, FakeClock]) -> None:
    s, clock = srv
    r = conn(s)
    r.set("idle:a", "v")
    clock.advance(3000)
    r.ttl("idle:a"), r.type("idle:a"), r.exists("idle:a")  # none of these is an access
    assert r.object("idletime", "idle:a") == 3
    r.get("idle:a")
    assert r.object("idletime", "idle:a") == 0
    clock.advance(2000)
    r.set("idle:a", "w")
    assert r.object("idletime", "idle:a") == 0


def test_a_sets_idletime_survives_every_encoding(srv: tuple[InProc, FakeClock]) -> None:
    """A small set keeps its access stamp in its run's header (setvalue.py Rule 4): reads and
    writes restart it, commands that are not an access leave it, through intset, packed run
    and hashtable."""
    s, clock = srv
    r = conn(s)
    r.sadd("idle:s", 1, 2, 3)
    for more, encoding in ((7, "intset"), ("x", "hashtable"), ("y" * 100, "hashtable")):
        clock.advance(3000)
        r.ttl("idle:s"), r.type("idle:s"), r.exists("idle:s")  # none of these is an access
        assert r.object("idletime", "idle:s") == 3
        r.sismember("idle:s", 1)
        assert r.object("idletime", "idle:s") == 0
        clock.advance(2000)
        assert r.object("idletime", "idle:s") == 2
        r.sadd("idle:s", more)
        assert r.object("idletime", "idle:s") == 0
        assert r.object("encoding", "idle:s") == encoding.encode()


def test_randomkey_draws_every_kind_of_key(srv: tuple[InProc, FakeClock]) -> None:
    """RANDOMKEY (the keyspace's ScanOrder.choice, or a topic): only live keys, each kind."""
    s, _ = srv
    r = conn(s)
    before = set(r.keys())  # the keys the module's other tests left
    assert before or r.randomkey() is None
    r.mset({f"rk:s{i}": "v" for i in range(300)})
    r.sadd("rk:set", 1)
    r.xadd("rk:stream", {"f": "v"})
    r.delete(*[f"rk:s{i}" for i in range(0, 300, 2)])
    live = {k.encode() for k in [f"rk:s{i}" for i in range(1, 300, 2)] + ["rk:set", "rk:stream"]}
    seen = {r.randomkey() for _ in range(3000)}
    assert seen == live | before


def test_watch_sees_a_write_and_an_expiry(srv: tuple[InProc, FakeClock]) -> None:
    s, clock = srv
    r, other = conn(s), conn(s)
    r.set("w:a", "1")
    r.execute_command("WATCH", "w:a")
    other.set("w:a", "2")
    r.execute_command("MULTI")
    r.execute_command("INCR", "w:a")
    assert r.execute_command("EXEC") is None
    r.set("w:b", "1", px=10)
    r.execute_command("WATCH", "w:b")
    clock.advance(10)  # nobody touches it: the expiry alone makes EXEC fail
    r.execute_command("MULTI")
    r.execute_command("SET", "w:c", "x")
    assert r.execute_command("EXEC") is None and r.get("w:c") is None
    r.execute_command("MULTI")
    r.execute_command("SET", "w:c", "x")
    r.execute_command("XADD", "w:s", "*", "f", "v")
    assert r.execute_command("EXEC")[0] == b"OK"
    assert r.type("w:c") == b"string" and r.type("w:s") == b"stream"


def test_reader_can_get_not_set(srv: tuple[InProc, FakeClock]) -> None:
    s, _ = srv
    conn(s).set("acl:k", "v")
    reader = conn(s, "reader", RT)
    assert reader.get("acl:k") == b"v" and reader.mget("acl:k") == [b"v"]
    for cmd in (("SET", "acl:k", "x"), ("INCR", "acl:n"), ("EXPIRE", "acl:k", "5"), ("DEL", "acl:k")):
        with pytest.raises(redis.exceptions.NoPermissionError):
            reader.execute_command(*cmd)
    r = conn(s)
    strings = set(r.execute_command("ACL", "CAT", "string"))
    assert {b"get", b"set", b"incr", b"lcs", b"setrange"} <= strings and b"expire" not in strings
    assert {b"expire", b"ttl", b"rename", b"copy"} <= set(r.execute_command("ACL", "CAT", "keyspace"))
    assert b"get" in set(r.execute_command("ACL", "CAT", "read"))
    assert b"set" in set(r.execute_command("ACL", "CAT", "write"))


def test_http_put_over_a_string_is_409(srv: tuple[InProc, FakeClock]) -> None:
    s, _ = srv
    conn(s).set("h-str", "v")
    req = urllib.request.Request(f"http://127.0.0.1:{s.http_port}/v0/topics/h-str", data=b"{}",
                                 method="PUT", headers={"Content-Type": "application/json",
                                                        "Authorization": f"Bearer {PW}"})
    with pytest.raises(urllib.error.HTTPError) as exc:
        urllib.request.urlopen(req, timeout=10)
    assert exc.value.code == 409
    assert json.loads(exc.value.read())["error"]["code"] == "key_type_conflict"
    assert conn(s).get("h-str") == b"v"
