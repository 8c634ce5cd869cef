"""Scripting, differential (redis-server vs topicsrv): EVAL replies and conversions both ways
(RESP2 and RESP3, setresp), the sandbox's errors, redis.call/pcall errors, EVAL_RO, SCRIPT
LOAD/EXISTS/FLUSH, FUNCTION LOAD/LIST/DELETE/STATS and FCALL/FCALL_RO; redis-py's Lock
(acquire, extend, reacquire, release, token mismatch) and register_script on topicsrv."""

from __future__ import annotations

from typing import Any

import pytest
import redis
from compat_harness import S, Target  # type: ignore[import-not-found]

LIB = ("#!lua name=lib_{p}\n"
       "redis.register_function('f_{p}', function(keys, args) return error('bad') end)\n"
       "redis.register_function{{function_name='g_{p}', callback=function(keys, args) "
       "return redis.call('get', keys[1]) end, flags={{'no-writes'}}}}\n")

LONE = ("#!lua name=lone_{p}\n"
        "redis.register_function{{function_name='h_{p}', callback=function(keys, args) "
        "return 1 end, flags={{'no-writes'}}, description='one'}}\n")


@pytest.mark.parametrize("proto", [2, 3])
def test_conversions(differ: Any, key: str, proto: int) -> None:
    k = f"{key}:{proto}"
    differ.check([
        S("EVAL", "return {1,2,3.7,'a',nil,5}", "0"),
        S("EVAL", "return {err='My err'}", "0"),
        S("EVAL", "return redis.error_reply('x y')", "0"),
        S("EVAL", "return redis.status_reply('FINE')", "0"),
        S("EVAL", "return true", "0"), S("EVAL", "return false", "0"),
        S("EVAL", "return nil", "0"), S("EVAL", "return 3.99", "0"),
        S("EVAL", "return -3.99", "0"), S("EVAL", "return 'x'", "0"),
        S("EVAL", "return {1, {2, {'x', {ok='s'}}}}", "0"),
        S("EVAL", "return KEYS[1] .. ARGV[1] .. #KEYS .. #ARGV", "1", k, "a", "b"),
        # KEYS and ARGV built in Lua from the run's arguments (lua.py Rule 6: up to FEW = 8
        # values) and from tables past that
        S("EVAL", "return {#KEYS, #ARGV}", "0"),
        S("EVAL", "return {#KEYS, #ARGV, KEYS[2], ARGV[1], ARGV[6]}", "2", k, "", "", *"bcdef"),
        S("EVAL", "return {#KEYS, #ARGV, KEYS[2], ARGV[1], ARGV[7]}", "2", k, "", "", *"bcdefg"),
        S("EVAL", "return {#KEYS, #ARGV, KEYS[9], ARGV[1]}", "9", *[f"{k}{i}" for i in range(9)]),
        S("EVAL", "redis.setresp(3); return {double=3.5}", "0"),
        S("EVAL", "redis.setresp(3); return {map={a=1}}", "0"),
        S("EVAL", "redis.setresp(3); return {set={a=true}}", "0"),
        S("EVAL", "redis.setresp(3); return true", "0"),
        S("EVAL", "redis.setresp(3); return false", "0"),
        S("EVAL", "return redis.call('set', KEYS[1], 'v')", "1", k),
        S("EVAL", "return redis.call('get', KEYS[1])", "1", k),
        S("EVAL", "return redis.call('get', KEYS[1] .. 'none')", "1", k),
        S("EVAL", "return type(redis.call('get', KEYS[1] .. 'none'))", "1", k),
        S("EVAL", "redis.setresp(3); return type(redis.call('get', KEYS[1] .. 'none'))", "1", k),
        S("EVAL", "return redis.call('incr', KEYS[1] .. 'n')", "1", k),
        S("EVAL", "local n = redis.call('incr', KEYS[1] .. 'n') return {type(n), n + 1}", "1", k),
        S("EVAL", "local v = redis.call('get', KEYS[1]) return {type(v), #v, v}", "1", k),
        S("EVAL", "return type(redis.call('set', KEYS[1], 'v'))", "1", k),
        S("EVAL", "return redis.pcall('incr', KEYS[1])", "1", k),
        S("EVAL", "return redis.call('exists', KEYS[1], KEYS[1] .. 'n')", "1", k),
        S("EVAL", "return redis.call('ping')", "0"),
        S("EVAL", "return redis.call('xadd', KEYS[1] .. 's', '1-1', 'f', 'v')", "1", k),
        S("EVAL", "return redis.call('xrange', KEYS[1] .. 's', '-', '+')", "1", k),
        S("EVAL", "return redis.call('xlen', KEYS[1] .. 's')", "1", k),
        S("EVAL", "return redis.call('type', KEYS[1] .. 's')", "1", k),
        S("EVAL", "return cjson.encode({1,2,{a=1}})", "0"),
        S("EVAL", "return cjson.decode('[1,null]')[2] == cjson.null", "0"),
        S("EVAL", "return cmsgpack.unpack(cmsgpack.pack({1,2,3}))", "0"),
        S("EVAL", "return {bit.tohex(65535, -2147483648), bit.tohex(65535, -8), bit.tohex(1, 0)}", "0"),
        S("EVAL", "return {bit.tohex(65535), bit.band(-1, 255), bit.bor(1, 2), bit.lshift(1, 4)}",
          "0"),
        S("EVAL", "return struct.pack('>I2', 258)", "0"),
        S("EVAL", "return {struct.unpack('>I2', ARGV[1])}", "0", "\x01\x02"),
        S("EVAL", "return redis.sha1hex('')", "0"),
        S("EVAL", "return string.format('%d-%s', 3, 'x')", "0"),
        S("EVAL", "return redis.REDIS_VERSION_NUM > 0", "0"),
        # a returned table's fields are read raw, never through its metatable (Valkey's
        # scripting unit: `Return _G`, `... a metatable that raise error` / `that call server`)
        S("EVAL", "return _G", "0"),
        S("EVAL", "local a = {}; setmetatable(a, {__index=function() foo() end}) return a", "0"),
        S("EVAL", "local a = {1, 2}; setmetatable(a, {__index=function() foo() end}) return a",
          "0"),
        S("EVAL", "local a = {}; setmetatable(a, {__index=function() "
          "redis.call('set', KEYS[1] .. 'mt', '1') end}) return a", "1", k),
        S("EXISTS", f"{k}mt"),
    ], proto)


