"""A pipelined run of LPUSH, RPUSH, LPOP, RPOP, HSET, SADD, ZADD or ZPOPMIN applied as one
keyspace operation (engine/keyspace/runs.py, resp/batch_colls.py Rule 5) against the same
commands through the dispatcher one by one (a server with keyspace events on never takes a
run path: batch.py Rule 9): the same replies, errors, keys, TTLs, access stamps, memory
counts, INFO commandstats and WATCH outcomes, and the run's journaled operations replay to
the same keys."""

from __future__ import annotations

import re
import time
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from tests.resp.conftest import InProc, frame, read_until
from topicsrv.clock import FakeClock
from topicsrv.context import ServerConfig, ServerContext, make_context
from topicsrv.engine.core import Engine
from topicsrv.engine.keyspace import ops
from topicsrv.engine.keyspace.snapshot import Snapshot
from topicsrv.errors import TopicsError
from topicsrv.resp.commands import load_all
from topicsrv.resp.commands.base import Front
from topicsrv.resp.session import NEED_DATA, Session

KEYS = [b"str", b"l1", b"l2", b"h1", b"h2", b"h3", b"s1", b"s2", b"sbig", b"z1", b"zbig",
        b"stream", b"new1", b"new2"]
PRELOAD = [
    [b"SET", b"str", b"x"], [b"RPUSH", b"l1", b"a", b"b", b"c"], [b"RPUSH", b"l2", b"x"],
    [b"HSET", b"h1", b"f", b"1", b"g", b"2"], [b"HSET", b"h2", b"f", b"v", b"g", b"w"],
    [b"HEXPIRE", b"h2", b"50", b"FIELDS", b"1", b"f"], [b"HSET", b"h3", b"a", b"1", b"b", b"2"],
    [b"HPEXPIRE", b"h3", b"10", b"FIELDS", b"2", b"a", b"b"], [b"SADD", b"s1", b"1", b"2", b"3"],
    [b"SADD", b"s2", b"a", b"b"], [b"SADD", b"sbig", *(b"m%d" % i for i in range(200))],
    [b"ZADD", b"z1", b"1", b"a", b"2", b"b", b"3", b"c"],
    [b"ZADD", b"zbig", *(x for i in range(200) for x in (b"%d" % (i % 7), b"m%d" % i))],
    [b"PEXPIRE", b"l2", b"10"], [b"PEXPIRE", b"z1", b"100000"],
    [b"XADD", b"stream", b"*", b"f", b"v"],
]
NAMES = [b"LPUSH", b"RPUSH", b"LPOP", b"RPOP", b"HSET", b"SADD", b"ZADD", b"ZPOPMIN"]
_VALUE = st.sampled_from([b"a", b"b", b"1", b"7", b"-3", b"m5", b"x" * 70, b""])
_SCORE = st.sampled_from([b"1", b"2.5", b"-inf", b"+inf", b"0", b"nan", b"x", b"NX", b"3e2"])


@st.composite
def _command(draw: Any, name: bytes) -> list[bytes]:
    key = draw(st.sampled_from(KEYS))
    if name in (b"LPOP", b"RPOP", b"ZPOPMIN"):
        return [name, key]
    if name == b"HSET":
        n = draw(st.integers(1, 3))
        return [name, key, *(x for _ in range(n) for x in (draw(_VALUE), draw(_VALUE)))]
    if name == b"ZADD":
        n = draw(st.integers(1, 2))
        return [name, key, *(x for _ in range(n) for x in (draw(_SCORE), draw(_VALUE)))]
    return [name, key, *draw(st.lists(_VALUE, min_size=1, max_size=3))]


@st.composite
def _pipeline(draw: Any) -> list[list[bytes]]:
    """Runs of one command name (a run path's unit), of random lengths."""
    out: list[list[bytes]] = []
    for _ in range(draw(st.integers(1, 6))):
        name = draw(st.sampled_from(NAMES))
        out += [draw(_command(name)) for _ in range(draw(st.integers(1, 6)))]
    return out


