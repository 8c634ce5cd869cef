"""COMMAND INFO of every string, list, hash and generic key command, differential against
redis-server 7:
arity, flags, key positions, ACL categories, tips and key specifications (flags, notes, one
spec per key where Redis has several) are the same, so redis-py and redis-cli see the same
command table. Flags, categories and tips are sets (RESP3 `~`), compared without order. One
typed difference is tolerated: in RESP3 Redis 7.0 sends the key-spec list, each spec's flags
and the subcommand list as sets (`~`), topicsrv as arrays (`*`); clients read both as lists."""

from __future__ import annotations

from typing import Any

import pytest

COMMANDS = ("set get getdel getex getset setnx setex psetex mget mset msetnx incr decr incrby "
            "decrby incrbyfloat append strlen getrange substr setrange lcs expire pexpire "
            "expireat pexpireat ttl pttl expiretime pexpiretime persist rename renamenx copy "
            "touch randomkey type exists del unlink keys scan hset hsetnx hget hmget hmset hgetall "
            "hdel hlen hexists hkeys hvals hincrby hincrbyfloat hstrlen hrandfield hscan "
            # the lists (issue 35; Valkey's introspection-2 found LMOVE's key specs)
            "lpush rpush lpushx rpushx lpop rpop llen lrange lindex lset linsert lrem ltrim lpos "
            "lmove rpoplpush lmpop blpop brpop blmove brpoplpush blmpop "
            # the sets (issue 36)
            "sadd srem smembers sismember smismember scard spop srandmember smove sinter "
            "sintercard sunion sdiff sinterstore sunionstore sdiffstore sscan "
            # the sorted sets (issue 36; ZRANK/ZREVRANK take 7.2's WITHSCORE: arity -3)
            "zadd zincrby zrem zcard zscore zmscore zcount zlexcount zrange zrangestore "
            "zrangebyscore zrevrangebyscore zrangebylex zrevrangebylex zrevrange zremrangebyrank "
            "zremrangebyscore zremrangebylex zpopmin zpopmax zmpop zrandmember zunion zinter "
            "zdiff zunionstore zinterstore zdiffstore zintercard zscan bzpopmin bzpopmax bzmpop "
            # SORT (issue 36): BY/GET and STORE keys as Redis's `unknown` key specs
            "sort sort_ro").split()
SETS = (2, 6, 7)  # flags, ACL categories, tips


def _arrays(tree: Any) -> Any:
    """`~` read as `*` (the tolerated difference), recursively."""
    kind = tree[0]
    if kind in "*~":
        return ("*", [_arrays(t) for t in tree[1]])
    if kind == "%":
        return ("%", [(_arrays(k), _arrays(v)) for k, v in tree[1]])
    return tree


def _norm(tree: Any) -> Any:
    (entry,) = tree[1]
    fields = list(entry[1])
    for i in SETS:
        fields[i] = ("set", sorted(fields[i][1]))
    fields[8:] = [_arrays(f) for f in fields[8:]]
    return fields


@pytest.mark.parametrize("protocol", [2, 3])
def test_command_info_matches_redis(targets: list[Any], protocol: int) -> None:
    replies = []
    for t in targets:
        conn = t.conn(protocol)
        try:
            replies.append({c: _norm(conn.call("COMMAND", "INFO", c)) for c in COMMANDS})
        finally:
            conn.close()
    if len(replies) == 2:
        bad = [c for c in COMMANDS if replies[0][c] != replies[1][c]]
        assert not bad, "\n".join(f"{c}:\n  redis:    {replies[0][c]}\n  topicsrv: {replies[1][c]}"
                                  for c in bad)