@pytest.mark.parametrize("proto", [2, 3])
def test_errors(differ: Any, key: str, proto: int) -> None:
    differ.check([
        S("EVAL", "x=1", "0"), S("EVAL", "return os", "0"), S("EVAL", "local t = string; t.x = 1", "0"),
        S("EVAL", "function f() end", "0"),
        S("EVAL", "error('boom')", "0"), S("EVAL", "error({err='X boom'})", "0"),
        S("EVAL", "return redis.call('set', 'a')", "0"),
        S("EVAL", "return redis.pcall('set', 'a')", "0"),
        S("EVAL", "return redis.call('nosuch')", "0"),
        S("EVAL", "return redis.call('multi')", "0"),
        S("EVAL", "return redis.call('eval', 'return 1', '0')", "0"),
        S("EVAL_RO", "return redis.call('set', KEYS[1], 'b')", "1", key),
        S("EVAL_RO", "return redis.call('get', KEYS[1])", "1", key),
        S("EVAL", "local x = redis.call('incr', KEYS[1])", "1", f"{key}:s"),
        S("EVAL", "return 1", "-1"), S("EVAL", "return 1", "2", "a"), S("EVAL", "return 1", "x"),
        S("EVAL", "return 1"), S("EVALSHA", "abc", "0"),
        S("EVAL", "return (", "0"),
        S("EVAL", "return redis.call()", "0"),
        S("EVAL", "return {redis.acl_check_cmd('set', 'a', 'b'), redis.acl_check_cmd('get')}",
          "0"),
        S("EVAL", "return redis.acl_check_cmd('nosuch')", "0"),
        S("EVAL", "return redis.acl_check_cmd()", "0"),
        S("SCRIPT", "KILL"), S("FUNCTION", "KILL"), S("SCRIPT", "NOSUCH"),
        S("PING"),
    ], proto)


def test_script_cache(differ: Any) -> None:
    differ.check([
        S("SCRIPT", "FLUSH"),
        S("SCRIPT", "LOAD", "return 'cached'"),
        S("SCRIPT", "EXISTS", "b534286061d4b9e4026607613b95c06c06015ae8",
          "0000000000000000000000000000000000000000"),
        S("EVALSHA", "b534286061d4b9e4026607613b95c06c06015ae8", "0"),
        S("EVALSHA_RO", "B534286061D4B9E4026607613B95C06C06015AE8", "0"),
        S("SCRIPT", "FLUSH", "SYNC"),
        S("EVALSHA", "b534286061d4b9e4026607613b95c06c06015ae8", "0"),
        S("SCRIPT", "FLUSH", "BAD"),
    ])


