"""A corpus of RESP requests run through one in-memory session; prints what a client reads.

`python -m tests.resp.replycorpus` prints the hot path's build (topicsrv.buildinfo) on the
first line, then one line per batch: the bytes the client read, as repr. The differential
test (test_compiled_differential.py) runs it once compiled and once with TOPICS_PURE=1 and
requires identical output. A fake clock makes every stream ID the same in both runs.

Rule 1: every reply shape is covered: simple, error (ours and Redis's wording), integer,
bulk, null, arrays, RESP3 maps/sets/doubles/booleans/null, pre-encoded entries, pipelines
(with coalesced XADD runs), inline commands, and a protocol error that ends the session.
Rule 2: string commands (GET/SET/INCR/... and key TTLs) are covered too, with the fake clock
moved between batches (an int in BATCHES advances it that many ms; it prints nothing), so
expiry is exercised the same way in both runs.
"""

from __future__ import annotations

import sys


def frame(*args: bytes) -> bytes:
    out = b"*%d\r\n" % len(args)
    for a in args:
        out += b"$%d\r\n%b\r\n" % (len(a), a)
    return out


def xadd(key: bytes, *fv: bytes) -> bytes:
    return frame(b"XADD", key, b"*", *fv)


STRINGS: list[bytes | int] = [
    frame(b"SET", b"k", b"v") + frame(b"GET", b"k") + frame(b"GET", b"nokey"),
    frame(b"SET", b"k", b"w", b"NX") + frame(b"SET", b"k", b"w", b"XX", b"GET") + frame(b"GETSET", b"k", b"x"),
    frame(b"INCR", b"n") * 3 + frame(b"INCRBY", b"n", b"10") + frame(b"DECR", b"n"),
    frame(b"INCRBYFLOAT", b"f", b"0.1") + frame(b"INCRBYFLOAT", b"f", b"1.5e3") + frame(b"GET", b"f"),
    frame(b"INCR", b"k") + frame(b"DECRBY", b"n", b"-9223372036854775808") + frame(b"INCRBY", b"n", b"x"),
    frame(b"APPEND", b"k", b"yz") + frame(b"STRLEN", b"k") + frame(b"GETRANGE", b"k", b"0", b"-2"),
    frame(b"SETRANGE", b"k", b"5", b"!") + frame(b"GET", b"k") + frame(b"OBJECT", b"ENCODING", b"n"),
    frame(b"MSET", b"a", b"1", b"b", b"2") + frame(b"MGET", b"a", b"b", b"nokey", b"s"),
    frame(b"GET", b"s") + frame(b"INCR", b"s") + frame(b"SET", b"k", b"v", b"EX", b"0"),
    frame(b"SET", b"e", b"v", b"PX", b"100") + frame(b"PTTL", b"e") + frame(b"TTL", b"e"),
    50,
    frame(b"PTTL", b"e") + frame(b"GET", b"e") + frame(b"EXPIRE", b"k", b"10") + frame(b"TTL", b"k"),
    50,
    frame(b"GET", b"e") + frame(b"EXISTS", b"e") + frame(b"PTTL", b"e") + frame(b"PERSIST", b"k"),
    frame(b"GETEX", b"k", b"PX", b"5") + frame(b"SET", b"t2", b"v", b"KEEPTTL"),
    5,
    frame(b"GET", b"k") + frame(b"DBSIZE") + frame(b"DEL", b"a", b"b", b"nokey"),
    frame(b"MULTI") + frame(b"SET", b"m", b"1") + frame(b"INCR", b"m") + frame(b"GET", b"m") + frame(b"EXEC"),
]
SCRIPT = b"redis.call('set', KEYS[1], ARGV[1]) return {redis.call('incr', KEYS[1]), #KEYS, #ARGV}"
SCRIPTS: list[bytes] = [  # the script path is compiled too (issue 38): RESP2, then RESP3
    frame(b"EVAL", b"return {1, 2, 3.7, 'a', nil, 5}", b"0")
    + frame(b"EVAL", b"return {redis.call('get', KEYS[1]), type(redis.call('get', 'nokey'))}",
            b"1", b"a"),
    frame(b"EVAL", b"return redis.call('incr', KEYS[1])", b"1", b"sc")
    + frame(b"EVAL", b"return redis.pcall('incr', KEYS[1])", b"1", b"s")
    + frame(b"EVAL", b"return redis.call('xrange', KEYS[1], '-', '+', 'COUNT', 2)", b"1", b"s"),
    frame(b"EVAL", b"return {#KEYS, #ARGV, KEYS[2], ARGV[9]}", b"2", b"k1", b"k2",
          *[b"a%d" % i for i in range(9)])
    + frame(b"EVAL", b"return {#KEYS, #ARGV, ARGV[6]}", b"2", b"k1", b"k2", *[b"a%d" % i for i in range(6)]),
    frame(b"SCRIPT", b"LOAD", SCRIPT) + frame(b"EVAL", SCRIPT, b"1", b"sk", b"41")
    + frame(b"EVALSHA", b"0" * 40, b"0") + frame(b"EVAL", b"return (", b"0"),
    frame(b"EVAL", b"redis.setresp(3) return {redis.call('get', 'nokey') == nil, {double=1.5}}",
          b"0") + frame(b"EVAL", b"return redis.call('get', KEYS[1])", b"1", b"s"),
]
BATCHES: list[bytes | int] = [
    frame(b"PING"),
    frame(b"PING", b"hello"),
    frame(b"ECHO", b"\x00\xff binary \r\n"),
    frame(b"NOSUCH", b"a", b"b"),
    frame(b"GET"),
    frame(b"XADD", b"s"),
    xadd(b"s", b"f", b"v"),
    xadd(b"s", b"f", b"v") * 5 + frame(b"XLEN", b"s") + xadd(b"s", b"a", b"1", b"b", b"2"),
    xadd(b"s", b"f", b"v", b"odd"),
    frame(b"XADD", b"s", b"MAXLEN", b"~", b"100", b"*", b"k", b"v"),
    frame(b"XADD", b"s", b"1-1", b"k", b"v"),
    frame(b"XADD", b"bad name!", b"*", b"k", b"v"),
    xadd(b"t", b"x" * 300, b"y" * 70000),
    frame(b"XRANGE", b"s", b"-", b"+"),
    frame(b"XRANGE", b"s", b"-", b"+", b"COUNT", b"3"),
    frame(b"XREVRANGE", b"s", b"+", b"-", b"COUNT", b"2"),
    frame(b"XRANGE", b"s", b"nope", b"+"),
    frame(b"XREAD", b"COUNT", b"2", b"STREAMS", b"s", b"t", b"0-0", b"0-0"),
    frame(b"XREAD", b"STREAMS", b"s"),
    frame(b"XREAD", b"COUNT", b"x", b"STREAMS", b"s", b"0"),
    frame(b"XLEN", b"missing"),
    frame(b"TYPE", b"s"),
    frame(b"EXISTS", b"s", b"t", b"u"),
    frame(b"XGROUP", b"CREATE", b"s", b"g", b"0"),
    frame(b"XGROUP", b"CREATE", b"s", b"g", b"0"),
    frame(b"XREADGROUP", b"GROUP", b"g", b"c1", b"COUNT", b"2", b"STREAMS", b"s", b">"),
    frame(b"XPENDING", b"s", b"g"),
    frame(b"XACK", b"s", b"g", b"1700000000000-1", b"1700000000000-2", b"9-9"),
    frame(b"XDEL", b"s", b"1700000000000-3"),
    frame(b"XTRIM", b"s", b"MAXLEN", b"4"),
    frame(b"CLIENT", b"SETNAME", b"corpus") + frame(b"CLIENT", b"GETNAME"),
    frame(b"CLIENT", b"NOSUCH"),
    frame(b"CONFIG", b"GET", b"maxmemory*"),
    frame(b"HELLO", b"3"),
    frame(b"SET", b"r3", b"1") + frame(b"MGET", b"r3", b"nokey") + frame(b"INCRBYFLOAT", b"r3", b"2.5"),
    frame(b"SET", b"r3e", b"v", b"PX", b"10") + frame(b"PTTL", b"r3e") + frame(b"EXISTS", b"r3e"),
    10,
    frame(b"GET", b"r3e") + frame(b"TTL", b"r3e"),
    frame(b"XRANGE", b"s", b"-", b"+", b"COUNT", b"2"),
    frame(b"XREAD", b"COUNT", b"1", b"STREAMS", b"s", b"missing", b"0", b"0"),
    frame(b"XINFO", b"GROUPS", b"s"),
    frame(b"XLEN", b"missing") + frame(b"TYPE", b"missing"),
    frame(b"CONFIG", b"GET", b"maxclients"),
    xadd(b"q", b"f", b"v") * 3,
    frame(b"HELLO", b"2"),
    *STRINGS,
    *SCRIPTS,
    frame(b"HELLO", b"3"),
    *SCRIPTS,
    frame(b"HELLO", b"2"),
    frame(b"SET", b"q", b"replaces the stream") + frame(b"TYPE", b"q") + frame(b"GET", b"q"),
    b"PING\r\nECHO \"quoted \\x41 \\n\" 'single'\r\nECHO \"q \\x41\\t\"\r\n",
    b"ECHO \"unbalanced\r\n",
]
FINAL = frame(b"PING") + b"*1\r\n$abc\r\n"  # a protocol error: replies before it, then close


