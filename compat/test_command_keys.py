"""COMMAND GETKEYS / GETKEYSANDFLAGS / LIST, the `movablekeys` flag and INFO commandstats,
differential against redis-server 7.0 (compat/harness.py for the scripts; commandstats is
compared after parsing, the `usec` fields being times)."""

from __future__ import annotations

from typing import Any

import pytest
import redis
from compat_harness import S  # type: ignore[import-not-found]


def _getkeys() -> list[Any]:
    calls = [
        ("get", "key"), ("getrange", "k", "0", "1"), ("lcs", "key1", "key2"),
        ("memory", "usage", "key"), ("xgroup", "create", "key", "groupname", "$"),
        ("eval", "return 1", "1", "key"), ("eval", "return 1", "0"), ("eval", "x", "5", "a"),
        ("eval", "x", "notnum"), ("eval", "x", "-1"), ("evalsha_ro", "x", "2", "a", "b"),
        ("fcall", "f", "1", "a"), ("fcall_ro", "f", "2", "a", "b"),
        ("xread", "streams", "a", "0"), ("xread", "count", "2", "streams", "a", "b", "0", "0"),
        ("xread", "streams", "a", "b", "c"), ("xread", "count", "2", "a"),
        ("xread", "count", "streams", "streams", "a", "0"),
        ("xreadgroup", "group", "g", "c", "streams", "a", "0"),
        ("set", "k1", "v1"), ("set", "k1", "v1", "get"), ("set", "k1", "v1", "NX", "GeT"),
        ("set", "k1", "v1", "EX", "10"), ("mset", "k1", "v1", "k2", "v2"), ("mset", "a", "1", "b"),
        ("msetnx", "a", "1", "b", "2"), ("mget", "a", "b", "c"), ("del", "a", "b"),
        ("exists", "a", "b"), ("unlink", "a"), ("touch", "a", "b"), ("rename", "a", "b"),
        ("renamenx", "a", "b"), ("copy", "a", "b"), ("copy", "a", "b", "REPLACE"),
        ("getex", "a", "PERSIST"), ("getdel", "a"), ("incrbyfloat", "a", "1"), ("append", "a", "b"),
        ("setnx", "a", "b"), ("setex", "a", "1", "b"), ("expire", "a", "1"), ("ttl", "a"),
        ("type", "a"), ("strlen", "a"), ("object", "encoding", "k"), ("xinfo", "stream", "k"),
        # lists (issue 35): a move's two keys have two specs; LMPOP/BLMPOP count their keys
        ("lmove", "k1", "k2", "left", "right"), ("rpoplpush", "a", "b"),
        ("blmove", "a", "b", "LEFT", "LEFT", "0"), ("brpoplpush", "a", "b", "0"),
        ("lpush", "a", "1", "2"), ("linsert", "a", "BEFORE", "x", "y"), ("lrange", "a", "0", "1"),
        ("blpop", "a", "b", "c", "0"), ("brpop", "a", "1"), ("lmpop", "2", "a", "b", "LEFT"),
        ("lmpop", "1", "a", "RIGHT", "COUNT", "2"), ("lmpop", "0", "a", "LEFT"),
        ("lmpop", "x", "a", "LEFT"), ("lmpop", "3", "a", "LEFT"),
        ("blmpop", "0", "2", "a", "b", "LEFT"), ("blmpop", "0", "x", "a", "LEFT"),
        # sorted sets (issue 36): numkeys forms, the *STORE commands' destination first
        ("zadd", "z", "1", "a"), ("zrangestore", "d", "s", "0", "1"), ("bzpopmin", "a", "b", "0"),
        ("zunionstore", "d", "2", "a", "b", "WEIGHTS", "1", "2"), ("zinterstore", "d", "1", "a"),
        ("zdiffstore", "d", "0", "a"), ("zdiffstore", "d", "x", "a"), ("zunion", "2", "a", "b"),
        ("zinter", "1", "a", "WITHSCORES"), ("zdiff", "3", "a", "b"), ("zintercard", "2", "a", "b"),
        ("zmpop", "2", "a", "b", "MIN"), ("bzmpop", "0", "1", "a", "MAX", "COUNT", "2"),
        ("zmpop", "-1", "a", "MIN"),
        # errors: unknown command, no keys, the named command's arity, a container alone
        ("nosuch", "x"), ("ping", "x"), ("config", "get", "x"), ("client", "list"),
        ("get", "a", "b"), ("set", "a"), ("xread", "streams"), ("object", "x"),
        ("command", "getkeys", "get", "k"),
    ]
    out = []
    for c in calls:
        out += [S("COMMAND", "GETKEYS", *c), S("COMMAND", "GETKEYSANDFLAGS", *c)]
    return out + [S("COMMAND", "GETKEYS", "get"), S("COMMAND", "GETKEYSANDFLAGS")]