@pytest.mark.parametrize("proto", [2, 3])
def test_functions(differ: Any, key: str, proto: int) -> None:
    p = str(proto)
    differ.check([
        S("FUNCTION", "FLUSH"),
        S("FUNCTION", "LOAD", LIB.format(p=p)),
        S("FUNCTION", "LOAD", LIB.format(p=p)),
        S("FUNCTION", "LOAD", "REPLACE", LIB.format(p=p)),
        S("SET", key, "val"),
        S("FCALL", f"f_{p}", "0"), S("FCALL", f"g_{p}", "1", key),
        S("FCALL_RO", f"g_{p}", "1", key), S("FCALL_RO", f"f_{p}", "0"),
        S("FCALL", "nosuch", "0"),
        # one function per listed library: Redis lists a library's functions in hash order
        S("FUNCTION", "LOAD", LONE.format(p=p)),
        S("FUNCTION", "LIST", "LIBRARYNAME", "lone*"),
        S("FUNCTION", "LIST", "WITHCODE", "LIBRARYNAME", "lone*"),
        S("FUNCTION", "LIST", "LIBRARYNAME", "nomatch*"),
        S("FUNCTION", "STATS"),
        S("FUNCTION", "LOAD", "x"), S("FUNCTION", "LOAD", "#!lua\nreturn 1"),
        S("FUNCTION", "LOAD", "#!lua name=l2\nreturn 1"),
        S("FUNCTION", "LOAD", "#!nosuch name=l2\nreturn 1"),
        S("FUNCTION", "LOAD", "#!lua name=l3\nredis.register_function('f_" + p + "', "
          "function() end)"),
        S("FUNCTION", "DELETE", "nosuch"), S("FUNCTION", "DELETE", f"lib_{p}"),
        S("FCALL", f"f_{p}", "0"),
        S("FUNCTION", "FLUSH"),
    ], proto)


def _client(t: Target) -> redis.Redis:
    return redis.Redis(port=t.port)


def test_lock_and_register_script(targets: list[Target], key: str) -> None:
    """redis-py's Lock on each server: the same outcomes step by step."""
    for t in targets:
        r = _client(t)
        try:
            name = f"{key}:lock"
            a = r.lock(name, timeout=10)
            b = r.lock(name, timeout=10, blocking=False)
            assert a.acquire(blocking=False) is True, t.name
            assert b.acquire(blocking=False) is False, t.name
            assert a.extend(5) is True, t.name
            assert 10000 < r.pttl(name) <= 15000, t.name
            assert a.reacquire() is True, t.name
            assert 5000 < r.pttl(name) <= 10000, t.name
            b.local.token = b"not-the-token"
            with pytest.raises(redis.exceptions.LockNotOwnedError):
                b.release()
            b.local.token = b"not-the-token"
            with pytest.raises(redis.exceptions.LockNotOwnedError):
                b.extend(5)
            token = a.local.token
            a.release()
            assert r.exists(name) == 0, t.name
            a.local.token = token
            with pytest.raises(redis.exceptions.LockNotOwnedError):
                a.release()  # released already: the token owns nothing
            incr_by = r.register_script("return redis.call('incrby', KEYS[1], ARGV[1])")
            r.script_flush()
            assert incr_by(keys=[f"{key}:n"], args=[5]) == 5, t.name  # reloads after NOSCRIPT
            assert incr_by(keys=[f"{key}:n"], args=[2]) == 7, t.name
        finally:
            r.close()


def _lib(body: str, header: str = "#!lua name=t1") -> str:
    return f"{header}\n{body}"