def run() -> list[bytes]:
    from topicsrv.clock import FakeClock
    from topicsrv.context import ServerConfig, make_context
    from topicsrv.resp.commands import load_all
    from topicsrv.resp.commands.base import Front
    from topicsrv.resp.session import FLUSH, WAIT_COMMIT, Session

    load_all()
    clock = FakeClock()
    ctx = make_context(ServerConfig(storage=False, http_port=None, resp_port=None), clock)
    front = Front()
    ctx.metrics.resp = front
    out: list[bytes] = []
    s = Session(ctx, front, "127.0.0.1:50000", "127.0.0.1:6379", 9)
    for data in [*BATCHES, FINAL]:
        if isinstance(data, int):  # Rule 2
            clock.advance(data)
            continue
        if s.closing:  # the last batch closed the session: the client reconnects
            s.close()
            s = Session(ctx, front, "127.0.0.1:50000", "127.0.0.1:6379", 9)
        s.receive_data(data)
        got = b""
        while True:
            r = s.step()
            assert r is not WAIT_COMMIT
            got += s.data_to_send()
            if r is not FLUSH:
                break
        out.append(got + b" => " + r.name.encode())
    s.close()
    return out


def run_one(data: bytes) -> bytes:
    """What a client reads for `data` on a fresh session (for other tests)."""
    from topicsrv.context import ServerConfig, make_context
    from topicsrv.resp.commands import load_all
    from topicsrv.resp.commands.base import Front
    from topicsrv.resp.session import Session

    load_all()
    ctx = make_context(ServerConfig(storage=False, http_port=None, resp_port=None))
    front = Front()
    ctx.metrics.resp = front
    s = Session(ctx, front)
    s.receive_data(data)
    s.step()
    return s.data_to_send()