def _list_and_info() -> list[Any]:
    return [
        S("COMMAND", "LIST", "bad"), S("COMMAND", "LIST", "FILTERBY", "bad"),
        S("COMMAND", "LIST", "FILTERBY", "bad", "bad2"), S("COMMAND", "LIST", "FILTERBY", "aclcat", "nope"),
        S("COMMAND", "LIST", "FILTERBY", "MODULE", "x"), S("COMMAND", "LIST", "FILTERBY", "pattern", "set"),
        S("COMMAND", "LIST", "FILTERBY", "PATTERN", "GET"), S("COMMAND", "LIST", "FILTERBY", "pattern", "nope*"),
        S("COMMAND", "LIST", "FILTERBY", "pattern", "config|res*"),
        S("COMMAND", "LIST", "FILTERBY", "pattern", "xgroup|c*create*"),
        S("COMMAND", "INFO", "get|key"), S("COMMAND", "INFO", "config|get|key"),
    ]


@pytest.mark.parametrize("proto", [2, 3])
def test_getkeys(differ: Any, proto: int) -> None:
    differ.check(_getkeys(), proto)


@pytest.mark.parametrize("proto", [2, 3])
def test_command_list_and_movablekeys(differ: Any, proto: int) -> None:
    differ.check(_list_and_info(), proto)


MOVABLE_CHECKS = ["xread", "xreadgroup", "eval", "evalsha", "eval_ro", "evalsha_ro", "fcall",
                  "fcall_ro", "lmpop", "blmpop", "lmove", "blpop",
                  "set", "get", "mset", "ping", "memory|usage", "rename", "xadd",
                  "xgroup|create", "xinfo|stream", "xautoclaim", "spublish", "restore"]


def _info(port: int, name: str) -> tuple[bool, Any]:
    r = redis.Redis(port=port, protocol=3)
    r.response_callbacks.pop("COMMAND", None)
    (info,) = r.execute_command("COMMAND", "INFO", name)
    r.close()
    return b"movablekeys" in info[2], info[8]


def test_movablekeys_and_key_specs(targets: list[Any]) -> None:
    """The `movablekeys` flag (Valkey's introspection-2 checks it) and the key specs of the
    movable commands and of a few fixed ones, compared with redis-server (flag and category
    orders differ: the other COMMAND INFO fields are compare_command_info's business)."""
    got = [{n: _info(t.port, n) for n in MOVABLE_CHECKS} for t in targets]
    assert got[0]["xread"][0] and not got[0]["get"][0]
    if len(got) == 2:
        for n in MOVABLE_CHECKS:
            assert got[1][n] == got[0][n], n


