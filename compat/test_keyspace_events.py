"""Keyspace notifications of the string and generic key commands, differential against
redis-server 7.0: one connection runs a script with `notify-keyspace-events KEAn`, a
subscriber to `__key*__:*` (RESP2 or RESP3) collects every event frame until a sentinel
message, and the two servers' frame sequences must be equal (typed trees, harness Rule 1).
The script covers each event of resp/commands/keyevents_strings.py Rule 3 (and of the list and
hash commands: keyevents_lists.py, keyevents_hashes.py), the commands that
fire nothing (failed conditions, reads), lazy `expired` (a deadline already past), `new`.
"""

from __future__ import annotations

import pytest
from compat_harness import RespConn, Target, Tree  # type: ignore[import-not-found]

SCRIPT: list[tuple[str, ...]] = [
    ("SET", "a", "1"), ("SET", "a", "2"), ("SET", "a", "3", "EX", "100"),
    ("SET", "a", "4", "KEEPTTL"), ("SET", "a", "5", "NX"), ("SET", "a", "6", "XX", "GET"),
    ("SET", "b", "1", "PXAT", "1"), ("GET", "b"),  # lazy expiry: `expired`
    ("SETNX", "c", "1"), ("SETNX", "c", "2"), ("SETEX", "d", "100", "v"),
    ("PSETEX", "e", "100000", "v"), ("GETSET", "d", "w"), ("GETDEL", "d"), ("GETDEL", "d"),
    ("GETEX", "e", "PERSIST"), ("GETEX", "e", "PERSIST"), ("GETEX", "e", "EX", "100"),
    ("GETEX", "e", "PXAT", "1"), ("GETEX", "a"),
    ("MSET", "m1", "1", "m2", "2", "m1", "3"), ("MSETNX", "m3", "1", "m4", "2"),
    ("MSETNX", "m3", "1", "m5", "2"),
    ("APPEND", "ap", "x"), ("APPEND", "ap", "y"), ("SETRANGE", "sr", "3", "ab"),
    ("SETRANGE", "sr", "0", "c"), ("SETRANGE", "sr", "0", ""), ("SETRANGE", "nn", "0", ""),
    ("INCR", "i"), ("DECR", "i"), ("INCRBY", "i", "5"), ("DECRBY", "i", "2"),
    ("INCRBYFLOAT", "i", "1.5"), ("INCRBYFLOAT", "f", "1"), ("INCRBY", "ap", "1"),
    ("EXPIRE", "i", "100"), ("PEXPIRE", "i", "100000", "NX"), ("EXPIRE", "i", "50", "GT"),
    ("EXPIRE", "i", "500", "GT"), ("EXPIREAT", "i", "1"), ("EXPIRE", "nokey", "10"),
    ("SET", "p", "1", "EX", "100"), ("PERSIST", "p"), ("PERSIST", "p"),
    ("RENAME", "p", "q"), ("RENAME", "q", "q"), ("SET", "r", "1"), ("RENAME", "q", "r"),
    ("RENAMENX", "r", "q"), ("RENAMENX", "q", "c"), ("RENAME", "nokey", "z"),
    ("COPY", "q", "cp"), ("COPY", "q", "cp"), ("COPY", "q", "cp", "REPLACE"),
    ("DEL", "q", "cp", "nokey", "q"), ("UNLINK", "m1", "m2"),
    ("SET", "x", "1", "EX", "100"), ("PEXPIREAT", "x", "1"), ("SET", "y", "1"),
    ("EXPIRE", "y", "0"), ("SET", "pz", "1", "PX", "100000"), ("SET", "pz", "2"),
    ("PERSIST", "pz"), ("XADD", "s", "*", "f", "v"), ("SET", "s", "1"), ("TOUCH", "s"),
    ("XGROUP", "CREATE", "s2", "g", "$", "MKSTREAM"), ("EXPIRE", "s2", "100"),
    ("SET", "t", "1", "PXAT", "1"), ("SET", "t", "2", "XX"), ("DEL", "t"),
    ("STRLEN", "a"), ("MGET", "a", "c"), ("EXISTS", "a"), ("TTL", "a"),
    # lists (keyevents_lists.py)
    ("LPUSH", "L", "a", "b"), ("RPUSH", "L", "c"), ("LPUSHX", "L", "z"), ("RPUSHX", "nol", "z"),
    ("LPOP", "L"), ("RPOP", "L", "1"), ("LSET", "L", "0", "x"), ("LINSERT", "L", "BEFORE", "x", "w"),
    ("LINSERT", "L", "BEFORE", "nope", "w"), ("LREM", "L", "0", "w"), ("LREM", "L", "0", "nope"),
    ("RPUSH", "L", "1", "2", "3"), ("LTRIM", "L", "1", "-1"), ("LMOVE", "L", "L2", "LEFT", "RIGHT"),
    ("RPOPLPUSH", "L", "L2"), ("LMOVE", "L2", "L2", "LEFT", "LEFT"), ("LMPOP", "2", "nol", "L", "LEFT", "COUNT", "9"),
    ("LTRIM", "L2", "5", "1"), ("RPUSH", "L3", "a"), ("LPOP", "L3"), ("RPUSH", "L4", "a"),
    ("LMOVE", "L4", "L5", "RIGHT", "LEFT"), ("LRANGE", "L5", "0", "-1"), ("EXPIRE", "L5", "100"),
    # hashes (keyevents_hashes.py)
    ("HSET", "H", "a", "1", "b", "2"), ("HSET", "H", "a", "1"), ("HMSET", "H", "c", "3"),
    ("HSETNX", "H", "a", "x"), ("HSETNX", "H", "d", "4"), ("HDEL", "H", "nope"), ("HDEL", "H", "a", "b"),
    ("HINCRBY", "H", "n", "5"), ("HINCRBY", "H", "c", "x"), ("HINCRBYFLOAT", "H", "f", "0.5"),
    ("HINCRBYFLOAT", "H2", "f", "1"), ("HINCRBY", "H3", "n", "1"), ("HSETNX", "H4", "a", "1"),
    ("HGET", "H", "c"), ("HDEL", "H", "c", "d", "n", "f"), ("HDEL", "H2", "f"), ("HSET", "H5", "a", "1"),
    ("EXPIRE", "H5", "100"), ("HSET", "H5", "a", "x", "PXAT"), ("RENAME", "H3", "H6"), ("COPY", "H6", "H7"),
    # sets (keyevents_sets.py)
    ("SADD", "st1", "1", "2", "x"), ("SADD", "st1", "1"), ("SREM", "st1", "nope"), ("SREM", "st1", "1", "2"),
    ("SPOP", "st1", "0"), ("SPOP", "st1"), ("SADD", "st2", "a"), ("SMOVE", "st2", "st3", "a"),
    ("SADD", "st2", "a", "b"), ("SMOVE", "st2", "st3", "a"), ("SMOVE", "st2", "st3", "nope"),
    ("SMOVE", "st2", "st2", "b"), ("SADD", "st3", "b"), ("SMOVE", "st2", "st3", "b"),
    ("SADD", "st2", "c"), ("SINTERSTORE", "st4", "st3", "st2"), ("SUNIONSTORE", "st4", "st3", "st2"),
    ("SUNIONSTORE", "st4", "st3", "st2"), ("SDIFFSTORE", "st5", "st3", "st3"),
    ("SINTERSTORE", "st4", "nos", "st3"), ("SDIFFSTORE", "st4", "st3", "nos"), ("SREM", "st3", "a"),
    ("SPOP", "st3", "5"), ("SPOP", "st1", "9"), ("SISMEMBER", "st4", "a"),
    # sorted sets (keyevents_zsets.py)
    ("ZADD", "Z", "1", "a", "2", "b"), ("ZADD", "Z", "1", "a"), ("ZADD", "Z", "INCR", "5", "a"),
    ("ZADD", "Z", "NX", "9", "a"), ("ZINCRBY", "Z", "1", "b"), ("ZINCRBY", "Z2", "1", "x"),
    ("ZREM", "Z", "nope"), ("ZREM", "Z2", "x"), ("ZADD", "Z", "3", "c", "4", "d", "5", "e"),
    ("ZREMRANGEBYRANK", "Z", "0", "0"), ("ZREMRANGEBYSCORE", "Z", "100", "200"),
    ("ZREMRANGEBYSCORE", "Z", "3", "3"), ("ZADD", "ZL", "0", "a", "0", "b"), ("ZREMRANGEBYLEX", "ZL", "[a", "[a"),
    ("ZREMRANGEBYLEX", "ZL", "-", "+"), ("ZPOPMIN", "Z"),
    ("ZPOPMAX", "Z", "0"), ("ZADD", "Z3", "1", "a", "2", "b"), ("ZMPOP", "2", "noz", "Z3", "MAX"),
    ("ZUNIONSTORE", "Z4", "2", "Z", "Z3"), ("ZINTERSTORE", "Z4", "2", "Z", "Z3"),
    ("ZDIFFSTORE", "Z5", "1", "Z3"), ("ZRANGESTORE", "Z6", "Z5", "0", "-1"),
    ("ZRANGESTORE", "Z6", "noz", "0", "-1"), ("ZUNIONSTORE", "Z4", "1", "noz"), ("ZPOPMIN", "Z", "9"),
    ("ZMPOP", "1", "Z3", "MIN", "COUNT", "5"), ("ZRANGE", "Z5", "0", "-1"),
    # the blocking list pops served at once (lists_blocking.py Rule 7)
    ("RPUSH", "BL", "a", "b", "c"), ("BLPOP", "BL", "0"), ("BRPOP", "BL", "0"),
    ("BLMPOP", "0", "1", "BL", "LEFT", "COUNT", "5"), ("RPUSH", "BL2", "x", "y"),
    ("BLMOVE", "BL2", "BL3", "LEFT", "RIGHT", "0"), ("BRPOPLPUSH", "BL2", "BL3", "0"),
    ("ZADD", "BZ", "1", "a", "2", "b", "3", "c"), ("BZPOPMIN", "BZ", "0"), ("BZPOPMAX", "BZ", "0"),
    ("BZMPOP", "0", "1", "BZ", "MIN", "COUNT", "5"),
    # SORT ... STORE (resp/commands/sort.py Rule 3)
    ("RPUSH", "SL", "2", "1"), ("SORT", "SL", "STORE", "SD"), ("SORT", "SL", "STORE", "SD"),
    ("SORT", "nol", "STORE", "SD"), ("SORT", "nol", "STORE", "SD"), ("SORT", "SL"),
]
END = "ks.end"


