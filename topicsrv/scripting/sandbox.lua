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
local py = ...
local debug_sethook, debug_getinfo = debug.sethook, debug.getinfo
local setmetatable, error, pcall, xpcall, type, tostring = setmetatable, error, pcall, xpcall, type, tostring
local loadstring, setfenv, rawget = loadstring, setfenv, rawget

local function readonly_error()
  error("Attempt to modify a readonly table", 2)
end

local function readonly(t)
  return setmetatable({}, {__index = t, __newindex = readonly_error, __metatable = false})
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
-- the libraries written in Python raise Lua errors as Lua's C libraries do: a string (not
-- the Python exception) positioned at the caller (level 3: the wrapper's tail call to finish
-- counts as level 2), none when the caller is C (pcall)
local function finish(ok, ...)
  if not ok then error(tostring((...)), 3) end
  return ...
end
local function lua_errors(t)
  local out = {}
  for name, f in pairs(t) do
    if name == "null" then  -- cjson.null, the one value (Python callables are userdata)
      out[name] = f
    else
      out[name] = function(...) return finish(pcall(f, ...)) end
    end
  end
  return readonly(out)
end
base.cjson, base.cmsgpack = lua_errors(py.cjson), lua_errors(py.cmsgpack)
base.bit, base.struct = lua_errors(py.bit), lua_errors(py.struct)

local redis = {}
local pycall, pycall_packed, select = py.call, py.call_packed, select
-- a call with many arguments crosses as one table: lupa cannot take ~8,000 arguments on the
-- Lua stack of its Python call (Valkey's `Script check unpack with massive arguments`)
local function invoke(...)
  local n = select("#", ...)
  if n > 64 then return pycall_packed({...}, n) end
  return pycall(...)
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
redis.sha1hex = function(s)
  if type(s) ~= "string" and type(s) ~= "number" then error("wrong number of arguments", 2) end
  return py.sha1hex(tostring(s))
end
redis.log = function(level, ...)
  if select("#", ...) == 0 then error("redis.log() requires two arguments or more.", 2) end
  if type(level) ~= "number" then error("First argument must be a number (log level).", 2) end
  local parts = {}
  for i = 1, select("#", ...) do parts[i] = tostring((select(i, ...))) end
  py.log(level, table.concat(parts, " "))
end
redis.setresp = function(v)
  if v ~= 2 and v ~= 3 then error("RESP version must be 2 or 3.", 2) end
  py.setresp(v)
end
redis.set_repl = function(v)
  if type(v) ~= "number" then error("redis.set_repl() requires one argument.", 2) end
  if v < 0 or v > 3 then error("Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE.", 2) end
end
redis.replicate_commands = function() return true end
redis.breakpoint = function() return false end
redis.debug = function() end
redis.acl_check_cmd = function(...) return py.acl_check(...) end
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
local load_redis = {register_function = function(...) return py.register(...) end,
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

local function where(e)
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
local function hook()
  local killed = py.killed()
  if killed then
    local info = debug_getinfo(2, "S")  -- raised in user code only, never in the runner's
    if info == nil or not is_user(info.source) then return end
    debug_sethook(hook, "l")
    error({err = killed}, 0)
  end
end

local runner = {}
-- compile a script body (EVAL) or a library (FUNCTION LOAD); nil + message on a syntax error
runner.compile = function(code, chunk)
  local f, err = loadstring(code, chunk)
  if f == nil then return nil, err end
  setfenv(f, env)
  return f
end
-- run f(...) under the kill hook: true, value | false, {error, source, line}
runner.run = function(keys, argv, f)
  chunk = "@user_script"
  globals = base
  base.KEYS, base.ARGV = keys, argv
  debug_sethook(hook, "", 100000)
  local ok, v = xpcall(f, where)
  debug_sethook()
  base.KEYS, base.ARGV = nil, nil
  return ok, v
end
runner.run_with = function(f, a, b)
  chunk = "@user_function"
  globals = base
  debug_sethook(hook, "", 100000)
  local ok, v = xpcall(function() return f(a, b) end, where)
  debug_sethook()
  return ok, v
end
-- run a library's top-level code in the library context (Rule 4)
runner.run_load = function(f)
  chunk = "@user_function"
  globals = load_base
  debug_sethook(hook, "", 100000)
  local ok, v = xpcall(f, where)
  debug_sethook()
  globals = base
  return ok, v
end
runner.is_table = function(v) return type(v) == "table" end
return runner