# redis.register_function's checks and the library context (Redis 7.0's function_lua.c)
REGISTRATIONS = [
    "redis.register_function(1, function() return 1 end)",  # a number is a string to Lua
    "redis.register_function('c', 1)",
    "redis.register_function('c d', function() end)",
    "redis.register_function('', function() end)",
    "redis.register_function('b')",
    "redis.register_function()",
    "redis.register_function(1, 2, 3)",
    "redis.register_function({function_name='x', callback=function() end}, 2)",
    "redis.register_function{function_name={}, callback=function() end}",
    "redis.register_function{callback=function() end}",
    "redis.register_function{function_name='x'}",
    "redis.register_function{function_name='x', callback=1}",
    "redis.register_function{function_name='x', callback=function() end, flags={'bad'}}",
    "redis.register_function{function_name='x', callback=function() end, flags={1}}",
    "redis.register_function{function_name='x', callback=function() end, flags='no-writes'}",
    "redis.register_function{function_name='x', callback=function() end, foo=1}",
    "redis.register_function{function_name='x', callback=function() end, description={}}",
    "redis.register_function{FUNCTION_NAME='x', Callback=function() end, flags={'NO-WRITES'},"
    " description=2}",
    "redis.register_function('x', function() end)\nredis.register_function('x', function() end)",
    "redis.register_function('x', function() end)\nlocal x = nil\nx.y = 1",
    "return (",
    # the library context: `redis` with register_function, log and the versions only
    "redis.register_function('x', function() end)\nredis.log(redis.LOG_WARNING, 'loaded')",
    "redis.register_function('x', function() end)\nlocal v = redis.REDIS_VERSION_NUM",
    "redis.math.random()", "redis.call('ping')", "redis.setresp(3)", "redis.set_repl(0)",
    "redis.pcall('ping')", "redis.acl_check_cmd('set')", "local x = math.random()",
    "mt = getmetatable(_G)", "local t = _G", "error('x')", "return KEYS",
]


def test_function_registration(differ: Any) -> None:
    steps = []
    for body in REGISTRATIONS:
        steps += [S("FUNCTION", "FLUSH"), S("FUNCTION", "LOAD", _lib(body)), S("FUNCTION", "LIST")]
    differ.check(steps)


HEADERS = ["#! name=t1", "#!lua name=foo name=bar", '#!lua name="t1"', '#!lua name="t1',
           "#!lua name='t1'", "#!lua  name=t1   foo", "#!lua name=", "#!", "#!LUA NAME=t1",
           "#!lua name=t-1", "#!nosuch name=t-1", "#!nosuch name=t1", "lua name=t1"]


def test_function_headers(differ: Any) -> None:
    steps = [S("FUNCTION", "FLUSH")]
    for header in HEADERS:
        steps += [S("FUNCTION", "LOAD", "REPLACE",
                    _lib("redis.register_function('hf', function() return 1 end)", header)),
                  S("FUNCTION", "DELETE", "t1")]
    differ.check([*steps, S("FUNCTION", "LOAD", "#!lua name=t1")])


def test_function_calls(differ: Any) -> None:
    """Function names without regard to case, FCALL's numkeys text, FUNCTION FLUSH's
    arguments, a failed REPLACE keeping the old library, the library context's `redis`
    captured and used at run time, no register_function in EVAL."""
    differ.check([
        S("FUNCTION", "FLUSH"),
        S("FUNCTION", "LOAD", _lib("redis.register_function('Test', function() return 1 end)")),
        S("FCALL", "TEST", "0"), S("FCALL", "test", "0"),
        S("FUNCTION", "LOAD", _lib("redis.register_function('tesT', function() end)", "#!lua name=T2")),
        S("FCALL", "test", "bad"), S("FCALL_RO", "test", "bad"), S("FCALL", "nosuch", "bad"),
        S("FCALL", "test", "-1"), S("FCALL", "test", "2", "k"),
        S("FUNCTION", "LOAD", "REPLACE", _lib("error")), S("FCALL", "test", "0"),
        S("FUNCTION", "DELETE", "T1"),
        # the error names the subcommand as typed in Redis, in lower case here: typed so
        S("FUNCTION", "flush", "SYNC", "extra"), S("FUNCTION", "FLUSH", "bad"),
        S("FUNCTION", "LOAD", "REPLACE", _lib(
            "local lib = redis\n"
            "lib.register_function('f1', function() lib.redis = redis return 1 end)\n"
            "lib.register_function('f2', function() lib.register_function('f3', function() end) end)")),
        S("FCALL", "f1", "0"), S("FCALL", "f2", "0"),
        # FUNCTION RESTORE's arguments are checked before the payload (refused by design)
        S("FUNCTION", "restore", "a", "b", "c"), S("FUNCTION", "RESTORE", "a", "bad"),
        S("EVAL", "return type(redis.register_function)", "0"),
        S("EVAL", "redis.register_function('a', function() end)", "0"),
        S("FUNCTION", "FLUSH"),
    ])


