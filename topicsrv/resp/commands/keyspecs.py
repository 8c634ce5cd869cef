"""Redis 7's key-specification flags and command tips for the keyspace, stream and shard
pub/sub commands (data only).

COMMAND INFO builds each key spec's `begin_search`/`find_keys` from the registry's key
positions (commands/server.py); this table adds what those cannot say, copied from
redis-server 7.0's COMMAND INFO: the flags of each key spec (RO/RW/OW/RM plus access,
update, insert, delete), its notes, and the tips (request/response policies,
nondeterministic output). A command with several entries has one key spec per key position,
as Redis's RENAME/COPY do. Commands not listed keep the generic RO/RW spec.
"""

from __future__ import annotations

KeySpec = tuple[tuple[str, ...], str | None]  # flags, notes

_RW_ACCESS_UPDATE: list[KeySpec] = [(("RW", "access", "update"), None)]
_RO_ACCESS: list[KeySpec] = [(("RO", "access"), None)]
_RO: list[KeySpec] = [(("RO",), None)]
_RW_UPDATE: list[KeySpec] = [(("RW", "update"), None)]
_OW_UPDATE: list[KeySpec] = [(("OW", "update"), None)]
_OW_INSERT: list[KeySpec] = [(("OW", "insert"), None)]
_RM_DELETE: list[KeySpec] = [(("RM", "delete"), None)]

KEY_FLAGS: dict[str, list[KeySpec]] = {
    "set": [(("RW", "access", "update", "variable_flags"),
             "RW and ACCESS due to the optional `GET` argument")],
    "get": _RO_ACCESS, "getrange": _RO_ACCESS, "substr": _RO_ACCESS, "lcs": _RO_ACCESS,
    "mget": _RO_ACCESS, "ttl": _RO_ACCESS, "pttl": _RO_ACCESS, "expiretime": _RO_ACCESS,
    "pexpiretime": _RO_ACCESS,
    "strlen": _RO, "exists": _RO, "touch": _RO, "type": _RO,
    "getdel": [(("RW", "access", "delete"), None)],
    "getex": [(("RW", "access", "update"), "RW and UPDATE because it changes the TTL")],
    "getset": _RW_ACCESS_UPDATE, "incr": _RW_ACCESS_UPDATE, "decr": _RW_ACCESS_UPDATE,
    "incrby": _RW_ACCESS_UPDATE, "decrby": _RW_ACCESS_UPDATE, "incrbyfloat": _RW_ACCESS_UPDATE,
    "append": [(("RW", "insert"), None)],
    "setrange": _RW_UPDATE, "expire": _RW_UPDATE, "pexpire": _RW_UPDATE, "expireat": _RW_UPDATE,
    "pexpireat": _RW_UPDATE, "persist": _RW_UPDATE,
    "setex": _OW_UPDATE, "psetex": _OW_UPDATE, "mset": _OW_UPDATE,
    "setnx": _OW_INSERT, "msetnx": _OW_INSERT,
    "del": _RM_DELETE, "unlink": _RM_DELETE,
    "rename": [(("RW", "access", "delete"), None), (("OW", "update"), None)],
    "renamenx": [(("RW", "access", "delete"), None), (("OW", "insert"), None)],
    "copy": [(("RO", "access"), None), (("OW", "update"), None)],
}

# the stream and pub/sub commands (redis-server 7.0's COMMAND INFO, as above)
_RW_DELETE: list[KeySpec] = [(("RW", "delete"), None)]
_RW_INSERT: list[KeySpec] = [(("RW", "insert"), None)]
_NOT_KEY: list[KeySpec] = [(("not_key",), None)]
KEY_FLAGS.update({
    "xadd": [(("RW", "update"), "UPDATE instead of INSERT because of the optional trimming feature")],
    "xrange": _RO_ACCESS, "xrevrange": _RO_ACCESS, "xpending": _RO_ACCESS, "dump": _RO_ACCESS,
    "xinfo|stream": _RO_ACCESS, "xinfo|groups": _RO_ACCESS, "xinfo|consumers": _RO_ACCESS,
    "xdel": _RW_DELETE, "xtrim": _RW_DELETE, "xautoclaim": _RW_DELETE,
    "xgroup|destroy": _RW_DELETE, "xgroup|delconsumer": _RW_DELETE,
    "xgroup|create": _RW_INSERT, "xgroup|createconsumer": _RW_INSERT,
    "xgroup|setid": _RW_UPDATE, "xack": _RW_UPDATE, "xclaim": _RW_UPDATE, "xsetid": _RW_UPDATE,
    "restore": _OW_UPDATE,
    "ssubscribe": _NOT_KEY, "sunsubscribe": _NOT_KEY, "spublish": _NOT_KEY,
})

