"""TOPIC.APPEND (resp/commands/topic_append.py): many records as one atomic write, one IDMP key
for the batch."""

from __future__ import annotations

from typing import Any

import pytest
import redis

from topicsrv.clock import FakeClock

from .conftest import InProc


def _conn(s: InProc, protocol: int = 2) -> redis.Redis:
    return redis.Redis(port=s.port, socket_timeout=10, protocol=protocol)


def _map(reply: Any) -> dict[bytes, Any]:
    return reply if isinstance(reply, dict) else dict(zip(reply[0::2], reply[1::2], strict=True))


def test_entries_are_one_write(srv: tuple[InProc, FakeClock]) -> None:
    s, _ = srv
    c = _conn(s)
    out = _map(c.execute_command("TOPIC.APPEND", "ta", "ENTRIES", 3, 1, "f", "v",
                                 "NODE", "n1", "TAG", "t1", 2, "a", "1", "b", "2", 1, "NODE", "x"))
    entries = c.xrange("ta")
    assert [e[0] for e in entries] == [out[b"first_id"], entries[1][0], out[b"last_id"]]
    assert out[b"count"] == 3 and out[b"duplicate"] == 0
    assert len({i.split(b"-")[0] for i, _ in entries}) == 1  # one timestamp, contiguous seqs
    assert [int(i.split(b"-")[1]) for i, _ in entries] == [1, 2, 3]
    assert entries[1][1] == {b"a": b"1", b"b": b"2", b"$node": b"n1", b"$tag": b"t1"}
    assert entries[2][1] == {b"NODE": b"x"}  # npairs comes first: a field may be called NODE
    assert c.xlen("ta") == 3


def test_one_key_for_the_batch(srv: tuple[InProc, FakeClock]) -> None:
    s, clock = srv
    c = _conn(s, protocol=3)
    args = ["TOPIC.APPEND", "tb", "IDMP", "p", "7", "ENTRIES", 2, 1, "f", "1", 1, "f", "2"]
    first = c.execute_command(*args)
    assert first[b"duplicate"] is False
    again = c.execute_command(*args[:-1], "other")  # the same key: nothing appended
    assert again[b"duplicate"] is True
    assert (again[b"first_id"], again[b"last_id"]) == (first[b"first_id"], first[b"last_id"])
    assert [f[b"f"] for _, f in c.xrange("tb")] == [b"1", b"2"]
    info = c.xinfo_stream("tb")
    assert (info["iids-tracked"], info["iids-added"], info["iids-duplicates"]) == (1, 1, 1)
    clock.advance(101_000)  # past the stream's IDMP window (100 s): new data again
    third = c.execute_command(*args)
    assert third[b"duplicate"] is False and c.xlen("tb") == 4
    # XADD IDMP shares the table: the same pair answers the batch's first ID, appends nothing
    assert c.execute_command("XADD", "tb", "IDMP", "p", "7", "*", "f", "x") == third[b"first_id"]
    assert c.xlen("tb") == 4


@pytest.mark.parametrize("args, error", [
    (["ENTRIES", 2, 1, "f", "v", 1, "g"], "fewer field/value pairs"),
    (["ENTRIES", 1, 1, "f", "v", "extra"], "more arguments"),
    (["ENTRIES", 1, 0, "f", "v"], "npairs"),
    (["ENTRIES", 10_001, 1, "f", "v"], "ENTRIES count"),
    (["ENTRIES", "x", 1, "f", "v"], "ENTRIES count"),
    (["ENTRIES", 2, 1, "f", "v", "TAG", "x" * 300, 1, "g", "w"], "tag is 300 bytes"),
    (["IDMP", "", "1", "ENTRIES", 1, 1, "f", "v"], "non-empty producer"),
    (["IDMPAUTO", "p", "ENTRIES", 1, 1, "f", "v"], "no IDMPAUTO"),
    (["FOO", "ENTRIES", 1, 1, "f", "v"], "syntax error"),
    (["NOMKSTREAM", "NOMKSTREAM", "1", "f", "v"], "syntax error"),
    (["NOMKSTREAM", "NOMKSTREAM", "NOMKSTREAM", "NOMKSTREAM"], "wrong number"),
])
def test_a_bad_entry_refuses_the_whole_command(srv: tuple[InProc, FakeClock], args: list[Any],
                                               error: str) -> None:
    s, _ = srv
    c = _conn(s)
    c.execute_command("XADD", "tc", "*", "before", "1")
    with pytest.raises(redis.ResponseError, match=error):
        c.execute_command("TOPIC.APPEND", "tc", *args)
    assert c.xlen("tc") == 1 and c.ping()


def test_as_any_stream_write(srv: tuple[InProc, FakeClock]) -> None:
    """Rule 3: NOMKSTREAM, WRONGTYPE, MULTI, a script, keyspace events."""
    s, _ = srv
    c = _conn(s)
    assert c.execute_command("TOPIC.APPEND", "td", "NOMKSTREAM", "ENTRIES", 1, 1, "f", "v") is None
    assert not c.exists("td")
    c.set("td:str", "x")
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        c.execute_command("TOPIC.APPEND", "td:str", "ENTRIES", 1, 1, "f", "v")
    p = c.pipeline(transaction=True)
    p.execute_command("TOPIC.APPEND", "td", "ENTRIES", 2, 1, "f", "1", 1, "f", "2")
    p.xadd("td", {"f": "3"})
    p.execute()
    assert [f[b"f"] for _, f in c.xrange("td")] == [b"1", b"2", b"3"]
    script = "return redis.call('TOPIC.APPEND', KEYS[1], 'ENTRIES', 1, 1, 'f', ARGV[1])"
    c.eval(script, 1, "td", "4")
    assert c.xlen("td") == 4
    c.config_set("notify-keyspace-events", "KEt")
    sub = c.pubsub()
    sub.psubscribe("__keyspace@0__:te")
    assert sub.get_message(timeout=5)["type"] == "psubscribe"
    c.execute_command("TOPIC.APPEND", "te", "ENTRIES", 2, 1, "f", "1", 1, "f", "2")
    got = [sub.get_message(timeout=5) for _ in range(2)]
    assert [m["data"] for m in got if m] == [b"xadd", b"xadd"]
    sub.close()
    assert c.command_getkeys("TOPIC.APPEND", "tk", "ENTRIES", 1, 1, "f", "v") == ["tk"]
