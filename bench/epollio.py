"""The listening side of the one-epoll-loop servers the experiments run in place of topicsrv
(bench/echo_ceiling.py, bench/scriptfloor.py): a non-blocking listener on 127.0.0.1 and the
accept of every pending client into the epoll set."""

from __future__ import annotations

import select
import socket


def listen(port: int) -> tuple[socket.socket, select.epoll]:
    """A non-blocking listener on 127.0.0.1:`port`, registered in a new epoll set."""
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", port))
    ls.listen(512)
    ls.setblocking(False)
    ep = select.epoll()
    ep.register(ls.fileno(), select.EPOLLIN)
    return ls, ep


def accept_all(ls: socket.socket, ep: select.epoll) -> list[socket.socket]:
    """Every client waiting on `ls`, non-blocking, TCP_NODELAY, registered in `ep`."""
    out = []
    try:
        while True:
            c, _addr = ls.accept()
            c.setblocking(False)
            c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            ep.register(c.fileno(), select.EPOLLIN)
            out.append(c)
    except BlockingIOError:
        pass
    return out
