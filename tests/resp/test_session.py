"""The RESP session in memory (topicsrv/resp/session.py): bytes in, the bytes a client would
read out, and the outcome an I/O adapter acts on. No sockets: each behaviour is tested once
here, and tests/resp/test_reactor.py / test_connection.py keep a smaller end-to-end set per
I/O path."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import trio
import trio.testing

from tests.resp.conftest import frame
from topicsrv.context import ServerConfig, ServerContext, make_context
from topicsrv.errors import TopicsError
from topicsrv.resp import dispatch
from topicsrv.resp.commands import load_all
from topicsrv.resp.commands.base import REGISTRY, Front, Pending
from topicsrv.resp.dispatch import BIG_ARGV
from topicsrv.resp.session import (
    CLOSE,
    FLUSH,
    FLUSH_AT,
    NEED_DATA,
    STASH_MAX,
    WAIT_COMMAND,
    WAIT_COMMIT,
    YIELD,
    Outcome,
    Session,
)

PONG = b"+PONG\r\n"


def make(**config: Any) -> tuple[ServerContext, Front]:
    load_all()
    ctx = make_context(ServerConfig(storage=False, http_port=None, resp_port=None, **config))
    front = Front()
    ctx.metrics.resp = front
    return ctx, front


@pytest.fixture
def env() -> tuple[ServerContext, Front]:
    return make()


def new(env: tuple[ServerContext, Front]) -> Session:
    return Session(env[0], env[1], "127.0.0.1:50000", "127.0.0.1:6379", 9)


def run(s: Session, data: bytes = b"") -> tuple[bytes, Outcome]:
    """Feed `data`, then do what an adapter does (send, step again after FLUSH) until the
    session needs input, closes, or asks for a wait or a turn: what the client read, and
    the outcome that stopped it."""
    if data:
        s.receive_data(data)
    got = b""
    while True:
        r = s.step()
        if r is WAIT_COMMIT:
            return got, r
        got += s.data_to_send()
        if r is not FLUSH:
            return got, r


def xadd(key: bytes, *fv: bytes) -> bytes:
    return frame(b"XADD", key, b"*", *(fv or (b"f", b"v")))


# ---- framing, pipelining, errors ---------------------------------------------------------

def test_a_pipeline_is_answered_in_order_with_one_send(env: tuple[ServerContext, Front]) -> None:
    s = new(env)
    s.receive_data(frame(b"PING") + frame(b"ECHO", b"a") + frame(b"FOO") + xadd(b"k")
                   + frame(b"XLEN", b"k"))
    assert s.step() is NEED_DATA  # the whole batch ran; its replies wait in one buffer
    out = s.data_to_send()
    assert out.startswith(PONG + b"$1\r\na\r\n-ERR unknown command 'FOO', with args "
                          b"beginning with: \r\n$")
    assert out.endswith(b"\r\n:1\r\n")
    assert env[1].stats.net_output_bytes == len(out)


def test_inline_commands_like_telnet_and_errors_that_keep_the_client(
        env: tuple[ServerContext, Front]) -> None:
    s = new(env)
    out, r = run(s, b"PING\r\nECHO \"hello world\"\r\nxadd s * f 'v 1'\nXADD s\r\nXLEN s\r\n")
    assert out.startswith(PONG + b"$11\r\nhello world\r\n$")
    assert out.endswith(b"\r\n-ERR wrong number of arguments for 'xadd' command\r\n:1\r\n")
    assert r is NEED_DATA
    assert run(s, frame(b"PING")) == (PONG, NEED_DATA)


def test_a_frame_split_anywhere_gets_the_same_answers(env: tuple[ServerContext, Front]) -> None:
    data = frame(b"ECHO", b"hello") + b"PING\r\n" + frame(b"XLEN", b"none")
    want, _ = run(new(env), data)
    assert want == b"$5\r\nhello\r\n" + PONG + b":0\r\n"
    for cut in range(1, len(data)):
        s = new(env)
        first, r = run(s, data[:cut])
        assert r is NEED_DATA
        assert want.startswith(first)
        rest, r = run(s, data[cut:])
        assert (first + rest, r) == (want, NEED_DATA)
    s = new(env)  # one byte at a time
    assert b"".join(run(s, data[i:i + 1])[0] for i in range(len(data))) == want


def test_a_protocol_error_answers_what_came_before_then_closes(
        env: tuple[ServerContext, Front]) -> None:
    s = new(env)
    out, r = run(s, frame(b"PING") + b"*1\r\n$x\r\n" + xadd(b"never"))
    assert (out, r) == (PONG + b"-ERR Protocol error: invalid bulk length\r\n", CLOSE)
    assert env[0].engine.find("never") is None
    out, r = run(new(env), b'SET "unbalanced\r\n')
    assert (out, r) == (b"-ERR Protocol error: unbalanced quotes in request\r\n", CLOSE)


def test_quit_answers_then_closes_and_drops_the_rest(env: tuple[ServerContext, Front]) -> None:
    s = new(env)
    out, r = run(s, frame(b"PING") + frame(b"QUIT") + xadd(b"q") + b"*1\r\n$x\r\n")
    assert (out, r) == (PONG + b"+OK\r\n", CLOSE)
    assert run(s, xadd(b"q")) == (b"", CLOSE)
    assert env[0].engine.find("q") is None
    s.close()
    assert s.client.id not in env[1].clients


@pytest.mark.parametrize("payload", [
    b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nFLUSHALL\r\n",
    b"post /x HTTP/1.1\r\nFLUSHALL\r\n",  # any case
    b"GET / HTTP/1.1\r\nHost: x\r\n\r\nFLUSHALL\r\n",  # Host: as the first word of a line
    frame(b"HOST:", b"x") + frame(b"FLUSHALL"),  # multibulk too, as redis-server
])
def test_http_sent_to_resp_is_not_answered_and_closes(
        env: tuple[ServerContext, Front], payload: bytes) -> None:
    run(new(env), xadd(b"keep"))
    s = new(env)
    out, r = run(s, payload)
    assert r is CLOSE and b"+OK" not in out and b"POST" not in out.upper()
    assert env[0].engine.find("keep") is not None  # FLUSHALL never ran
    assert env[1].stats.security_attacks == 1


def test_eof_closes_after_the_replies_of_a_half_closed_client(
        env: tuple[ServerContext, Front]) -> None:
    s = new(env)
    s.receive_data(frame(b"PING") * 2)
    s.receive_data(b"")
    assert run(s) == (PONG * 2, CLOSE)


def test_noauth_until_auth(env: tuple[ServerContext, Front]) -> None:
    ctx, front = make(requirepass="pw")
    s = Session(ctx, front)
    out, r = run(s, xadd(b"a") + frame(b"XLEN", b"a"))
    assert (out, r) == (b"-NOAUTH Authentication required.\r\n" * 2, NEED_DATA)
    assert run(s, frame(b"AUTH", b"wrong")) == (
        b"-WRONGPASS invalid username-password pair or user is disabled.\r\n", NEED_DATA)
    assert run(s, frame(b"AUTH", b"pw")) == (b"+OK\r\n", NEED_DATA)
    # authenticated: frames of more than 10 arguments are accepted from here on
    out, r = run(s, xadd(b"a", *[b"f", b"v"] * 6) + frame(b"XLEN", b"a"))
    assert out.startswith(b"$") and out.endswith(b":1\r\n") and r is NEED_DATA


def test_an_unauthenticated_client_cannot_send_big_frames() -> None:
    ctx, front = make(requirepass="pw")
    out, r = run(Session(ctx, front), xadd(b"a", *[b"f", b"v"] * 6))
    assert (out, r) == (b"-ERR Protocol error: unauthenticated multibulk length\r\n", CLOSE)


# ---- output ------------------------------------------------------------------------------

def test_output_past_flush_at_goes_out_before_the_rest_runs(
        env: tuple[ServerContext, Front]) -> None:
    s = new(env)
    s.receive_data(frame(b"ECHO", b"x" * 1000) * 100 + xadd(b"late"))
    assert s.step() is FLUSH
    assert FLUSH_AT <= len(s.data_to_send()) < FLUSH_AT + 1100
    assert env[0].engine.find("late") is None  # not run until the output went out
    out, r = run(s)
    assert r is NEED_DATA and env[0].engine.find("late") is not None


def test_one_reply_past_the_output_limit_is_refused_and_the_client_kept() -> None:
    ctx, front = make(client_output_limit=4096)
    s = Session(ctx, front)
    out, r = run(s, frame(b"ECHO", b"x" * 5000) + frame(b"PING"))
    assert out == (b"-ERR reply too large: 5009 bytes exceed client-output-limit (4096 bytes)"
                   b"\r\n" + PONG)
    assert r is NEED_DATA and front.stats.output_limit_refusals == 1


def test_a_batch_past_the_output_limit_closes_without_sending() -> None:
    ctx, front = make(client_output_limit=4096)
    s = Session(ctx, front)
    assert run(s, frame(b"ECHO", b"x" * 1000) * 5 + xadd(b"after")) == (b"", CLOSE)
    assert front.stats.output_limit_disconnects == 1
    assert ctx.engine.find("after") is not None  # the batch ran; only its output is refused


def test_a_client_that_does_not_read_shows_as_paused(env: tuple[ServerContext, Front]) -> None:
    s, w = new(env), new(env)
    s.receive_data(frame(b"ECHO", b"y" * 30_000))
    assert s.step() is NEED_DATA
    s.sent(1000)  # the socket took only 1000 bytes
    listing = run(w, frame(b"CLIENT", b"LIST"))[0].decode()
    line = next(x for x in listing.splitlines() if f"id={s.client.id} " in x)
    assert "events=w" in line and f"omem={len(s.out) - 1000}" in line
    assert s.data_to_send().endswith(b"y\r\n")
    listing = run(w, frame(b"CLIENT", b"LIST"))[0].decode()
    line = next(x for x in listing.splitlines() if f"id={s.client.id} " in x)
    assert "events=r" in line and "omem=0" in line


# ---- waits -------------------------------------------------------------------------------

XREAD_BLOCK = frame(b"XREAD", b"BLOCK", b"0", b"STREAMS", b"k", b"$")


def info_blocked(w: Session) -> int:
    text = run(w, frame(b"INFO", b"clients"))[0].decode()
    return int(text.split("blocked_clients:")[1].split()[0])


def test_a_blocking_read_waits_then_resumes_its_pipeline_in_order(
        env: tuple[ServerContext, Front]) -> None:
    s, w = new(env), new(env)
    out, r = run(s, frame(b"PING") + XREAD_BLOCK + frame(b"XLEN", b"k"))
    assert (out, r) == (PONG, WAIT_COMMAND)  # the replies before the wait went out first

    async def main() -> None:
        aw = s.start_wait()
        assert info_blocked(w) == 1
        s.receive_data(frame(b"ECHO", b"after"))  # arrives while blocked: kept for later
        assert s.wants_input()
        box: list[Any] = []
        async with trio.open_nursery() as nursery:
            async def wait() -> None:
                box.append(await aw)
            nursery.start_soon(wait)
            await trio.testing.wait_all_tasks_blocked()
            assert not box
            assert run(w, xadd(b"k", b"n", b"1"))[0].startswith(b"$")
        s.end_wait(box[0])

    trio.run(main)
    out, r = run(s)
    assert out.startswith(b"*1\r\n*2\r\n$1\r\nk\r\n*1\r\n*2\r\n$")
    assert out.endswith(b"*2\r\n$1\r\nn\r\n$1\r\n1\r\n:1\r\n$5\r\nafter\r\n")
    assert r is NEED_DATA and info_blocked(w) == 0


def _cancelled_wait(s: Session) -> None:
    """What an adapter does when the wait is cancelled under it (EOF or CLIENT KILL)."""
    async def main() -> None:
        aw = s.start_wait()
        with trio.CancelScope() as scope:
            scope.cancel()
            await aw
        if s.eof:
            s.end_wait(None)
        else:
            s.abandon_wait()

    trio.run(main)


def test_eof_during_a_wait_closes_and_runs_nothing_after(
        env: tuple[ServerContext, Front]) -> None:
    s, w = new(env), new(env)
    assert run(s, XREAD_BLOCK + xadd(b"z1")) == (b"", WAIT_COMMAND)
    s.receive_data(xadd(b"z2"))
    s.receive_data(b"")
    assert not s.wants_input()
    _cancelled_wait(s)
    assert run(s) == (b"", CLOSE)
    assert env[0].engine.find("z1") is None and env[0].engine.find("z2") is None
    s.close()
    assert info_blocked(w) == 0 and s.client.id not in env[1].clients


def test_client_kill_during_a_wait_closes(env: tuple[ServerContext, Front]) -> None:
    s = new(env)
    assert run(s, XREAD_BLOCK + xadd(b"z")) == (b"", WAIT_COMMAND)
    _cancelled_wait(s)
    assert run(s) == (b"", CLOSE)
    assert not s.client.blocked and env[0].engine.find("z") is None


def test_input_kept_during_a_wait_is_bounded(env: tuple[ServerContext, Front]) -> None:
    s = new(env)
    xread = frame(b"XREAD", b"BLOCK", b"1000", b"STREAMS", b"k", b"$")
    assert run(s, xread)[1] is WAIT_COMMAND
    chunk = frame(b"ECHO", b"z" * (64 << 10))
    fed = 0

    async def main() -> None:
        nonlocal fed
        aw = s.start_wait()
        while s.wants_input() and fed < 64:  # (64 chunks: 4 MiB, far past the bound)
            s.receive_data(chunk)
            fed += 1
        s.end_wait(await aw)  # BLOCK 1000 times out (virtual time)

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    assert STASH_MAX <= fed * len(chunk) < STASH_MAX + len(chunk)
    out, r = run(s)  # the null reply of the timeout, then the kept commands, in order
    assert out.startswith(b"*-1\r\n$65536\r\n") and out.count(b"$65536\r\n") == fed
    assert r is NEED_DATA


def test_a_command_of_many_arguments_gives_others_turns(env: tuple[ServerContext, Front]) -> None:
    s = new(env)
    big = xadd(b"big", *[b"f", b"v"] * (BIG_ARGV // 2))
    out, r = run(s, frame(b"PING") + big + frame(b"PING"))
    assert (out, r) == (PONG, YIELD)  # before it runs
    assert env[0].engine.find("big") is None
    assert run(s) == (b"", YIELD)  # it ran; a turn before its reply is encoded
    assert env[0].engine.find("big") is not None
    out, r = run(s)
    assert out.startswith(b"$") and out.endswith(b"\r\n" + PONG) and r is NEED_DATA


def test_an_offloaded_xadd_is_encoded_in_slices_that_give_the_gil_back(
        env: tuple[ServerContext, Front], monkeypatch: pytest.MonkeyPatch) -> None:
    """An XADD of very many fields is encoded in a worker thread, pausing between slices:
    compiled code never releases the GIL by itself, so an encoder that did not pause would
    stall every client for the whole record (test_resp_fairness.py measures that stall)."""
    from topicsrv.resp.commands import streams

    pauses: list[int] = []
    monkeypatch.setattr(streams, "give_up_gil", lambda: pauses.append(1))
    s = new(env)
    fields = [b"f%d" % i for i in range(3 * streams.OFFLOAD_FIELDS)]
    out, r = run(s, xadd(b"big", *fields))
    assert (out, r) == (b"", YIELD)  # Rule 5: a turn before it runs
    out, r = run(s)
    assert (out, r) == (b"", WAIT_COMMAND)  # the encoding runs in a thread

    async def main() -> None:
        s.end_wait(await s.start_wait())

    trio.run(main)
    out, r = run(s)
    assert out.startswith(b"$") and r is not CLOSE
    assert len(pauses) == 3 * streams.OFFLOAD_FIELDS // 4096  # one per slice of 4096 items
    out, _ = run(s, frame(b"XRANGE", b"big", b"-", b"+"))
    assert out.count(b"$") == 1 + len(fields) and out.endswith(b"$%d\r\n%b\r\n" % (
        len(fields[-1]), fields[-1]))


# ---- commits -----------------------------------------------------------------------------

class _Token:
    def __init__(self, error: Exception | None = None) -> None:
        self.done = trio.Event()
        self.error = error

    async def wait(self) -> None:
        await self.done.wait()
        if self.error is not None:
            raise self.error


@pytest.fixture
def tokens(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[bytes, _Token]]:
    """ECHO <name> answers `<name>` once the commit token of that name is durable."""
    made: dict[bytes, _Token] = {}

    def echo(ctx: Any, args: list[bytes]) -> Any:
        failed = TopicsError("insufficient_storage", "no space left on device")
        token = made[args[0]] = _Token(failed if args[0] == b"fail" else None)
        return Pending(token, args[0])

    monkeypatch.setattr(REGISTRY["echo"], "handler", echo)
    yield made


def test_replies_go_out_once_their_commits_are_durable(
        env: tuple[ServerContext, Front], tokens: dict[bytes, _Token]) -> None:
    s = new(env)
    out, r = run(s, frame(b"ECHO", b"ok") + frame(b"PING") + frame(b"ECHO", b"fail"))
    assert (out, r) == (b"", WAIT_COMMIT)  # nothing is sent before the commits

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(s.wait_commits)
            await trio.testing.wait_all_tasks_blocked()
            tokens[b"ok"].done.set()
            await trio.testing.wait_all_tasks_blocked()
            assert nursery.child_tasks  # still waiting for the second commit
            tokens[b"fail"].done.set()

    trio.run(main)
    assert s.data_to_send() == (b"$2\r\nok\r\n" + PONG
                                + b"-ERR no space left on device\r\n")
    assert run(s) == (b"", NEED_DATA)


def test_a_write_before_a_wait_or_a_turn_is_committed_first(
        env: tuple[ServerContext, Front], tokens: dict[bytes, _Token]) -> None:
    s = new(env)
    big = xadd(b"big", *[b"f", b"v"] * (BIG_ARGV // 2))
    for then, outcome in ((XREAD_BLOCK, WAIT_COMMAND), (big, YIELD)):
        out, r = run(s, frame(b"ECHO", b"ok") + then)
        assert (out, r) == (b"", WAIT_COMMIT)  # not the reply, not the wait, not the turn

        async def main(s: Session) -> None:
            tokens[b"ok"].done.set()
            await s.wait_commits()

        trio.run(main, s)
        assert run(s) == (b"$2\r\nok\r\n", outcome)
        if outcome is WAIT_COMMAND:
            _cancelled_wait(s)
            s.close()
            s = new(env)


def test_a_client_not_reading_yet_still_has_its_input_run(
        env: tuple[ServerContext, Front]) -> None:
    """Rule 2b: once the socket did not take all the output, the batch goes on past FLUSH_AT
    and new input runs at once; only the output limit stops it."""
    s = new(env)
    s.receive_data(frame(b"ECHO", b"x" * 1000) * 100)
    assert s.step() is FLUSH  # FLUSH_AT reached: the normal case sends first
    s.sent(1000)  # the socket took only 1000 bytes: the client is not reading yet
    assert s.client.paused
    assert s.step() is NEED_DATA  # the rest of the batch ran, its output kept
    s.receive_data(xadd(b"later"))
    assert s.step() is NEED_DATA and env[0].engine.find("later") is not None
    out = s.data_to_send()
    assert out.count(b"x" * 1000) == 99 and out.endswith(b"\r\n") and not s.client.paused


def test_unread_output_past_the_limit_closes() -> None:
    ctx, front = make(client_output_limit=64 * 1024)
    s = Session(ctx, front)
    s.receive_data(frame(b"PING"))
    assert s.step() is NEED_DATA
    s.sent(1)  # the client reads nothing more
    for _ in range(100):
        s.receive_data(frame(b"ECHO", b"x" * 1000))
        r = s.step()
        if r is CLOSE:
            break
        assert r is NEED_DATA
    assert r is CLOSE and not s.out and front.stats.output_limit_disconnects == 1


def test_the_command_table_is_found_by_the_name_as_sent(env: tuple[ServerContext, Front]) -> None:
    """dispatch.py Rule 12: `GET` and `get` find the one spec, a container is looked up each
    time (its subcommand decides), a name that is no command is not remembered, and the
    names remembered are bounded."""
    ctx, front = env
    assert dispatch.find([b"GET", b"k"]) == (REGISTRY["get"], 1)
    assert dispatch.find([b"gEt", b"k"]) == (REGISTRY["get"], 1)
    assert b"GET" in dispatch._SPECS and b"gEt" in dispatch._SPECS
    assert dispatch.find([b"CONFIG", b"GET", b"x"])[1] == 2 and b"CONFIG" not in dispatch._SPECS
    assert dispatch.find([b"NOSUCHCMD"]) == (None, 0) and b"NOSUCHCMD" not in dispatch._SPECS
    for i in range(2 * dispatch._SPECS_MAX):  # every case of a long name: never more than MAX
        name = bytes(c ^ 0x20 if i >> j & 1 else c for j, c in enumerate(b"zrangebyscore"))
        assert dispatch.find([name])[0] is REGISTRY["zrangebyscore"]
    assert len(dispatch._SPECS) <= dispatch._SPECS_MAX
    s = new(env)
    assert run(s, frame(b"gEt", b"k") + frame(b"config", b"get", b"maxclients"))[0] == (
        b"$-1\r\n*2\r\n$10\r\nmaxclients\r\n$5\r\n10000\r\n")