def test_command_list_sets(targets: list[Any]) -> None:
    """Without a filter, and by ACL category or pattern: every topicsrv name is one redis-server
    has (the same spelling of subcommands) but for our own commands, and the filters agree on
    the commands both have (categories that differ, @keyspace @connection @slow @dangerous
    @admin @read, are listed in docs/redis-compatibility.md)."""
    lists = []
    for t in targets:
        r = redis.Redis(port=t.port, decode_responses=True)
        r.response_callbacks.pop("COMMAND", None)
        lists.append({q: set(r.execute_command("COMMAND", "LIST", *q)) for q in
                      [(), ("FILTERBY", "ACLCAT", "string"), ("FILTERBY", "ACLCAT", "stream"),
                       ("FILTERBY", "ACLCAT", "scripting"), ("FILTERBY", "ACLCAT", "write"),
                       ("FILTERBY", "ACLCAT", "fast"), ("FILTERBY", "ACLCAT", "blocking"),
                       ("FILTERBY", "PATTERN", "x*"), ("FILTERBY", "PATTERN", "*|h?lp"),
                       ("FILTERBY", "PATTERN", "CONFIG*")]})
        r.close()
    if len(lists) < 2:
        return
    redis_all, ours_all = lists[0][()], lists[1][()]
    assert "client|list" in ours_all and "set" in ours_all
    extras = ours_all - redis_all
    newer = {"xackdel", "xdelex", "xcfgset", "waitaof",  # Redis 7.2-8.x, topicsrv has them
             "hexpire", "hpexpire", "hexpireat", "hpexpireat", "httl", "hpttl", "hexpiretime",
             "hpexpiretime", "hpersist"}  # Redis 7.4's hash field expiry
    assert all(n.startswith("topic.") or n in newer or "|" in n for n in extras), extras
    for q in lists[0]:
        assert lists[1][q] & redis_all == lists[0][q] & ours_all, q


def _cmdstats(port: int, script: list[tuple[Any, ...]]) -> dict[str, tuple[int, int, int]]:
    r = redis.Redis(port=port)
    r.config_resetstat()
    for argv in script:
        try:
            r.execute_command(*argv)
        except redis.ResponseError:
            pass
    raw = r.info("commandstats")
    r.close()
    out: dict[str, tuple[int, int, int]] = {}
    for name, f in raw.items():
        assert set(f) == {"calls", "usec", "usec_per_call", "rejected_calls", "failed_calls"}, f
        out[name] = (int(f["calls"]), int(f["rejected_calls"]), int(f["failed_calls"]))
    return out


@pytest.mark.parametrize("case", ["plain", "errors", "multi", "exec-abort", "subcommands", "xread"])
def test_commandstats(targets: list[Any], key: str, case: str) -> None:
    k = key
    scripts: dict[str, list[tuple[Any, ...]]] = {
        "plain": [("SET", k, "bar"), ("GET", k), ("GET", k), ("EXPIRE", k, "0"), ("DEL", k)],
        "errors": [("SET", k, "x"), ("INCR", k), ("GET",), ("GET", k, "x"), ("XADD", k, "*", "a", "b"),
                   ("NOSUCH",), ("CONFIG", "NOSUCH"), ("SET", k, "v", "BOGUS")],
        "multi": [("MULTI",), ("SET", k, "bar"), ("EXPIRE", k, "0"), ("INCR", k), ("EXEC",)],
        "exec-abort": [("MULTI",), ("SET", k), ("GET", k), ("EXEC",), ("EXEC",)],
        "subcommands": [("CONFIG", "GET", "maxmemory"), ("CLIENT", "ID"), ("OBJECT", "ENCODING", k),
                        ("OBJECT", "ENCODING"), ("XINFO", "STREAM", k)],
        "xread": [("XADD", k, "*", "f", "v"), ("XREAD", "BLOCK", "10", "STREAMS", k, "$"),
                  ("XREAD", "STREAMS", k, "0"), ("XREAD", "STREAMS", k)],
    }
    got = [_cmdstats(t.port, scripts[case]) for t in targets]
    assert got[0], "redis-server counted nothing"
    if len(got) == 2:
        assert got[1] == got[0]
