"""A corpus of RESP requests run through one in-memory session; prints what a client reads.

`python -m tests.resp.replycorpus` prints the hot path's build (topicsrv.buildinfo) on the
first line, then one line per batch: the bytes the client read, as repr. The differential
test (test_compiled_differential.py) runs it once compiled and once with TOPICS_PURE=1 and
requires identical output. A fake clock makes every stream ID the same in both runs.

Rule 1: every reply shape is covered: simple, error (ours and Redis's wording), integer,
bulk, null, arrays, RESP3 maps/sets/doubles/booleans/null, pre-encoded entries, pipelines
(with coalesced XADD runs), inline commands, and a protocol error that ends the session.
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


BATCHES: list[bytes] = [
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
    frame(b"XRANGE", b"s", b"-", b"+", b"COUNT", b"2"),
    frame(b"XREAD", b"COUNT", b"1", b"STREAMS", b"s", b"missing", b"0", b"0"),
    frame(b"XINFO", b"GROUPS", b"s"),
    frame(b"XLEN", b"missing") + frame(b"TYPE", b"missing"),
    frame(b"CONFIG", b"GET", b"maxclients"),
    xadd(b"q", b"f", b"v") * 3,
    frame(b"HELLO", b"2"),
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
    ctx = make_context(ServerConfig(storage=False, http_port=None, resp_port=None),
                       FakeClock())
    front = Front()
    ctx.metrics.resp = front
    out: list[bytes] = []
    s = Session(ctx, front, "127.0.0.1:50000", "127.0.0.1:6379", 9)
    for data in [*BATCHES, FINAL]:
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
