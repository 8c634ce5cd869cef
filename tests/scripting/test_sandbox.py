"""The script sandbox as a hostile script sees it (issue 34, docs/security.md "Scripts").

What a sandbox hands out, not only what it blocks: every function a script can reach is
called with hostile arguments under pcall, and no result and no error may be a Python
object (userdata other than cjson.null); no table or metatable a script can reach keeps a
change into the next script; the memory cap holds across every library call-back.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from tests.resp.conftest import InProc, start_inproc
from topicsrv.scripting.lua import LuaState, Run, ScriptError

LIBRARIES = {  # the functions each library must offer (the enumeration is checked against it)
    "redis": {"call", "pcall", "log", "sha1hex", "error_reply", "status_reply", "setresp",
              "set_repl", "replicate_commands", "breakpoint", "debug", "acl_check_cmd"},
    "cjson": {"encode", "decode", "encode_keep_buffer", "encode_max_depth", "decode_max_depth",
              "encode_number_precision", "encode_invalid_numbers", "encode_sparse_array"},
    "cmsgpack": {"pack", "unpack", "unpack_limit", "unpack_one"},
    "struct": {"pack", "unpack", "size"},
    "bit": {"tobit", "tohex", "bnot", "band", "bor", "bxor", "lshift", "rshift", "arshift",
            "rol", "ror", "bswap"},
    "string": {"byte", "char", "find", "format", "gmatch", "gsub", "len", "lower", "match",
               "rep", "reverse", "sub", "upper"},
    "math": {"abs", "floor", "ceil", "sqrt", "random", "max", "min", "pow", "fmod", "log"},
    "table": {"concat", "insert", "remove", "sort"},
    "_G": {"assert", "error", "getmetatable", "ipairs", "next", "pairs", "pcall", "rawequal",
           "rawget", "rawset", "select", "setmetatable", "tonumber", "tostring", "type",
           "unpack", "xpcall", "loadstring"},
}

# Every function of every library, called with each argument list under pcall; `bad` collects
# each call whose result or error is (or holds) a userdata that is not cjson.null.
HOSTILE = rb"""
local big = string.rep('x', 10 * 1024 * 1024)
local trap = setmetatable({}, {__index = function() error('trap') end,
                               __newindex = function() error('trap') end,
                               __tostring = function() error('trap') end})
local args = {
  {}, {nil}, {0/0}, {1/0}, {-1/0}, {2^63}, {-2^63}, {1e308}, {-1}, {0}, {{}}, {trap},
  {function() end}, {cjson.null}, {true}, {big}, {'7'}, {'0x10'}, {'c300000000', 'a'},
  {'i', {}}, {0/0, 'x'}, {1/0, 'x'}, {'x', 0/0}, {'x', 1/0}, {{}, {}}, {big, big},
  {'nosuch'}, {'PING'}, {'%s', trap}, {1, 2, 3, 4, 5, 6, 7, 8}, {'<i4', 0/0},
  {'>!4 i3 c0', 2, 'ab'}, {'\219\0\0\0\16ab'}, {'\199\0\1'}, {'[1e999999]'},
}
local skip = {
              ["string.rep"] = 'capped', ["_G.unpack"] = 'capped'}
local function scan(v, depth, seen)
  local kind = type(v)
  if kind == 'userdata' then return rawequal(v, cjson.null) end
  if kind ~= 'table' or depth > 3 or seen[v] then return true end
  seen[v] = true
  local n = 0
  for k, x in pairs(v) do
    n = n + 1
    if n > 200 then break end
    if not scan(k, depth + 1, seen) or not scan(x, depth + 1, seen) then return false end
  end
  return true
end
local libs = {redis = redis, cjson = cjson, cmsgpack = cmsgpack, struct = struct, bit = bit,
              string = string, math = math, table = table, _G = _G}