SHEBANGS = ["#!not-lua\nreturn 1", "#!lua", "#!lua\nreturn 1", "#!lua flags=a,,b\nreturn 1",
            '#!lua "flags=no-writes"\nreturn 1', '#!lua flags="no-writes\nreturn 1',
            "#!lua flags=no-writes,\nreturn 1", "#!lua flags=NO-WRITES\nreturn 1",
            "#!lua flags=allow-oom,what?\nreturn 1", "#!lua badger=data\nreturn 1",
            "#!lua flags=\nreturn 1", "#!lua flags=no-writes,allow-oom,allow-stale,no-cluster,"
            "allow-cross-slot-keys\nreturn 1", "#!lua\nreturn (", "#!lua\n\nerror('line 3')"]


def test_shebang(differ: Any, key: str) -> None:
    """EVAL's `#!lua flags=...` line: its errors, no-writes under EVAL and EVAL_RO."""
    steps = []
    for code in SHEBANGS:
        steps += [S("EVAL", code, "0"), S("SCRIPT", "LOAD", code)]
    differ.check([
        *steps,
        S("EVAL", "#!lua flags=no-writes\nlocal x = redis.call('set', KEYS[1], 1)", "1", key),
        S("EVAL", "#!lua flags=no-writes\nreturn redis.call('get', KEYS[1])", "1", key),
        S("EVAL_RO", "#!lua\nreturn 1", "0"),
        S("EVAL_RO", "#!lua flags=no-writes\nreturn 2", "0"),
        S("EVAL", "#!lua\nlocal x = redis.call('set', KEYS[1], 1) return x", "1", key),
        S("EVALSHA_RO", "a2ab5e5f1d4c72fd87e4ea3d1c6e3d4b3f1e3a3f", "0"),
    ])


def test_scripts_over_maxmemory(differ: Any, key: str) -> None:
    """Over maxmemory (Valkey's `allow-oom shebang flag`): a script without a shebang has its
    first write refused, reads pass; with a shebang it is refused before it runs unless it
    is no-writes or allow-oom; allow-oom's writes pass; a function likewise by its flags."""
    lib = ("#!lua name=oom\n"
           "redis.register_function{function_name='oom_w', callback=function(keys) "
           "return redis.call('set', keys[1], 'w') end}\n"
           "redis.register_function{function_name='oom_a', callback=function(keys) "
           "return redis.call('set', keys[1], 'a') end, flags={'allow-oom'}}\n"
           "redis.register_function{function_name='oom_r', callback=function(keys) "
           "return redis.call('get', keys[1]) end, flags={'no-writes'}}\n")
    steps = [
        S("SET", key, "123"), S("FUNCTION", "LOAD", "REPLACE", lib),
        S("CONFIG", "SET", "maxmemory", "1"),
        S("EVAL", "redis.call('set', KEYS[1], 1) return 1", "1", key),
        S("EVAL", "return redis.pcall('set', KEYS[1], 1)", "1", key),
        S("EVAL", "return redis.call('get', KEYS[1])", "1", key),
        S("EVAL", "#!lua flags=\nreturn 1", "0"), S("EVAL", "#!lua\nreturn 1", "0"),
        S("EVAL", "#!lua flags=allow-oom\nreturn redis.call('set', KEYS[1], 'oom')", "1", key),
        S("EVAL", "#!lua flags=no-writes\nreturn redis.call('get', KEYS[1])", "1", key),
        S("EVAL_RO", "#!lua flags=no-writes\nreturn redis.call('get', KEYS[1])", "1", key),
        S("EVAL_RO", "return redis.call('get', KEYS[1])", "1", key),
        # the first write decides: past it the script cannot be stopped half way
        S("EVAL", "redis.call('del', KEYS[1] .. 'none') return redis.call('set', KEYS[1], 2)",
          "1", key),
        S("FCALL", "oom_w", "1", key), S("FCALL", "oom_a", "1", key),
        S("FCALL", "oom_r", "1", key), S("FCALL", "nosuch", "1", key),
    ]
    try:
        differ.check(steps)
    finally:
        differ.check([S("CONFIG", "SET", "maxmemory", "0"), S("FUNCTION", "DELETE", "oom")])


