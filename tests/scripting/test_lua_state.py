"""The Lua state without a server (topicsrv/scripting/lua.py): the sandbox, the reply
conversions both ways, the memory cap, kill, and redis.call through a Caller."""

from __future__ import annotations

from typing import Any

import pytest

from topicsrv.scripting.lua import LuaState, Run, ScriptError


def _caller(seen: list[list[bytes]], reply: bytes = b"+OK\r\n") -> Any:
    def call(argv: list[bytes], run: Run) -> tuple[bool, bytes]:
        seen.append(argv)
        return True, reply
    return call


def run(state: LuaState, body: str, keys: list[bytes] | None = None,
        args: list[bytes] | None = None, *, resp3: bool = False,
        caller: Any = None, read_only: bool = False) -> bytes:
    sha = state.load(body.encode())
    r = Run(sha, False, read_only, caller or _caller([]))
    value = state.call(r, state.scripts[sha], keys or [], args or [])
    return state.reply(value, resp3, r.resp, 1 << 20)[0]


@pytest.fixture(scope="module")
def state() -> LuaState:
    return LuaState(32 << 20)


def test_sandbox_refuses_globals_and_hides_the_os(state: LuaState) -> None:
    with pytest.raises(ScriptError, match=r"^ERR .*Attempt to modify a readonly table"):
        run(state, "x = 1")
    with pytest.raises(ScriptError, match=r"nonexistent global variable 'os'"):
        run(state, "return os.time()")
    with pytest.raises(ScriptError, match=r"nonexistent global variable 'loadfile'"):
        run(state, "return loadfile('/etc/passwd')")
    with pytest.raises(ScriptError, match=r"readonly table"):
        run(state, "string.rep = nil")
    with pytest.raises(ScriptError, match=r"nonexistent global variable 'io'"):
        run(state, "return io")


def test_conversions_lua_to_resp(state: LuaState) -> None:
    assert run(state, "return {1, 2, 3.7, 'a', nil, 5}") == (
        b"*4\r\n:1\r\n:2\r\n:3\r\n$1\r\na\r\n")  # floats truncate, nil ends the array
    assert run(state, "return {err='My err'}") == b"-My err\r\n"
    assert run(state, "return redis.status_reply('FINE')") == b"+FINE\r\n"
    assert run(state, "return true") == b":1\r\n"
    assert run(state, "return false") == b"$-1\r\n"
    assert run(state, "return false", resp3=True) == b"_\r\n"
    assert run(state, "redis.setresp(3); return false", resp3=True) == b"#f\r\n"
    assert run(state, "redis.setresp(3); return {double=3.5}", resp3=True) == b",3.5\r\n"
    assert run(state, "redis.setresp(3); return {map={a=1}}", resp3=True) == (
        b"%1\r\n$1\r\na\r\n:1\r\n")
    assert run(state, "return KEYS[1] .. ARGV[1] .. #KEYS .. #ARGV", [b"k"], [b"a", b"b"]) == (
        b"$4\r\nka12\r\n")


def test_conversions_resp_to_lua_through_redis_call(state: LuaState) -> None:
    seen: list[list[bytes]] = []
    nested = b"*3\r\n:7\r\n$2\r\nhi\r\n*1\r\n$-1\r\n"
    assert run(state, "local r = redis.call('x', 1, 2.5, 'y'); return {r[1], r[2], type(r[3][1])}",
               caller=_caller(seen, nested)) == b"*3\r\n:7\r\n$2\r\nhi\r\n$7\r\nboolean\r\n"
    assert seen == [[b"x", b"1", b"2.5", b"y"]]
    assert run(state, "return redis.pcall('x')", caller=_caller([], b"-WRONGTYPE no\r\n")) == \
        b"-WRONGTYPE no\r\n"


def test_a_script_past_its_memory_cap_fails_and_the_state_lives() -> None:
    state = LuaState(16 << 20)
    with pytest.raises(ScriptError, match=r"not enough memory"):
        run(state, "local t = {} for i = 1, 10000000 do t[i] = string.rep('x', 64) .. i end "
                   "return #t")
    assert run(state, "return string.rep('y', 3)") == b"$3\r\nyyy\r\n"


def test_kill_flag_ends_a_runaway_loop() -> None:
    state = LuaState(16 << 20)
    sha = state.load(b"local n = 0 while true do n = n + 1 end")
    r = Run(sha, False, False, _caller([]))
    r.kill = True  # as SCRIPT KILL sets it; the count hook checks it
    with pytest.raises(ScriptError, match=r"^ERR Script killed by user with SCRIPT KILL\.\.\."):
        state.call(r, state.scripts[sha], [], [])


def test_kill_is_not_swallowed_by_a_pcall_loop() -> None:
    """Once killed the hook raises on every line of user code (as Redis), so the next line
    outside the pcall ends the script."""
    state = LuaState(16 << 20)
    sha = state.load(b"local f = function() while 1 do end end while 1 do pcall(f) end")
    r = Run(sha, False, False, _caller([]))
    r.kill = True
    with pytest.raises(ScriptError, match=r"^ERR Script killed by user with SCRIPT KILL\.\.\."):
        state.call(r, state.scripts[sha], [], [])


def test_a_recursive_table_reply_ends_in_the_stack_limit_error(state: LuaState) -> None:
    out = run(state, "local a = {}; local b = {a}; a[1] = b; return a")
    head, _, tail = out.rpartition(b"-ERR reached lua stack limit\r\n")
    assert tail == b""
    assert head == b"*1\r\n" * 301


@pytest.mark.parametrize("body", ["setmetatable(_G, {})",
                                  "local g = getmetatable(_G) g.__index = {}",
                                  "setmetatable(redis, {})"])
def test_a_protected_tables_metatable_is_read_only(state: LuaState, body: str) -> None:
    with pytest.raises(ScriptError, match="Attempt to modify a readonly table"):
        run(state, body)


def test_cmsgpack_unpack_one_and_limit_walk_the_values(state: LuaState) -> None:
    out = run(state, """
    local data = cmsgpack.pack('a', 'bb', 3)
    local off, x = cmsgpack.unpack_one(data, 0)
    local off2, y, z = cmsgpack.unpack_limit(data, 0, off)
    cjson.encode_keep_buffer(false)
    return {off, x, off2, y, z}""")
    assert out == b"*5\r\n:2\r\n$1\r\na\r\n:-1\r\n$2\r\nbb\r\n:3\r\n"


def test_cmsgpack_packs_a_self_referencing_table_16_deep(state: LuaState) -> None:
    out = run(state, """
    local a = {y = 5} local b = {x = a} a.x = b
    local re = cmsgpack.unpack(cmsgpack.pack(a))
    return {re.x.x.x.x.x.x.x.x.x.x.x.x.x.x.y, type(re.x.x.x.x.x.x.x.x.x.x.x.x.x.x.x.x)}""")
    assert out == b"*2\r\n:5\r\n$3\r\nnil\r\n"


def test_garbage_does_not_pile_up_over_many_runs() -> None:
    """A collector step every GC_PERIOD runs (Redis's): 10,000 runs that each make garbage
    leave the state near its fresh size (Valkey's `EVAL does not leak in the Lua stack`
    checks used_memory_lua < 100 KB)."""
    fresh = LuaState()
    assert fresh.memory_used() < 100 * 1024  # a fresh state too (its setup's garbage is gone)
    for _ in range(10_000):
        run(fresh, "local t = {1, 2, 3, 'x'} return redis.call('incr', KEYS[1])", [b"x"],
            caller=_caller([], b":1\r\n"))
    assert fresh.memory_used() < 100 * 1024