def encoded_values() -> list[bytes]:
    """Every reply value type through the encoder, RESP2 and RESP3 (Rule 1)."""
    from topicsrv.resp.commands.base import (
        NO_REPLY,
        Err,
        NullArray,
        Push,
        Raw,
        Simple,
        Verbatim,
    )
    from topicsrv.resp.encoder import encode_error, to_bytes

    values = [b"", b"bulk", "str \udcff", Simple("OK\r\nX"), None, NullArray(), True, False,
              0, -1, 2**63 - 1, 1.5, float("inf"), float("-inf"), float("nan"), 1e-300,
              {"k": [1, b"v"], b"b": {"n": None}}, {1, 2}, frozenset(), Push([b"msg", 1]),
              Verbatim("text"), bytearray(b"ba"), memoryview(b"mv"), Err("ERR x\r\ny"),
              Raw(b"*0\r\n"), [NO_REPLY], (1, (2, [3])), [[], {}, set()]]
    out = [to_bytes(v, resp3) for resp3 in (False, True) for v in values]
    err = bytearray()
    encode_error(err, "ERR multi\nline\rtext \udcfe")
    return [*out, bytes(err)]


def main() -> None:
    from topicsrv import buildinfo

    print(buildinfo.mode())
    for line in [*run(), *encoded_values()]:
        sys.stdout.write(repr(line) + "\n")


if __name__ == "__main__":
    main()