def _server(events: bool) -> tuple[ServerContext, Any]:
    load_all()
    clock = FakeClock()
    ctx = make_context(ServerConfig(storage=False, http_port=None, resp_port=None), clock)
    front = Front()
    ctx.metrics.resp = front
    sessions = [Session(ctx, front, f"127.0.0.1:{50000 + i}", "127.0.0.1:6379", 9 + i)
                for i in range(len(KEYS) + 1)]
    if events:
        _send(sessions[0], [[b"CONFIG", b"SET", b"notify-keyspace-events", b"KEA"]])
    _send(sessions[0], PRELOAD)
    clock.advance(5000)  # l2 and h3's fields are due; a later second for the access stamps
    return ctx, sessions


def _send(s: Session, cmds: list[list[bytes]]) -> bytes:
    s.receive_data(b"".join(frame(*c) for c in cmds))
    assert s.step() is NEED_DATA
    return s.data_to_send()


def _items(value: Any) -> Any:
    if value.KIND == "list":
        return list(value)
    if value.KIND == "zset":
        return value.pairs()
    if value.KIND == "set":
        return sorted(value.members())
    return list(value.items()), sorted(value.ttl_pairs())


def _state(ctx: ServerContext) -> dict[str, Any]:
    ks = ctx.engine.keyspace
    out: dict[str, Any] = {"nbytes": ks.nbytes, "stats": dict(ks.stats)}
    for name, value in ks.colls.items():
        d = ks.expiry.deadlines.get(name, 0)
        out[name] = (value.KIND, _items(value), d, value.second, value.nbytes)
    out["strings"] = sorted((n, e.value) for n, e in ks.strings.items())
    return out


def _stats(s: Session) -> list[str]:
    info = _send(s, [[b"INFO", b"commandstats"]]).decode()
    return sorted(re.sub(r"usec=\d+,usec_per_call=[\d.]+,", "", line)
                  for line in info.split("\r\n") if line.startswith("cmdstat_")
                  and line.split(":")[0][8:].upper().encode() in NAMES)


@settings(max_examples=150, deadline=None)
@given(cmds=_pipeline())
@example(cmds=[[b"ZADD", b"z1", b"5", b"a"], [b"ZADD", b"z1", b"1", b"d", b"2", b"d"],  # a run
               [b"ZADD", b"zbig", b"9", b"m5", b"9", b"new"], [b"ZADD", b"z1", b"3", b"c"],
               [b"SADD", b"s1", b"2", b"9"], [b"SADD", b"s1", b"9"]])  # updating members it holds
def test_a_run_answers_and_changes_as_the_commands_one_by_one(cmds: list[list[bytes]]) -> None:
    got: list[Any] = []
    journaled: list[list[Any]] = []
    for events in (False, True):
        ctx, sessions = _server(events)
        base = ctx.engine.keyspace.snapshot()
        if not events:
            orig = ctx.engine.journal.keyspace_changed

            def spy(op: list[Any], orig: Any = orig) -> Any:
                journaled.append(ops.decode(ops.encode(list(op))))  # through the codec
                return orig(op)

            ctx.engine.journal.keyspace_changed = spy  # type: ignore[method-assign]
        for k, key in enumerate(KEYS):  # a watcher per key
            _send(sessions[k + 1], [[b"WATCH", key], [b"MULTI"], [b"PING"]])
        replies = _send(sessions[0], cmds)
        execs = [_send(sessions[k + 1], [[b"EXEC"]]) for k in range(len(KEYS))]
        got.append((replies, execs, _state(ctx), _stats(sessions[0])))
        if not events:
            again = Engine(FakeClock())
            again.keyspace.apply(base)
            for op in journaled:
                again.keyspace.apply(op)
            live = ctx.engine.keyspace
            assert {n: _items(v) for n, v in again.keyspace.colls.items()} == \
                {n: _items(v) for n, v in live.colls.items()}
            assert again.keyspace.expiry.deadlines == live.expiry.deadlines
    assert got[0] == got[1]