local bad, calls, seen_names = {}, 0, {}
for lname, lib in pairs(libs) do
  for fname, f in pairs(lib) do
    local name = lname .. '.' .. fname
    if type(f) == 'function' and skip[name] ~= true then
      seen_names[#seen_names + 1] = name
      for i, a in ipairs(args) do
        local n = #a
        if a[1] == nil and i == 2 then n = 1 end
        if skip[name] == 'capped' and (type(a[2]) == 'number' or type(a[1]) == 'number') then
          -- string.rep / unpack with a huge count only fill the memory cap: once is enough
          if i ~= 6 then n = -1 end
        end
        if n >= 0 then
          calls = calls + 1
          local r = {pcall(f, unpack(a, 1, n))}
          if not scan(r, 0, {}) then bad[#bad + 1] = name .. ' #' .. i end
        end
      end
    end
  end
end
return {calls, table.concat(bad, ' '), table.concat(seen_names, ' ')}
"""


def _run(state: LuaState, code: bytes, caller: object = None) -> object:
    def echo(argv: list[bytes], run: Run) -> tuple[bool, bytes]:
        if argv[0].upper() == b"PING":
            return True, b"+PONG\r\n"
        return False, b"ERR unknown command"

    run = Run(name="t", function=False, read_only=True, caller=caller or echo)  # type: ignore[arg-type]
    sha = state.load(code)
    return state.call(run, state.scripts[sha], [], [])


def _reply(state: LuaState, value: object) -> bytes:
    return state.reply(value, False, 2, 1 << 30)[0]


def test_no_python_object_reaches_a_script_from_any_function() -> None:
    state = LuaState(64 << 20)
    out = _run(state, HOSTILE)
    calls, bad, names = (out[1], out[2], out[3])  # type: ignore[index]
    seen = set(names.decode().split())
    for lib, funcs in LIBRARIES.items():
        missing = {f"{lib}.{f}" for f in funcs} - seen
        assert not missing, f"not enumerated (pairs over the library): {missing}"
    assert calls > 3000
    assert bad == b"", f"userdata handed to the script by: {bad.decode()}"
    assert _reply(state, _run(state, b"return 'alive'")) == b"$5\r\nalive\r\n"


def test_the_issue_reproducer_finds_no_exception_object() -> None:
    """The escape of issue 34: the error of redis.log / acl_check_cmd was the Python exception,
    whose attributes led to builtins.eval."""
    state = LuaState()
    code = rb"""
    local out = {}
    for _, f in ipairs({function() return redis.log(0/0, 'x') end,
                        function() return redis.log(1/0, 'x') end,
                        function() return redis.acl_check_cmd() end,
                        function() return redis.acl_check_cmd('nosuch') end}) do
      local ok, e = pcall(f)
      out[#out + 1] = type(e)
      if type(e) == 'table' then out[#out + 1] = e.err end
      local walked = pcall(function() return e.__class__.__mro__ end)
      out[#out + 1] = tostring(walked)
    end
    return out
    """
    got = _reply(state, _run(state, code))
    assert b"userdata" not in got
    assert b"ERR Invalid debug level." in got
    assert b"ERR Please specify at least one argument for this redis lib call" in got


def test_python_attribute_access_is_refused_outright() -> None:
    """The backstop behind the bridge: even a Python object handed to Lua past it has no
    attribute a script could walk."""
    state = LuaState()
    probe = state.rt.eval(
        "function(o) local ok, v = pcall(function() return o.__class__ end) "
        "local ok2 = pcall(function() o.x = 1 end) return ok, ok2 end")
    assert probe(ValueError("x")) == (False, False)


READONLY = [
    ("getmetatable('').__index.upper = function() return 'x' end", "string method"),
    ("getmetatable('').__index = {}", "string metatable"),
    ("getmetatable('').__call = tostring", "string metatable field"),
    ("rawset(getmetatable(''), '__index', {})", "rawset on the string metatable"),
    ("string.upper = nil", "string library"),
    ("rawset(string, 'upper', nil)", "rawset on a library"),
    ("setmetatable(string, {})", "library metatable"),
    ("getmetatable(string).__index = {}", "library metatable field"),
    ("_G.x = 1", "_G"),
    ("x = 1", "a global"),
    ("redis.call = nil", "redis"),
    ("cjson.encode = nil", "cjson"),
    ("table.insert = nil", "table"),
    ("math.floor = nil", "math"),
    ("bit.band = nil", "bit"),
]


@pytest.mark.parametrize("code,what", READONLY, ids=[w for _, w in READONLY])
def test_nothing_a_script_changes_survives_into_another(code: str, what: str) -> None:
    state = LuaState()
    with pytest.raises(ScriptError) as e:
        _run(state, code.encode())
    assert "Attempt to modify a readonly table" in e.value.text or \
        "Script attempted to create global variable" in e.value.text or \
        "readonly" in e.value.text, e.value.text
    assert _reply(state, _run(state, b"return ('ab'):upper()")) == b"$2\r\nAB\r\n"
    assert _reply(state, _run(state, b"return tostring(getmetatable('').__index == string)")) \
        == b"$4\r\ntrue\r\n"


def test_library_settings_do_not_outlive_the_script() -> None:
    state = LuaState()
    _run(state, b"cjson.encode_max_depth(1) cjson.encode_invalid_numbers(true) return 1")
    assert _reply(state, _run(state, b"return cjson.encode_max_depth()")) == b":1000\r\n"
    with pytest.raises(ScriptError, match="Cannot serialise number"):
        _run(state, b"return cjson.encode(0/0)")


def test_libraries_enumerate_and_read_through_their_views() -> None:
    state = LuaState()
    got = _reply(state, _run(state, b"local n = 0 for k in pairs(string) do n = n + 1 end "
                                    b"return {n, type(rawget(string, 'upper')), "
                                    b"type(next(redis))}"))
    assert got == b"*3\r\n:15\r\n$8\r\nfunction\r\n$6\r\nstring\r\n"


@pytest.mark.parametrize("code,want", [
    # lua-struct's own check (Redis: the same text), not a 300 MB allocation
    ("return {pcall(struct.pack, 'c300000000', 'a')}",
     b"*2\r\n$-1\r\n$41\r\nbad argument #3 to '?' (string too short)\r\n"),
    ("return {pcall(struct.pack, 'c20000000', string.rep('a', 20000000))}", None),
    ("return {pcall(cjson.encode, string.rep('\\1', 6000000))}", None),
    ("return {pcall(cjson.decode, '[' .. string.rep('[],', 1000000) .. '[]]')}", None),
    ("return {pcall(redis.call, 'BIG')}", None),
])
def test_a_value_past_the_memory_cap_is_an_error_never_a_hang(code: str, want: bytes | None
                                                              ) -> None:
    """Issue 34 item 3: a helper's value past the script memory cap failed inside lupa's
    call-back and hung the process; now it is Lua's "not enough memory" (or the library's
    own error) and the state goes on."""
    state = LuaState(24 << 20)
    big = b"$%d\r\n%s\r\n" % (30 << 20, b"x" * (30 << 20))

    def caller(argv: list[bytes], run: Run) -> tuple[bool, bytes]:
        return True, big

    try:
        got = _reply(state, _run(state, code.encode(), caller))
    except ScriptError as e:
        got = e.text.encode()
    if want is not None:
        assert got == want
    else:
        assert b"not enough memory" in got or b"reply too large for the script memory" in got
    assert _reply(state, _run(state, b"return #cjson.encode({1, 2, 3})")) == b":7\r\n"


NEAR_CAP = rb"""
local t, packed, s = {1, 2}, cmsgpack.pack({1, 2}), 'abc'
local calls = {{cjson.encode, t}, {redis.call, 'PING'}, {struct.pack, 'i', 7},
               {cmsgpack.unpack, packed}, {cjson.decode, '[1,2,3]'}, {bit.tohex, 7},
               {redis.sha1hex, s}, {struct.unpack, 'bbb', s}, {redis.pcall, 'PING'},
               {redis.call, 'ECHO', s}, {redis.pcall, 'ECHO', 7}}  -- these two skip `enter`
local head = nil
local n, errors = 0, 0
pcall(function() while true do head = {head} end end)
for i = 1, 60 do
  for _, call in ipairs(calls) do
    if pcall(call[1], call[2], call[3]) then n = n + 1 else errors = errors + 1 end
  end
end
return n * 10000 + errors  -- a number: the reply allocates nothing in a full state
"""


def test_helpers_near_the_cap_never_hang() -> None:
    """The state filled to within a few bytes of its cap (a linked list of small tables),
    then every kind of call-back many times, redis.call with string and number arguments
    (which lifts the cap in its call-back, sandbox.lua Rule 5) included: each answers, with a
    value or an error, and the script and the state go on."""
    state = LuaState(16 << 20)
    got = _run(state, NEAR_CAP)
    n, errors = divmod(int(got), 10000)  # type: ignore[call-overload]
    assert n + errors == 660 and errors > 0
    assert _reply(state, _run(state, b"return 'next'")) == b"$4\r\nnext\r\n"


@pytest.mark.parametrize("code,want", [
    ("error(nil)", "ERR nil script: t, on @user_script:1."),
    ("error({err=1})", "1 script: t, on @user_script:1."),
    ("error(true)", "ERR true script: t, on @user_script:1."),
    ("error({})", "ERR unknown error script: t, on @user_script:1."),
])
def test_error_values_show_as_redis_shows_them(code: str, want: str) -> None:
    with pytest.raises(ScriptError) as e:
        _run(LuaState(), code.encode())
    assert e.value.text == want


def test_error_of_a_function_names_it_as_lua_does() -> None:
    with pytest.raises(ScriptError) as e:
        _run(LuaState(), b"error(function() end)")
    assert e.value.text.startswith("ERR function: 0x")
    assert "Lua table" not in e.value.text and "None" not in e.value.text


def test_low_items_match_redis() -> None:
    state = LuaState()
    assert _reply(state, _run(state, b"return tostring(cjson.decode('[1e999999]')[1])")) == \
        b"$3\r\ninf\r\n"
    got = _reply(state, _run(state, b"return {pcall(cmsgpack.unpack, '\\219\\0\\0\\0\\16ab')}"))
    assert got == b"*2\r\n$-1\r\n$23\r\nMissing bytes in input.\r\n"


# ---- the real server: the read-only user over RESP --------------------------------------------

PW, RT = "s3cret", "read-only-token"


@pytest.fixture(scope="module")
def srv() -> Iterator[InProc]:
    s, stop = start_inproc(requirepass=PW, read_token=RT)
    yield s
    stop()


def test_reader_gets_no_host_object_and_cannot_plant_a_string_method(srv: InProc) -> None:
    reader = redis.Redis(port=srv.port, username="reader", password=RT, socket_timeout=10)
    admin = redis.Redis(port=srv.port, password=PW, socket_timeout=10)
    ro = "#!lua flags=no-writes\n"
    got = reader.execute_command(
        "EVAL_RO", ro + "local ok, e = pcall(redis.log, 0/0, 'x') "
        "return {type(e), tostring(pcall(function() return e.__class__.__mro__ end))}", 0)
    assert got[0] == b"table"
    with pytest.raises(redis.ResponseError, match="Attempt to modify a readonly table"):
        reader.execute_command(
            "EVAL_RO", ro + "getmetatable('').__index.upper = function() "
            "return redis.pcall('SET', 'pwned', '1') end return 1", 0)
    assert admin.eval("return ('x'):upper()", 0) == b"X"
    assert admin.exists("pwned") == 0
    # the exact hang of item 3: the server answers on both ports afterwards
    got = reader.execute_command(
        "EVAL_RO", ro + "return tostring(pcall(struct.pack, 'c300000000', 'a'))", 0)
    assert got == b"false"
    assert admin.ping() is True