def test_error_reply_api(differ: Any) -> None:
    differ.check([
        S("EVAL", "return redis.error_reply('')", "0"),
        S("EVAL", "return redis.error_reply('single')", "0"),
        S("EVAL", "return redis.error_reply('two words')", "0"),
        S("EVAL", "return redis.error_reply('-FOO bar')", "0"),
        S("EVAL", "return redis.error_reply('a\\r\\n')", "0"),
        S("EVAL", "return redis.error_reply('single').err", "0"),
        S("EVAL", "return redis.error_reply()", "0"),
        S("EVAL", "return redis.error_reply(1)", "0"),
        S("EVAL", "return {pcall(redis.error_reply, 1)}", "0"),
        S("EVAL", "return redis.status_reply(1)", "0"),
        S("EVAL", "return redis.status_reply('A', 'B')", "0"),
        S("EVAL", "return redis.status_reply('-x')", "0"),
        S("EVAL", "local t = redis.pcall('set', 'x') local n = 0 "
          "for k in pairs(t) do n = n + 1 end return {n, t.ignore_error_stats_update}", "0"),
    ])


# (maxmemory, command, commands whose commandstats are compared): Valkey's `Consistent eval
# error reporting` and more (errorstats, total_error_replies, calls/rejected/failed)
STATS = [
    ("1", ("EVAL", "return redis.call('set','x','y')", "1", "x"), ("set", "eval")),
    ("1", ("EVAL", "local t = redis.pcall('set','x','y') return 1", "1", "x"), ("set", "eval")),
    ("1", ("EVAL", "return redis.pcall('set','x','y')", "1", "x"), ("set", "eval")),
    ("1", ("EVAL", "#!lua\nreturn 1", "0"), ("eval",)),
    ("0", ("EVAL", "return redis.call('select',99)", "0"), ("select", "eval")),
    ("0", ("EVAL", "local t = redis.pcall('select',99) return 1", "0"), ("select", "eval")),
    ("0", ("EVAL_RO", "return redis.call('set','x','y')", "1", "x"), ("set", "eval_ro")),
    ("0", ("EVAL_RO", "local t = redis.pcall('set','x','y') return 1", "1", "x"),
     ("set", "eval_ro")),
    ("0", ("EVAL", "return redis.error_reply('MY_ERR_CODE custom msg')", "0"), ("eval",)),
    ("0", ("EVAL", "return redis.error_reply('')", "0"), ("eval",)),
    ("0", ("EVAL", "return redis.status_reply('MY_OK_CODE')", "0"), ("eval",)),
    ("0", ("EVAL", "redis.pcall('nosuch') return 1", "0"), ("eval",)),
    ("0", ("EVAL", "redis.pcall('set', 'a') return 1", "0"), ("set", "eval")),
    ("0", ("EVAL", "error('x')", "0"), ("eval",)),
    ("0", ("EVAL", "return {redis.pcall('select', 99)}", "0"), ("select", "eval")),
    ("0", ("EVAL", "return {redis.error_reply('X y'), {err='Z q'}, redis.pcall('select', 99)}",
           "0"), ("select", "eval")),
]


def _stats(r: redis.Redis, commands: tuple[str, ...]) -> dict[str, Any]:
    out: dict[str, Any] = dict(r.info("errorstats"))
    out["total_error_replies"] = r.info("stats")["total_error_replies"]
    cmdstats = r.info("commandstats")
    for c in commands:
        st = cmdstats.get(f"cmdstat_{c}")
        out[c] = st and (st["calls"], st["rejected_calls"], st["failed_calls"])
    return out


@pytest.mark.parametrize(("maxmemory", "argv", "commands"), STATS)
def test_script_error_stats(targets: list[Target], maxmemory: str, argv: tuple[str, ...],
                            commands: tuple[str, ...]) -> None:
    seen = []
    for t in targets:
        r = _client(t)
        try:
            r.config_set("maxmemory", maxmemory)
            r.config_resetstat()
            try:
                r.execute_command(*argv)
            except redis.ResponseError:
                pass
            seen.append(_stats(r, commands))
        finally:
            r.config_set("maxmemory", "0")
            r.close()
    assert all(s == seen[0] for s in seen), seen


def test_call_with_many_arguments(differ: Any, key: str) -> None:
    """Valkey's `Script check unpack with massive arguments`: ~8,000 arguments to one call."""
    differ.check([
        S("EVAL", "local a = {} for i=1,7999 do a[i] = 1 end return redis.call('exists', unpack(a))",
          "0"),
        S("EVAL", "local a = {} for i=1,7998 do a[i] = tostring(i) end "
          "return redis.call('xadd', KEYS[1], '*', unpack(a))", "1", key),
        S("XLEN", key),
        S("EVAL", "local a = {} for i=1,100 do a[i] = 1 end a[50] = nil "
          "return redis.pcall('exists', unpack(a, 1, 100))", "0"),
    ])


