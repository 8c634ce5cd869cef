"""Lua scripting (EVAL, SCRIPT, FUNCTION, FCALL): the Lua state and its sandbox (lua.py,
sandbox.lua), the libraries Redis loads (libs.py), Redis's reply conversions (convert.py),
function libraries (functions.py) and the greenlet scripts run in (runner.py).

The RESP commands are in topicsrv/resp/commands/scripting.py; they supply the one callable
through which `redis.call` reaches the command dispatch.
"""