def test_a_refused_write_is_each_commands_error_and_changes_nothing() -> None:
    ctx, sessions = _server(False)
    ks = ctx.engine.keyspace
    before = {n: _items(v) for n, v in ks.colls.items()}

    def refuse(topic: Any) -> None:
        raise TopicsError("shutting_down", "going away")

    ctx.engine.journal.check_writable = refuse  # type: ignore[method-assign]
    out = _send(sessions[0], [[b"LPUSH", b"l1", b"z"], [b"LPUSH", b"l1", b"y"],
                              [b"ZADD", b"z1", b"5", b"q"]])
    assert out == b"-ERR going away\r\n" * 3
    assert {n: _items(v) for n, v in ks.colls.items()} == before


def test_a_checkpoint_reads_the_keyspace_of_its_instant_across_a_run() -> None:
    ctx, sessions = _server(False)
    ks = ctx.engine.keyspace
    instant = ks.snapshot()
    snap = Snapshot(ks)
    ks.saving = snap
    _send(sessions[0], [[b"LPUSH", b"l1", b"n"], [b"LPUSH", b"new1", b"n"], [b"RPOP", b"l1"],
                        [b"RPOP", b"l1"]])
    _send(sessions[0], [[b"HSET", b"h1", b"f", b"9"], [b"HSET", b"h2", b"g", b"9"]])
    _send(sessions[0], [[b"SADD", b"s1", b"9", b"a"], [b"SADD", b"sbig", b"zz"]])
    _send(sessions[0], [[b"ZADD", b"zbig", b"1", b"q"], [b"ZPOPMIN", b"z1"],
                        [b"ZPOPMIN", b"zbig"]])
    parts: list[Any] = []
    while (part := snap.next_part(7)) is not None:
        parts.append(part)
    ks.saving = None
    fresh, then = Engine(FakeClock()), Engine(FakeClock())
    for part in parts:
        fresh.keyspace.apply(part)
    then.keyspace.apply(instant)

    def image(e: Engine) -> dict[str, Any]:
        return {n: _items(v) for n, v in e.keyspace.colls.items()}

    assert image(fresh) == image(then) != {}


def test_waiters_are_served_in_order_after_a_run(inproc: InProc) -> None:
    a, b, c = inproc.connect(), inproc.connect(), inproc.connect()
    a.sendall(frame(b"BZPOPMIN", b"zq", b"0"))
    b.sendall(frame(b"BLPOP", b"lq", b"0"))
    for _ in range(200):  # a and b blocked
        c.sendall(frame(b"INFO", b"clients"))
        if b"blocked_clients:2" in read_until(c, b"\r\n\r\n"):
            break
        time.sleep(0.01)
    c.sendall(frame(b"ZADD", b"zq", b"2", b"two") + frame(b"ZADD", b"zq", b"1", b"one")
              + frame(b"ZADD", b"zq", b"3", b"three") + frame(b"ZPOPMIN", b"zq")
              + frame(b"LPUSH", b"lq", b"x") + frame(b"LPUSH", b"lq", b"y") + frame(b"PING"))
    assert read_until(c, b"+PONG\r\n") == (
        b":1\r\n:1\r\n:1\r\n*2\r\n$3\r\none\r\n$1\r\n1\r\n:1\r\n:2\r\n+PONG\r\n")
    assert read_until(a, b"\r\n$1\r\n2\r\n") == b"*3\r\n$2\r\nzq\r\n$3\r\ntwo\r\n$1\r\n2\r\n"
    assert read_until(b, b"$1\r\ny\r\n") == b"*2\r\n$2\r\nlq\r\n$1\r\ny\r\n"
    c.sendall(frame(b"LRANGE", b"lq", b"0", b"-1") + frame(b"ZRANGE", b"zq", b"0", b"-1"))
    assert read_until(c, b"three\r\n") == b"*1\r\n$1\r\nx\r\n*1\r\n$5\r\nthree\r\n"