# the hash commands (redis-server 7.0's COMMAND INFO, as above; HLEN HEXISTS HSTRLEN: plain RO)
KEY_FLAGS.update({
    "hset": _RW_UPDATE, "hmset": _RW_UPDATE, "hsetnx": _RW_INSERT, "hdel": _RW_DELETE,
    "hincrby": _RW_ACCESS_UPDATE, "hincrbyfloat": _RW_ACCESS_UPDATE,
    "hget": _RO_ACCESS, "hmget": _RO_ACCESS, "hgetall": _RO_ACCESS, "hkeys": _RO_ACCESS,
    "hvals": _RO_ACCESS, "hrandfield": _RO_ACCESS, "hscan": _RO_ACCESS,
    # field expiry (Redis 7.4's hexpire.json, httl.json, hpersist.json, ...)
    "hexpire": _RW_UPDATE, "hpexpire": _RW_UPDATE, "hexpireat": _RW_UPDATE,
    "hpexpireat": _RW_UPDATE, "hpersist": _RW_UPDATE, "httl": _RO_ACCESS, "hpttl": _RO_ACCESS,
    "hexpiretime": _RO_ACCESS, "hpexpiretime": _RO_ACCESS,
})

# the list commands (redis-server 7.0's COMMAND INFO, as above; LLEN: plain RO). The moves
# have one spec per key, the source's then the destination's; LMPOP/BLMPOP's keynum spec is
# in getkeys.py's MOVABLE.
_RW_ACCESS_DELETE: list[KeySpec] = [(("RW", "access", "delete"), None)]
_MOVE: list[KeySpec] = [(("RW", "access", "delete"), None), (("RW", "insert"), None)]
KEY_FLAGS.update({
    "lpush": _RW_INSERT, "rpush": _RW_INSERT, "lpushx": _RW_INSERT, "rpushx": _RW_INSERT,
    "linsert": _RW_INSERT, "lpop": _RW_ACCESS_DELETE, "rpop": _RW_ACCESS_DELETE,
    "blpop": _RW_ACCESS_DELETE, "brpop": _RW_ACCESS_DELETE, "lrem": _RW_DELETE,
    "ltrim": _RW_DELETE, "lset": _RW_UPDATE, "lrange": _RO_ACCESS, "lindex": _RO_ACCESS,
    "lpos": _RO_ACCESS, "lmove": _MOVE, "rpoplpush": _MOVE, "blmove": _MOVE, "brpoplpush": _MOVE,
})

_MULTI_SUM = ["request_policy:multi_shard", "response_policy:agg_sum"]

TIPS: dict[str, list[str]] = {
    "del": _MULTI_SUM, "exists": _MULTI_SUM, "touch": _MULTI_SUM, "unlink": _MULTI_SUM,
    "keys": ["request_policy:all_shards", "nondeterministic_output_order"],
    "mget": ["request_policy:multi_shard"],
    "mset": ["request_policy:multi_shard", "response_policy:all_succeeded"],
    "msetnx": ["request_policy:multi_shard", "response_policy:agg_min"],
    "ttl": ["nondeterministic_output"], "pttl": ["nondeterministic_output"],
    "randomkey": ["request_policy:all_shards", "nondeterministic_output"],
    "scan": ["nondeterministic_output", "request_policy:special"],
    "hgetall": ["nondeterministic_output_order"], "hkeys": ["nondeterministic_output_order"],
    "hvals": ["nondeterministic_output_order"], "hrandfield": ["nondeterministic_output"],
    "hscan": ["nondeterministic_output"],
}

# the sorted-set commands (redis-server 7.0's COMMAND INFO, as above; ZCARD: plain RO). The
# numkeys forms and the *STORE commands are in getkeys.py's MOVABLE.
_Z_RO = ("zscore zmscore zrank zrevrank zcount zlexcount zrange zrangebyscore zrevrangebyscore "
         "zrangebylex zrevrangebylex zrevrange zrandmember zscan").split()
_Z_DELETE = "zremrangebyrank zremrangebyscore zremrangebylex".split()
KEY_FLAGS.update({
    "zadd": _RW_UPDATE, "zincrby": _RW_ACCESS_UPDATE, "zrem": _RW_DELETE,
    **{c: _RO_ACCESS for c in _Z_RO}, **{c: _RW_DELETE for c in _Z_DELETE},
    **{c: _RW_ACCESS_DELETE for c in ("zpopmin", "zpopmax", "bzpopmin", "bzpopmax")},
    "zrangestore": [(("OW", "update"), None), (("RO", "access"), None)],
})
TIPS.update({"zrandmember": ["nondeterministic_output"], "zscan": ["nondeterministic_output"]})

# the set commands (redis-server 7.0's COMMAND INFO, as above; SISMEMBER SCARD: plain RO);
# the *STORE commands' two specs and SINTERCARD's keynum spec are in getkeys.py's MOVABLE
KEY_FLAGS.update({
    "sadd": _RW_INSERT, "srem": _RW_DELETE, "spop": _RW_ACCESS_DELETE, "smembers": _RO_ACCESS,
    "smismember": _RO_ACCESS, "srandmember": _RO_ACCESS, "sscan": _RO_ACCESS,
    "sinter": _RO_ACCESS, "sunion": _RO_ACCESS, "sdiff": _RO_ACCESS,
    "smove": [(("RW", "access", "delete"), None), (("RW", "insert"), None)],
})
TIPS.update({
    "smembers": ["nondeterministic_output_order"], "sinter": ["nondeterministic_output_order"],
    "sunion": ["nondeterministic_output_order"], "sdiff": ["nondeterministic_output_order"],
    "spop": ["nondeterministic_output"], "srandmember": ["nondeterministic_output"],
    "sscan": ["nondeterministic_output"],
})