def run(target: Target, protocol: int) -> tuple[list[Tree], list[Tree]]:
    pub, sub = RespConn(target.port, 2), RespConn(target.port, protocol)
    try:
        pub.call("FLUSHALL")
        pub.call("CONFIG", "SET", "notify-keyspace-events", "KEAn")
        sub.call("PSUBSCRIBE", "__key*__:*")
        sub.call("SUBSCRIBE", END)
        replies = [pub.call(*cmd) for cmd in SCRIPT]
        pub.call("PUBLISH", END, "x")
        events: list[Tree] = []
        while True:
            frame = sub.read()
            events.append(frame)
            if _is_end(frame):
                break
        pub.call("CONFIG", "SET", "notify-keyspace-events", "")
    finally:
        pub.close()
        sub.close()
    replies = [r for cmd, r in zip(SCRIPT, replies, strict=True) if cmd[0] != "XADD"]
    return replies, events


def _is_end(frame: Tree) -> bool:
    items = frame[1]
    return isinstance(items, list) and len(items) == 3 and items[1] == ("$", END.encode())


@pytest.mark.parametrize("protocol", [2, 3])
def test_keyspace_event_sequence(ref: Target, ours: Target | None, protocol: int) -> None:
    want_replies, want = run(ref, protocol)
    assert len(want) > 100  # the script fires events on redis-server
    if ours is None:
        return
    got_replies, got = run(ours, protocol)
    assert got_replies == want_replies
    problems = [f"#{i}: redis {w} / topicsrv {g}" for i, (w, g) in enumerate(zip(want, got, strict=False))
                if w != g]
    assert not problems and len(got) == len(want), "\n".join(problems[:10]) + (
        f"\n{len(want)} events on redis-server, {len(got)} on topicsrv")