def test_cjson_options(differ: Any) -> None:
    """lua-cjson's settings (they last for the script that set them: Redis keeps them until
    SCRIPT FLUSH) and its encoder's rules (Valkey's `EVAL - JSON smoke test`)."""
    differ.check([
        S("SCRIPT", "FLUSH"),
        S("EVAL", "local t = {} t[false] = 'f' return {pcall(cjson.encode, t)}", "0"),
        S("EVAL", "local x = cjson.encode({[true]=1})", "0"),
        S("EVAL", "return cjson.encode({[1.5]=1, [2]=2, [-1]=3})", "0"),
        S("EVAL", "return cjson.encode({a={1,2,{b=true}}, s='x/y\\1\\127\\200'})", "0"),
        S("EVAL", "return cjson.encode({1, 2.5, 1e20, 1/3, 123456789012345678})", "0"),
        S("EVAL", "return cjson.encode({{}, {cjson.null}})", "0"),
        S("EVAL", "return {pcall(cjson.encode, {[1]=1, [30]=3})}", "0"),
        S("EVAL", "return {pcall(cjson.encode, function() end)}", "0"),
        S("EVAL", "return {pcall(cjson.encode)}", "0"),
        S("EVAL", "return {pcall(cjson.encode, {n=0/0})}", "0"),
        S("EVAL", "local t = {} t[1] = t return {pcall(cjson.encode, t)}", "0"),
        S("EVAL", "local t = {} local c = t for i=1,999 do c[1] = {} c = c[1] end "
          "return #cjson.encode(t)", "0"),
        S("EVAL", "return {cjson.encode_max_depth(), cjson.decode_max_depth(), "
          "cjson.encode_invalid_numbers(), cjson.encode_number_precision(), "
          "cjson.encode_sparse_array()}", "0"),
        S("EVAL", "local s = string.rep('[', 1001) .. string.rep(']', 1001) "
          "return {pcall(cjson.decode, s)}", "0"),
        S("EVAL", "cjson.encode_max_depth(1) return {pcall(cjson.encode, {a={1}})}", "0"),
        # Redis keeps a setting until SCRIPT FLUSH; topicsrv puts it back after each script
        S("EVAL", "return cjson.encode_max_depth()", "0", diff="script-settings-reset"),
        S("EVAL", "cjson.decode_max_depth(1) "
          "return {pcall(cjson.decode, '{\"obj\": {\"a\": [1]}}')}", "0"),
        S("EVAL", "cjson.encode_invalid_numbers(true) return cjson.encode({0/0, 1/0, -1/0})",
          "0"),
        S("EVAL", "cjson.encode_invalid_numbers('null') return {cjson.encode({0/0}), "
          "cjson.encode_invalid_numbers()}", "0"),
        # (through pcall Lua names the function '?' in these: not compared)
        S("EVAL", "local x = cjson.encode_invalid_numbers('x')", "0"),
        S("EVAL", "local x = cjson.encode_max_depth(0)", "0"),
        S("EVAL", "local x = cjson.encode_max_depth('a')", "0"),
        S("EVAL", "cjson.encode_number_precision(3) return cjson.encode(1/3)", "0"),
        S("EVAL", "return {cjson.encode_sparse_array(true, 3, 5)}", "0"),
        S("EVAL", "return cjson.encode({[1]=1, [30]=3})", "0", diff="script-settings-reset"),
        S("EVAL", "cjson.encode_sparse_array(true, 3, 5) return cjson.encode({[1]=1, [30]=3})",
          "0"),
        S("SCRIPT", "FLUSH"),
        S("EVAL", "return cjson.encode_max_depth()", "0"),
    ])


