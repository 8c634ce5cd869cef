"""Pub/sub, differential against redis-server 7.0: reply and push frames in RESP2 and RESP3
(typed trees, harness Rule 1), subscribed-mode errors, PUBSUB introspection, keyspace events
(streams, with the consumers XREADGROUP/XCLAIM/XAUTOCLAIM create), pub/sub under CLIENT REPLY.

A script is a list of (connection, command, frames to read): one command can answer several
frames (SUBSCRIBE a b), and a PUBLISH makes frames arrive on another connection.
"""

from __future__ import annotations

import pytest
from compat_harness import RespConn, Target, Tree  # type: ignore[import-not-found]

Step = tuple[str, tuple[str, ...], int]

SCRIPT: list[Step] = [
    ("sub", ("UNSUBSCRIBE",), 1),
    ("sub", ("PUNSUBSCRIBE",), 1),
    ("sub", ("SUNSUBSCRIBE",), 1),
    ("sub", ("SUBSCRIBE", "ps.a", "ps.b", "ps.a"), 3),
    ("sub", ("PSUBSCRIBE", "ps.*", "qq.?"), 2),
    ("sub", ("SSUBSCRIBE", "ps.shard"), 1),
    ("pub", ("PUBLISH", "ps.a", "hello"), 1),
    # message, pmessage (ps.*), then PING's reply (one matching pattern per message: Redis
    # walks its patterns in hash order, topicsrv in subscription order)
    ("sub", ("PING",), 3),
    ("sub", ("PING", "x"), 1),
    ("sub", ("XLEN", "ps.k"), 1),
    ("sub", ("SUBSCRIBE",), 1),
    ("sub", ("PING", "a", "b"), 1),
    ("sub", ("NOSUCH",), 1),
    ("pub", ("SPUBLISH", "ps.shard", "s"), 1),
    ("sub", ("PING",), 2),
    ("pub", ("PUBLISH", "ps.shard", "plain"), 1),
    ("sub", ("PING",), 2),  # the ps.* pmessage only: no shard subscriber gets a plain message
    ("pub", ("PUBSUB", "NUMSUB", "ps.a", "ps.none"), 1),
    ("pub", ("PUBSUB", "NUMPAT"), 1),
    ("pub", ("PUBSUB", "SHARDNUMSUB", "ps.shard"), 1),
    ("pub", ("PUBSUB", "SHARDCHANNELS", "ps.*"), 1),
    ("pub", ("PUBSUB", "CHANNELS", "ps.a"), 1),
    ("pub", ("PUBSUB", "CHANNELS", "a", "b"), 1),
    ("pub", ("PUBSUB", "NUMPAT", "x"), 1),
    ("pub", ("PUBSUB", "NOSUCH"), 1),
    ("pub", ("PUBSUB", "HELP"), 1),
    ("sub", ("UNSUBSCRIBE", "ps.b", "ps.zz"), 2),
    ("sub", ("PUNSUBSCRIBE", "qq.?"), 1),
    ("sub", ("SUNSUBSCRIBE", "ps.shard"), 1),
    ("sub", ("UNSUBSCRIBE", "ps.a"), 1),
    ("sub", ("PUNSUBSCRIBE", "ps.*"), 1),
    ("sub", ("PING",), 1),
    ("sub", ("SUBSCRIBE", "ps.r"), 1),
    ("sub", ("RESET",), 1),
    ("pub", ("PUBLISH", "ps.r", "gone"), 1),
    ("pub", ("PUBLISH", "ps.none", "x"), 1),
    ("pub", ("CONFIG", "SET", "notify-keyspace-events", "KEt"), 1),
    ("sub", ("PSUBSCRIBE", "__keyspace@0__:ps.*"), 1),
    ("pub", ("XADD", "ps.k", "1-1", "f", "v"), 1),
    ("pub", ("XADD", "ps.k", "MAXLEN", "1", "2-1", "f", "v"), 1),
    ("pub", ("XDEL", "ps.k", "2-1"), 1),
    ("sub", ("PING",), 5),  # xadd, xadd, xtrim, xdel, then PING's reply
    # consumers made by XREADGROUP / XCLAIM / XAUTOCLAIM fire xgroup-createconsumer; DELCONSUMER
    # fires only for a consumer that existed
    ("pub", ("XGROUP", "CREATE", "ps.k", "g", "$"), 1),
    ("pub", ("XGROUP", "CREATECONSUMER", "ps.k", "g", "Bob"), 1),
    ("pub", ("XADD", "ps.k", "3-1", "f", "v"), 1),
    ("pub", ("XREADGROUP", "GROUP", "g", "Alice", "STREAMS", "ps.k", ">"), 1),
    ("pub", ("XREADGROUP", "GROUP", "g", "Alice", "STREAMS", "ps.k", "0"), 1),
    ("pub", ("XCLAIM", "ps.k", "g", "Mike", "0", "3-1"), 1),
    ("pub", ("XCLAIM", "ps.k", "g", "Zed2", "999999999", "3-1"), 1),
    ("pub", ("XGROUP", "DELCONSUMER", "ps.k", "g", "Lee"), 1),
    ("pub", ("XAUTOCLAIM", "ps.k", "g", "Bob", "0", "0", "JUSTID"), 1),
    ("pub", ("XAUTOCLAIM", "ps.k", "g", "Zed", "0", "0", "JUSTID"), 1),
    ("pub", ("XGROUP", "DELCONSUMER", "ps.k", "g", "Bob"), 1),
    ("sub", ("PING",), 8),  # create, consumer Bob, xadd, Alice, Mike, Zed, delconsumer; PING
    ("pub", ("CONFIG", "GET", "notify-keyspace-events"), 1),
    ("pub", ("CONFIG", "SET", "notify-keyspace-events", ""), 1),
    ("pub", ("DEL", "ps.k"), 1),
    # CLIENT REPLY: OFF silences replies but not (un)subscribe frames or messages; SKIP drops
    # its own reply and the next one's (and changes nothing while OFF)
    ("quiet", ("CLIENT", "REPLY", "OFF"), 0),
    ("quiet", ("ECHO", "a"), 0),
    ("quiet", ("SUBSCRIBE", "ps.q"), 1),
    ("pub", ("PUBLISH", "ps.q", "m"), 1),
    ("quiet", ("PING",), 1),  # the message only: PING's reply is silenced
    ("quiet", ("UNSUBSCRIBE",), 1),
    ("quiet", ("CLIENT", "REPLY", "SKIP"), 0),
    ("quiet", ("ECHO", "b"), 0),
    ("quiet", ("CLIENT", "REPLY", "ON"), 1),
    ("quiet", ("CLIENT", "REPLY", "SKIP"), 0),
    ("quiet", ("ECHO", "c"), 0),
    ("quiet", ("ECHO", "d"), 1),
    ("quiet", ("CLIENT", "REPLY", "SKIP"), 0),
    ("quiet", ("NOSUCH",), 0),
    ("quiet", ("CLIENT", "REPLY", "OFF"), 0),
    ("quiet", ("RESET",), 1),  # RESET turns replies back on before it answers
    ("quiet", ("ECHO", "e"), 1),
    ("quiet", ("CLIENT", "REPLY", "MAYBE"), 1),
]


def run(target: Target, protocol: int) -> list[list[Tree]]:
    conns = {"sub": RespConn(target.port, protocol), "pub": RespConn(target.port, 2),
             "quiet": RespConn(target.port, protocol)}
    out = []
    try:
        for who, args, frames in SCRIPT:
            conn = conns[who]
            conn.send_raw(b"".join([b"*%d\r\n" % len(args)] + [
                b"$%d\r\n%s\r\n" % (len(a.encode()), a.encode()) for a in args]))
            out.append([conn.read() for _ in range(frames)])
    finally:
        for c in conns.values():
            c.close()
    return out


@pytest.mark.parametrize("protocol", [2, 3])
def test_pubsub_script(ref: Target, ours: Target | None, protocol: int) -> None:
    want = run(ref, protocol)
    if ours is None:
        return
    got = run(ours, protocol)
    problems = [f"{' '.join(SCRIPT[i][1])}:\n    redis:    {w}\n    topicsrv: {g}"
                for i, (w, g) in enumerate(zip(want, got, strict=True)) if w != g]
    assert not problems, f"RESP{protocol} differs:\n" + "\n".join(problems)
