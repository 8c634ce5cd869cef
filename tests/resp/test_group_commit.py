"""The reactor's group commit (topicsrv/resp/reactor.py Rule 6) at its edges, with real
storage on a disk whose calls a test can fail or hold: a commit that fails turns the parked
reply into its error and the connection lives on; CLIENT KILL of a session parked on a
commit closes it without harming the group's other sessions or the reactor."""

from __future__ import annotations

import errno
import socket
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import hiredis
import trio

from tests.resp.conftest import frame
from topicsrv.context import ServerConfig, make_context
from topicsrv.resp.commands import load_all
from topicsrv.resp.commands.base import Front
from topicsrv.resp.reactor import Reactor
from topicsrv.storage.fsops import OsOps
from topicsrv.storage.store import Storage

EOF = object()


class Disk(OsOps):
    """fdatasync fails with EIO while `failing` is set, and waits while `held` is clear."""

    def __init__(self) -> None:
        self.failing = False
        self.held = threading.Event()
        self.held.set()
        self.syncs = 0

    def fdatasync(self, fd: int) -> None:
        self.held.wait(10)
        if self.failing:
            raise OSError(errno.EIO, "Input/output error")
        self.syncs += 1
        super().fdatasync(fd)


class Client:
    def __init__(self, sock: trio.socket.SocketType) -> None:
        self.sock = sock
        self.reader = hiredis.Reader()
        self.eof = False

    async def call(self, *parts: bytes) -> Any:
        await self.sock.send(frame(*parts))
        return await self.reply()

    async def reply(self) -> Any:
        """The next reply (an error as hiredis.ReplyError), EOF when the server closed."""
        while (got := self.reader.gets()) is False:
            with trio.fail_after(10):
                chunk = await self.sock.recv(1 << 16)
            if not chunk:
                return EOF
            self.reader.feed(chunk)
        return got


@asynccontextmanager
async def server(tmp_path: Path, disk: Disk) -> AsyncIterator[tuple[Reactor, Front, Callable[[], Client]]]:
    ctx = make_context(ServerConfig(http_port=None, resp_port=0, storage=False))
    load_all()
    front = Front()
    st = Storage(ctx.engine, tmp_path, shards=1, ops=disk)
    ctx.storage = st
    st.refuse_until_recovered()
    await st.open()
    async with trio.open_nursery() as nursery:
        await nursery.start(st.run)
        await st.settled.wait()
        reactor = Reactor(ctx, front, nursery)
        nursery.start_soon(reactor.run)

        def connect() -> Client:
            ours, theirs = socket.socketpair()
            reactor.adopt(ours)
            return Client(trio.socket.from_stdlib_socket(theirs))

        try:
            yield reactor, front, connect
        finally:
            disk.failing = False
            disk.held.set()
            nursery.cancel_scope.cancel()


def parked(reactor: Reactor) -> int:
    return sum(1 for c in reactor.conns.values() if c.parked)


async def until(cond: Callable[[], bool]) -> None:
    with trio.fail_after(10):
        while not cond():  # noqa: ASYNC110 - the reactor's state, no event to wait on
            await trio.sleep(0.005)


def test_a_failed_commit_answers_the_error_and_the_connection_lives_on(tmp_path: Path) -> None:
    async def main() -> None:
        disk = Disk()
        async with server(tmp_path, disk) as (reactor, front, connect):
            a, b = connect(), connect()
            assert await a.call(b"TOPIC.CREATE", b"f", b"DURABILITY", b"fsync") != EOF
            assert isinstance(await a.call(b"XADD", b"f", b"*", b"k", b"v"), bytes)
            disk.failing = True
            await a.sock.send(frame(b"XADD", b"f", b"*", b"k", b"lost") + frame(b"PING"))
            err = await a.reply()
            assert isinstance(err, hiredis.ReplyError)  # the parked reply became the error
            assert "Input/output error" in str(err)
            assert await a.reply() == b"PONG"  # the rest of the pipeline, in order
            assert parked(reactor) == 0
            assert await b.call(b"PING") == b"PONG"  # the others never noticed
            assert await a.call(b"XLEN", b"f") == 1  # the refused record is not there
            assert parked(reactor) == 0 and len(reactor.conns) == 2
            assert front.stats.unexpected_errors == 0

    trio.run(main)


def test_client_kill_of_a_parked_session_leaves_its_group_and_the_reactor_alone(
        tmp_path: Path) -> None:
    async def main() -> None:
        disk = Disk()
        async with server(tmp_path, disk) as (reactor, front, connect):
            a, b, killer = connect(), connect(), connect()
            assert await a.call(b"TOPIC.CREATE", b"f", b"DURABILITY", b"fsync") != EOF
            a_id = b"%d" % await a.call(b"CLIENT", b"ID")
            disk.held.clear()  # the next fdatasync waits: the writers stay parked
            await a.sock.send(frame(b"XADD", b"f", b"*", b"who", b"a") + frame(b"PING"))
            await b.sock.send(frame(b"XADD", b"f", b"*", b"who", b"b"))
            await until(lambda: parked(reactor) == 2)
            assert await killer.call(b"CLIENT", b"KILL", b"ID", a_id) == 1
            assert await a.reply() is EOF  # closed at once, nothing sent
            assert parked(reactor) == 1
            disk.held.set()
            assert isinstance(await b.reply(), bytes)  # b's reply (its ID), once durable
            assert parked(reactor) == 0
            assert await b.call(b"XLEN", b"f") == 2  # a's write was applied before the kill
            assert await killer.call(b"PING") == b"PONG"
            assert front.stats.unexpected_errors == 0
            assert len(reactor.conns) == 2

    trio.run(main)