def test_loadstring(differ: Any) -> None:
    """Redis 7.0's loadstring: text compiles into the script's globals, bytecode is refused
    (Valkey's `Binary code loading failed`)."""
    differ.check([
        S("EVAL", "return loadstring(string.dump(function() return 1 end))()", "0"),
        S("EVAL", "local f, e = loadstring(string.dump(function() return 1 end)) "
          "return {tostring(f), e}", "0"),
        S("EVAL", "local f, e = loadstring('return (', 'chunk') return {tostring(f), e}", "0"),
        S("EVAL", "return {pcall(loadstring('return x'))}", "0"),
        S("EVAL", "return {pcall(loadstring('x = 1'))}", "0"),
        S("EVAL", "return loadstring('return KEYS[1], 1 + 1')()", "1", "kk"),
        S("EVAL", "return {pcall(loadstring, 1)}", "0"),
        S("EVAL", "return {pcall(loadstring)}", "0"),
        S("EVAL", "return {pcall(loadstring, {})}", "0"),
        S("EVAL", "local x = loadstring('local y = nil\\nreturn y.z')()", "0"),
    ])


def test_info_memory_script_counts(targets: list[Target]) -> None:
    """INFO memory's number_of_cached_scripts and number_of_functions count what is loaded
    (Valkey's `SCRIPTING FLUSH ASYNC`)."""
    seen = []
    for t in targets:
        r = _client(t)
        try:
            r.script_flush()
            r.function_flush()
            before = r.info("memory")["number_of_cached_scripts"]
            for i in range(10):
                r.script_load(f"return {i}")
            r.function_load("#!lua name=memlib\nredis.register_function('mf1', function() end)\n"
                            "redis.register_function('mf2', function() end)")
            mem = r.info("memory")
            loaded = (mem["number_of_cached_scripts"], mem["number_of_functions"],
                      mem["used_memory_vm_eval"] > 0, mem["used_memory_vm_functions"] > 0)
            r.script_flush("ASYNC")
            r.function_flush()
            mem = r.info("memory")
            seen.append((before, loaded, mem["number_of_cached_scripts"],
                         mem["number_of_functions"]))
        finally:
            r.close()
    assert all(s == seen[0] for s in seen), seen
    assert seen[0][1][:2] == (10, 2)


def test_a_client_connects_while_a_script_is_busy(targets: list[Any]) -> None:
    """Past busy-reply-threshold, the commands Redis flags `allow-busy` run (HELLO, AUTH,
    RESET, MULTI, WATCH, ...) and every other command answers BUSY, the same on both servers;
    so a new redis-py 8 client, which connects with HELLO 3, connects and reads BUSY."""
    import threading
    import time

    probes = [("HELLO", "3"), ("AUTH", "nobody-configured"), ("RESET",), ("MULTI",),
              ("DISCARD",), ("WATCH", "k"), ("UNWATCH",), ("CLIENT", "SETNAME", "x"),
              ("GET", "k"), ("SELECT", "0"), ("PING",)]
    seen: dict[str, list[str]] = {}
    for t in targets:
        admin = redis.Redis(port=t.port, socket_timeout=20)
        admin.config_set("busy-reply-threshold", 50)
        runner = threading.Thread(target=_swallow, args=(t.port,), daemon=True)
        runner.start()
        deadline = time.monotonic() + 10
        while not _busy(admin):
            assert time.monotonic() < deadline, f"{t.name}: never BUSY"
            time.sleep(0.01)
        try:
            fresh = redis.Redis(port=t.port, socket_timeout=10, protocol=3)
            with pytest.raises(redis.ResponseError, match="^BUSY "):
                fresh.get("k")  # connected (HELLO 3 ran), then BUSY
            raw = t.conn()
            out = []
            for probe in probes:
                kind, value = raw.call(*probe)[:2]
                out.append(value.split(" ", 1)[0] if kind == "-" else kind)
            raw.close()
            seen[t.name] = out
        finally:
            assert admin.script_kill() is True
            runner.join(10)
            admin.config_set("busy-reply-threshold", 5000)
    # HELLO (a map), AUTH (no password set: an error, not BUSY), RESET, MULTI, DISCARD, WATCH,
    # UNWATCH run; CLIENT SETNAME, GET, SELECT and PING read BUSY
    assert seen["redis"] == ["%", "ERR", "+", "+", "+", "+", "+"] + ["BUSY"] * 4
    if "topicsrv" in seen:
        assert seen["topicsrv"] == seen["redis"]


def _busy(r: redis.Redis) -> bool:
    try:
        r.ping()
    except redis.ResponseError as e:
        return str(e).startswith("BUSY")
    return False


def _swallow(port: int) -> None:
    """Run a script that loops until SCRIPT KILL (its error reply is expected)."""
    try:
        redis.Redis(port=port, socket_timeout=20).eval("local n = 0 while true do n = n + 1 end", 0)
    except redis.RedisError:
        pass
