"""Experiment (not product code): what a single-epoll-reactor RESP front would buy.

    .venv/bin/python -m bench.reactor_proto --data-dir /tmp/proto [--coalesce] [--no-storage]
    redis-benchmark -p <printed resp port> -c 50 -n 100000 -P 1 --csv XADD s '*' f v

It runs the real server (`topicsrv.server.run`: engine, storage, HTTP front) but swaps the
RESP listener for one trio task that owns an epoll set of all client sockets and runs the
real parser, dispatcher and encoder on each readable socket, synchronously, then `send`s the
replies. It is a FAST-PATH-ONLY measurement tool: no blocking commands, no commit-token
waits (fsync topics), no output back-pressure, no AUTH. `--coalesce` turns a run of plain
`XADD key * f v ...` to the same key in one read into ONE engine.write of all their records.
docs/performance.md records what it measured and why it is the shape the RESP front needs.
"""

from __future__ import annotations

import argparse
import select
import socket
import sys
from pathlib import Path
from typing import Any

import trio
from trio.lowlevel import wait_readable

import topicsrv.resp.server as resp_server
from topicsrv.engine.records import prepare_fields
from topicsrv.resp.commands import load_all
from topicsrv.resp.commands.base import CommandContext, Front, Pending
from topicsrv.resp.dispatch import execute
from topicsrv.resp.encoder import encode
from topicsrv.resp.protocol import RequestParser
from topicsrv.server import ServerConfig, ServerContext, run

COALESCE = False


def _run_batch(ctx: ServerContext, cc: CommandContext, cmds: list[list[bytes]], out: bytearray,
               p3: bool) -> None:
    i, n = 0, len(cmds)
    while i < n:
        argv = cmds[i]
        if COALESCE and len(argv) >= 5 and len(argv) % 2 == 1 and argv[2] == b"*" \
                and argv[0].lower() == b"xadd":
            j = i + 1
            while j < n and cmds[j][0] == argv[0] and cmds[j][1] == argv[1] \
                    and cmds[j][2] == b"*" and len(cmds[j]) % 2 == 1:
                j += 1
            if j - i > 1:
                recs = [prepare_fields(c[3:]) for c in cmds[i:j]]
                res, _ = ctx.engine.write(argv[1].decode("latin-1"), recs)
                ts = res["ts"]
                for seq in range(res["first_seq"], res["last_seq"] + 1):
                    encode(out, b"%d-%d" % (ts, seq), p3)
                i = j
                continue
        reply: Any = execute(cc, argv)
        if type(reply) is Pending:
            reply = reply.reply
        encode(out, reply, p3)
        i += 1


async def serve_resp(ctx: ServerContext, *,
                     task_status: trio.TaskStatus[tuple[str, int]] = trio.TASK_STATUS_IGNORED) -> None:
    load_all()
    front = Front()
    ctx.metrics["resp"] = front
    ls = socket.socket()
    ls.bind((ctx.config.bind, ctx.config.resp_port or 0))
    ls.listen(512)
    ls.setblocking(False)
    ep = select.epoll()
    ep.register(ls.fileno(), select.EPOLLIN)
    conns: dict[int, tuple[socket.socket, CommandContext, RequestParser]] = {}
    task_status.started(("127.0.0.1", ls.getsockname()[1]))
    lfd = ls.fileno()
    while True:
        await wait_readable(ep.fileno())
        for fd, _ in ep.poll(0, 512):
            if fd == lfd:
                while True:
                    try:
                        c, addr = ls.accept()
                    except BlockingIOError:
                        break
                    c.setblocking(False)
                    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                    client = front.new_client(f"{addr[0]}:{addr[1]}", "127.0.0.1:0")
                    client.fd = c.fileno()
                    client.authenticated = True
                    conns[c.fileno()] = (c, CommandContext(ctx, client, front),
                                         RequestParser(ctx.config.proto_max_bulk_len, True))
                    ep.register(c.fileno(), select.EPOLLIN)
                continue
            sock, cc, parser = conns[fd]
            try:
                data = sock.recv(65536)
            except BlockingIOError:
                continue
            except OSError:
                data = b""
            if not data:
                ep.unregister(fd)
                sock.close()
                del conns[fd]
                continue
            cmds, _err = parser.feed(data)
            out = bytearray()
            _run_batch(ctx, cc, cmds, out, cc.client.protocol == 3)
            sock.setblocking(True)  # prototype: a short blocking send instead of back-pressure
            sock.sendall(out)
            sock.setblocking(False)


def main(argv: list[str] | None = None) -> int:
    global COALESCE
    parser = argparse.ArgumentParser(prog="python -m bench.reactor_proto", description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--coalesce", action="store_true")
    parser.add_argument("--no-storage", action="store_true")
    args = parser.parse_args(argv)
    COALESCE = args.coalesce
    resp_server.serve_resp = serve_resp
    cfg = ServerConfig(data_dir=args.data_dir, http_port=0, resp_port=0,
                       storage=not args.no_storage)
    try:
        trio.run(run, cfg)
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
