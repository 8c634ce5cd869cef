"""Experiment: the I/O ceiling of trio for RESP request/reply, with zero work per command.

    .venv/bin/python -m bench.echo_ceiling task|raw|epoll PORT
    redis-benchmark -p PORT -c 50 -n 100000 -P 1 --csv XADD s '*' f v

Each server answers every command (counted by its leading `*`) with a fixed stream id:
  task  - one trio task per connection, SocketStream.receive_some / send_all
  raw   - one task per connection, non-blocking sock.recv/send, wait_readable on EAGAIN only
  epoll - ONE task owning an epoll set of every client socket (the redis-server shape)
docs/performance.md records what each reached next to redis-server.
"""

from __future__ import annotations

import socket
import sys
from functools import partial

import trio
from trio.lowlevel import checkpoint, wait_readable, wait_writable

from bench.epollio import accept_all, listen

REPLY = b"$15\r\n1700000000000-1\r\n"


async def task_handler(stream: trio.SocketStream) -> None:
    try:
        while data := await stream.receive_some(65536):
            await stream.send_all(REPLY * data.count(b"*"))
    except trio.BrokenResourceError:
        pass


async def raw_handler(stream: trio.SocketStream) -> None:
    sock = stream.socket
    fast = 0
    try:
        while True:
            try:
                data = sock._sock.recv(65536)  # type: ignore[attr-defined]
            except BlockingIOError:
                fast = 0
                await wait_readable(sock)
                continue
            fast += 1
            if fast > 16:  # stay fair to the other tasks
                fast = 0
                await checkpoint()
            if not data:
                return
            out = REPLY * data.count(b"*")
            while out:
                try:
                    out = out[sock._sock.send(out):]  # type: ignore[attr-defined]
                except BlockingIOError:
                    await wait_writable(sock)
    except OSError:
        pass


async def epoll_server(port: int) -> None:
    ls, ep = listen(port)
    socks: dict[int, socket.socket] = {}
    while True:
        await wait_readable(ep.fileno())
        for fd, _ in ep.poll(0, 512):
            if fd == ls.fileno():
                socks.update((c.fileno(), c) for c in accept_all(ls, ep))
                continue
            s = socks[fd]
            try:
                data = s.recv(65536)
            except BlockingIOError:
                continue
            if not data:
                ep.unregister(fd)
                s.close()
                del socks[fd]
                continue
            s.send(REPLY * data.count(b"*"))


def main(argv: list[str]) -> int:
    mode, port = argv[0], int(argv[1])
    if mode == "epoll":
        trio.run(epoll_server, port)
    else:
        handler = task_handler if mode == "task" else raw_handler
        trio.run(partial(trio.serve_tcp, handler, port, host="127.0.0.1"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
