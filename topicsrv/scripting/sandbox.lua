-- The sandbox every script and function runs in (topicsrv/scripting/lua.py loads this once
-- per Lua state). Called with one table of Python helpers; returns the runner functions.
--
-- Rule 1: scripts see only what Redis 7 gives them: the base functions below, string, table,
-- math, cjson, cmsgpack, bit, struct and redis; never io, os, debug, require, loadfile,
-- dofile, load, print or coroutine. `loadstring` compiles text into the script's globals
-- and refuses bytecode as Redis 7.0's does (a chunk that starts with ESC is parsed as text,
-- so it fails: "unexpected symbol near 'char(27)'").
-- Rule 2: globals and library tables are read-only ("Attempt to modify a readonly table");
-- reading a global that does not exist is an error, as in Redis 7.
-- Rule 3: every run installs a count hook that asks Python whether SCRIPT KILL / FUNCTION
-- KILL asked the script to stop (the only way Lua code stops without returning).
-- Rule 4 (FUNCTION LOAD, Redis 7.0's library context): a library's top-level code sees one
-- global, `redis`, with register_function, log, the LOG_* levels and REDIS_VERSION[_NUM] only;
-- anything else it reads is "Script attempted to access nonexistent global variable". The
-- globals' lookup is switched for the load and back, so the functions it registers see the
-- normal globals when they run (and no register_function).
-- Rule 5 (scripting/bridge.py): Python is reached only through `cross` and `invoke` below.
-- Each call-back is preceded by `enter` (the memory cap lifted, bridge.py Rule 3), but for a
-- redis.call whose few arguments are all strings and numbers: those cross without Lua
-- allocating, so its call-back lifts the cap itself (`call_lifting`, one crossing less). A
-- call-back returns a status first; a failure is raised here as a Lua string, never a Python
-- object, and a value that is not a Lua string, number, boolean, nil, table or cjson.null is
-- refused.
-- Rule 6: nothing a script changes outlives it: every table and metatable a script can reach
-- (globals, the libraries, the string metatable) is read-only, and the library settings a
-- script may change (cjson's) are put back before the next run.
local py = ...
local debug_sethook, debug_getinfo = debug.sethook, debug.getinfo
local setmetatable, error, pcall, xpcall, type, tostring = setmetatable, error, pcall, xpcall, type, tostring
local loadstring, setfenv, rawget, rawequal, select = loadstring, setfenv, rawget, rawequal, select
local enter, leave, null = py.lift, py.cap, py.null
local HOST = "internal error in a script library (logged)"
-- kept alive for the state's life: Python pushes this text at the cap, and an interned
-- string is pushed without allocating (bridge.py Bridge.failure)
local NO_MEMORY = "not enough memory"
local PACKED = 2  -- many values cross as one table (bridge.py)
local FEW_ARGS = 8  -- a redis.call with at most this many arguments may skip `enter` (Rule 5)

-- values a call-back returned, checked (Rule 5); `level` positions a refusal
local function plain(v)
  if type(v) == "userdata" and not rawequal(v, null) then error(HOST, 0) end
  return v
end
local function checked(n, ...)
  for i = 1, n do plain((select(i, ...))) end
  return ...
end
-- what a raised error becomes when the call never reached its Python wrapper
local function host_error(e)
  leave()
  if type(e) == "string" then return e end
  return HOST
end

local function readonly_error()
  error("Attempt to modify a readonly table", 2)
end

-- a read-only view of t; `proxied` maps each view to its table, so that next, pairs and
-- rawget read through a view (as through Redis's read-only tables) without handing t out
local proxied = setmetatable({}, {__mode = "k"})
local function readonly(t)
  local view = setmetatable({}, {__index = t, __newindex = readonly_error, __metatable = false})
  proxied[view] = t
  return view
end

local base = {}
local real_getmetatable = getmetatable
for _, name in ipairs({"assert", "error", "getmetatable", "ipairs", "next", "pairs", "pcall",
                       "rawequal", "rawget", "select", "setmetatable", "tonumber", "tostring",
                       "type", "unpack", "xpcall", "gcinfo", "_VERSION"}) do
  base[name] = _G[name]
end
-- rawset is allowed only on tables the script made (a proxy has no raw keys to protect)
base.rawset = function(t, k, v)
  if getmetatable(t) == false then error("Attempt to modify a readonly table", 2) end
  return rawset(t, k, v)
end
-- a protected table's metatable is itself read-only (as Redis's readonly tables): changing it,
-- or a field of it, is "Attempt to modify a readonly table"
local protected_meta = readonly({})
base.getmetatable = function(t)
  local m = real_getmetatable(t)
  if m == false then return protected_meta end
  return m
end
base.setmetatable = function(t, m)
  if real_getmetatable(t) == false then error("Attempt to modify a readonly table", 2) end
  return setmetatable(t, m)
end

local function lib(t)
  local copy = {}
  for k, v in pairs(t) do copy[k] = v end
  return readonly(copy)
end
base.string, base.table, base.math = lib(string), lib(table), lib(math)
-- Rule 6: every string shares one metatable; its __index is the read-only copy above and
-- getmetatable('') answers a read-only view of it (CVE-2025-46818's class: a script that
-- replaced a string method would run it in a later script, with that script's rights)
do
  local string_meta = real_getmetatable("")
  string_meta.__index = base.string
  string_meta.__metatable = readonly(string_meta)
end
local real_next, real_rawget = next, rawget
base.next = function(t, k)
  local under = proxied[t]
  if under ~= nil then return real_next(under, k) end
  return real_next(t, k)
end
base.pairs = function(...)
  local t = ...
  local under = proxied[t]
  if under ~= nil then return function(_, k) return real_next(under, k) end, t, nil end
  if type(t) ~= "table" then
    local got = select("#", ...) == 0 and "no value" or type(t)
    error("bad argument #1 to 'pairs' (table expected, got " .. got .. ")", 2)
  end
  return real_next, t, nil
end
base.rawget = function(t, k)
  local under = proxied[t]
  if under ~= nil then return real_rawget(under, k) end
  return real_rawget(t, k)
end
-- the libraries written in Python raise Lua errors as Lua's C libraries do: a string
-- positioned at the caller (level 3: the wrapper's tail call to finish counts as level 2),
-- none when the caller is C (pcall)
local function finish(ok, status, ...)
  if not ok then error(host_error(status), 3) end
  if not status then error((...), 3) end
  if status == PACKED then
    local t, n = ...
    return checked(n, unpack(t, 1, n))
  end
  return checked(select("#", ...), ...)
end
-- redis.* functions written in Python fail as Redis's C ones do: an error table, no position
-- (they return one value, never PACKED)
local function redis_finish(ok, status, ...)
  if not ok then error({err = "ERR " .. host_error(status)}, 0) end
  if not status then error({err = "ERR " .. (...)}, 0) end
  return checked(select("#", ...), ...)
end
-- the one way a Python function becomes callable from a script (Rule 5)
local function cross(f, done)
  done = done or finish
  return function(...)
    enter()
    return done(pcall(f, ...))
  end
end
local function cross_redis(f) return cross(f, redis_finish) end
local function lua_errors(t)
  local out = {}
  for name, f in pairs(t) do
    if name == "null" then  -- cjson.null, the one value (Python callables are userdata)
      out[name] = f
    else
      out[name] = cross(f)
    end
  end
  return readonly(out)
end
base.cjson, base.cmsgpack = lua_errors(py.cjson), lua_errors(py.cmsgpack)
base.bit, base.struct = lua_errors(py.bit), lua_errors(py.struct)

local redis = {}
local pycall, pycall_packed, pycall_lifting = py.call, py.call_packed, py.call_lifting
-- a call with many arguments crosses as one table: lupa cannot take ~8,000 arguments on the
-- Lua stack of its Python call (Valkey's `Script check unpack with massive arguments`).
-- The Python side never raises and returns (ok, reply or error table) (Rule 5).
local function reply(ok, status, v)
  if not ok then return false, {err = "ERR " .. host_error(status)} end
  return status, plain(v)
end
local function invoke(...)
  local n = select("#", ...)
  if n <= FEW_ARGS then  -- Rule 5: strings and numbers only, the call-back lifts the cap
    local i = 1
    while i <= n do
      local t = type((select(i, ...)))
      if t ~= "string" and t ~= "number" then break end
      i = i + 1
    end
    if i > n then return reply(pcall(pycall_lifting, ...)) end
  end
  enter()
  if n > 64 then return reply(pcall(pycall_packed, {...}, n)) end
  return reply(pcall(pycall, ...))
end
redis.call = function(...)
  local ok, v = invoke(...)
  if not ok then error(v, 0) end
  return v
end
redis.pcall = function(...)
  local ok, v = invoke(...)
  return v
end
-- luaPushErrorBuff: "-CODE msg" keeps CODE, anything else gets ERR; \r\n trimmed off the ends
local function error_table(e)
  local code, msg = "ERR", e
  if e:sub(1, 1) == "-" then
    local space = e:find(" ", 1, true)
    if space then code, msg = e:sub(2, space - 1), e:sub(space + 1) else msg = e:sub(2) end
  end
  msg = msg:gsub("^[\r\n]+", ""):gsub("[\r\n]+$", "")
  return {err = code .. " " .. msg}
end
local function bad_reply_args() return {err = "ERR wrong number or type of arguments"} end
-- wrong arguments are not raised: the call returns the error table (Redis 7.0)
redis.error_reply = function(...)
  local msg = ...
  if select("#", ...) ~= 1 or type(msg) ~= "string" then return bad_reply_args() end
  if msg:sub(1, 1) ~= "-" then msg = "-" .. msg end
  return error_table(msg)
end
redis.status_reply = function(...)
  local msg = ...
  if select("#", ...) ~= 1 or type(msg) ~= "string" then return bad_reply_args() end
  return {ok = msg}
end
local sha1hex, pylog, setresp = cross(py.sha1hex), cross_redis(py.log), cross(py.setresp)
redis.sha1hex = function(s)
  if type(s) ~= "string" and type(s) ~= "number" then error("wrong number of arguments", 2) end
  return sha1hex(tostring(s))
end
redis.log = function(level, ...)
  if select("#", ...) == 0 then error("redis.log() requires two arguments or more.", 2) end
  if type(level) ~= "number" then error("First argument must be a number (log level).", 2) end
  -- Redis converts the level to an int first: NaN and the infinities are out of range too
  if level ~= level or level <= -1 or level >= 4 then error({err = "ERR Invalid debug level."}, 0) end
  local parts = {}
  for i = 1, select("#", ...) do parts[i] = tostring((select(i, ...))) end
  pylog(level, table.concat(parts, " "))
end
redis.setresp = function(v)
  if v ~= 2 and v ~= 3 then error("RESP version must be 2 or 3.", 2) end
  setresp(v)
end
redis.set_repl = function(v)
  if type(v) ~= "number" then error("redis.set_repl() requires one argument.", 2) end
  if v < 0 or v > 3 then error("Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE.", 2) end
end
redis.replicate_commands = function() return true end
redis.breakpoint = function() return false end
redis.debug = function() end
redis.acl_check_cmd = cross_redis(py.acl_check)
redis.LOG_DEBUG, redis.LOG_VERBOSE, redis.LOG_NOTICE, redis.LOG_WARNING = 0, 1, 2, 3
redis.REPL_NONE, redis.REPL_AOF, redis.REPL_SLAVE, redis.REPL_REPLICA, redis.REPL_ALL = 0, 1, 2, 2, 3
redis.REDIS_VERSION, redis.REDIS_VERSION_NUM = py.version, py.version_num
base.redis = readonly(redis)

-- reading a global (or a field of the library context's `redis`) that does not exist
local function nonexistent(name)
  error("Script attempted to access nonexistent global variable '" .. tostring(name) .. "'", 3)
end
local function strict(t)
  return setmetatable({}, {__newindex = readonly_error, __metatable = false,
                           __index = function(_, name)
                             local v = t[name]
                             if v == nil then nonexistent(name) end
                             return v
                           end})
end

-- the library context (Rule 4)
local load_redis = {register_function = cross_redis(py.register),
                    log = redis.log, REDIS_VERSION = redis.REDIS_VERSION,
                    REDIS_VERSION_NUM = redis.REDIS_VERSION_NUM}
for _, level in ipairs({"LOG_DEBUG", "LOG_VERBOSE", "LOG_NOTICE", "LOG_WARNING"}) do
  load_redis[level] = redis[level]
end
local load_base = {redis = strict(load_redis)}

local globals = base  -- what the globals read: base, or load_base while a library loads
local env = setmetatable({}, {__newindex = readonly_error, __metatable = false,
                              __index = function(_, name)
                                local v = globals[name]
                                if v == nil then nonexistent(name) end
                                return v
                              end})
base._G = env
proxied[env] = base

base.loadstring = function(...)
  local code, name = ...
  local kind = type(code)
  if kind ~= "string" and kind ~= "number" then  -- Lua's own text, as called from C
    if select("#", ...) == 0 then kind = "no value" end
    error("bad argument #1 to '?' (string expected, got " .. kind .. ")", 0)
  end
  code = tostring(code)
  local f, err
  if code:byte(1) == 27 then  -- bytecode (Rule 1): parsed as text, named as Lua would name it
    f, err = loadstring(" " .. code, name or code)
  else
    f, err = loadstring(code, name)
  end
  if f == nil then return nil, err end
  setfenv(f, env)
  return f
end

local chunk = "@user_script"
-- user code: any Lua chunk but this sandbox's own (scripts, functions, and what loadstring
-- compiled for them); C functions and tail calls have a source starting with "="
local own_source = debug_getinfo(1, "S").source
local function is_user(source)
  return source ~= own_source and source:sub(1, 1) ~= "="
end

-- the error as Redis shows it: a string, or an error table whose `err` is a string; an err
-- that is a number shows as Lua writes it, a table with neither is "unknown error", and any
-- other value is what tostring makes of it ("nil", "true", "function: 0x...")
local function shown(e)
  local kind = type(e)
  if kind == "string" then return e end
  if kind ~= "table" then return tostring(e) end
  local err = rawget(e, "err")
  if type(err) == "string" then return e end
  if type(err) == "number" then return {err = tostring(err)} end
  return "unknown error"
end

local function where(e)
  e = shown(e)
  -- the error and the line of the innermost user code running when it was raised; a
  -- `return redis.call(...)` is a Lua tail call that leaves no frame: its line is unknown
  -- and reported as 1 (docs/redis-compatibility.md)
  local tail = false
  for level = 2, 40 do
    local info = debug_getinfo(level, "Sl")
    if info == nil then break end
    if is_user(info.source) then
      return {e, info.source, info.currentline}
    end
    tail = tail or info.source == "=(tail call)"
  end
  if tail then return {e, chunk, 1} end
  return {e, "", 0}
end

-- once killed, the hook runs on every line (as Redis): a pcall loop cannot swallow the kill,
-- the next line outside the pcall raises it again
local pykilled = cross(py.killed)
local function hook()
  local ok, killed = pcall(pykilled)
  if not ok then killed = nil end
  if killed then
    local info = debug_getinfo(2, "S")  -- raised in user code only, never in the runner's
    if info == nil or not is_user(info.source) then return end
    debug_sethook(hook, "l")
    error({err = killed}, 0)
  end
end

local runner = {}
local call_f, call_a, call_b  -- a function's callback and arguments (run_with)
-- compile a script body (EVAL) or a library (FUNCTION LOAD); nil + message on a syntax error
runner.compile = function(code, chunk)
  local f, err = loadstring(code, chunk)
  if f == nil then return nil, err end
  setfenv(f, env)
  return f
end
-- run f(...) under the kill hook: true, value | false, {error, source, line}
-- the memory cap is on for the script's own code only (bridge.py Rule 3): on as it starts,
-- lifted before anything goes back to Python that lupa must reference in the state (a table,
-- a function, ...: a registry slot may allocate). A number, string, boolean or nil goes back
-- without Lua allocating, so it skips that crossing: Python lifts the cap first thing after
-- every run anyway (lua.py `_execute`).
local function capped(ok, v)
  debug_sethook()
  local t = type(v)
  if t ~= "number" and t ~= "string" and t ~= "boolean" and t ~= "nil" then enter() end
  return ok, v
end
local function call_f_ab() return call_f(call_a, call_b) end
runner.run = function(keys, argv, f)
  chunk = "@user_script"
  globals = base
  base.KEYS, base.ARGV = keys, argv
  debug_sethook(hook, "", 100000)
  leave()
  local ok, v = capped(xpcall(f, where))
  base.KEYS, base.ARGV = nil, nil
  return ok, v
end
-- the same with KEYS and ARGV given as its own arguments: nk keys, then the arguments (few of
-- them: lua.py Rule 6)
runner.run_args = function(f, nk, ...)
  local keys, argv = {}, {}
  for i = 1, nk do keys[i] = (select(i, ...)) end
  for i = nk + 1, select("#", ...) do argv[i - nk] = (select(i, ...)) end
  return runner.run(keys, argv, f)
end
runner.run_with = function(f, a, b)
  chunk = "@user_function"
  globals = base
  call_f, call_a, call_b = f, a, b
  debug_sethook(hook, "", 100000)
  leave()
  local ok, v = capped(xpcall(call_f_ab, where))
  call_f, call_a, call_b = nil, nil, nil
  return ok, v
end
-- run a library's top-level code in the library context (Rule 4)
runner.run_load = function(f)
  chunk = "@user_function"
  globals = load_base
  debug_sethook(hook, "", 100000)
  leave()
  local ok, v = capped(xpcall(f, where))
  globals = base
  return ok, v
end
runner.is_table = function(v) return type(v) == "table" end
runner.NO_MEMORY = NO_MEMORY  -- keeps the string alive (and interned) while the state lives
return runner
