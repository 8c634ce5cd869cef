"""What bounds EVALSHA (issue 38): the same script on two floor servers beside topicsrv and
redis-server, one run, so that the gap between topicsrv and its target can be split into what
any Python + lupa server pays and what topicsrv's own path adds.

    .venv/bin/python -m bench.scriptfloor [--rounds 3] [--quick]

Rule 1 (the floors are not topicsrv): a floor server is this module run as `--serve PORT
--mode bare|sandbox`: one thread, one epoll set, non-blocking sockets, hiredis parsing, replies
encoded by hand, a dict for the keyspace, and only PING, SCRIPT LOAD, EVALSHA, an empty
CONFIG reply, CLIENT's +OK and HELLO's proto (the clients' start-ups), and FLOOR.SUM (Rule 3). Nothing is journaled, counted, checked or
isolated. It is the least a server written in Python must do to answer these commands:
- `bare`: lupa's Lua 5.1 with `redis.call` bound straight to a Python function; no sandbox.
- `sandbox`: topicsrv's own Lua state (topicsrv/scripting/lua.py: sandbox.lua, the memory cap
  lifted around every call-back, the kill hook, read-only globals, errors with their script
  and line), its `redis.call` answered from the same dict (a Caller's PLAIN replies).
Rule 2: the rows are bench/scriptbench.py's EVALSHA of one GET and one INCR (`-c 50 -r
scriptbench.KEYS`) at P1 and P16, and PING at P1 (the loop's own floor). Each round runs every
row on the four servers back to back, the order reversed every other round; a figure is the
median over rounds, and each ratio is to redis-server in the same round. Each server's CPU
per request (user + system, /proc around the row) is printed with its share of a core
(bench/respbench.py Rule 4): a server near 100% is bound by its own CPU, so its rate is 1 / its
cost a request, and a floor's cost is a lower bound for any server built on the same parts.
Rule 3: an unknown command or a failed script answers an error and the floor server goes on
(a bench that errs must not pass for speed: scriptbench Rule 4's counter sum is checked on
every server after the rounds).
"""

from __future__ import annotations

import argparse
import hashlib
import socket
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench import floorrounds, scriptbench
from bench.epollio import accept_all, listen
from bench.procs import Proc, Procs, install_signal_handlers
from bench.respbench import client

ROOT = Path(__file__).resolve().parent.parent
MODES = ("bare", "sandbox")


# ---- the floor servers (Rule 1) ------------------------------------------------------------

def _incr(data: dict[bytes, bytes], key: bytes) -> int:
    v = int(data.get(key, b"0")) + 1
    data[key] = b"%d" % v
    return v


Floor = tuple[Callable[[bytes], bytes], Callable[[bytes, list[bytes], list[bytes]], Any]]


def _bare(data: dict[bytes, bytes]) -> Floor:
    from lupa import lua51

    rt = lua51.LuaRuntime(encoding=None)

    def call(cmd: bytes, key: bytes, *rest: Any) -> Any:
        c = cmd.upper()
        if c == b"GET":
            return data.get(key)
        if c == b"INCR":
            return _incr(data, key)
        raise ValueError(f"unsupported command {cmd!r}")

    redis = rt.table()
    redis[b"call"] = call
    rt.globals()[b"redis"] = redis
    scripts: dict[bytes, Any] = {}

    def load(body: bytes) -> bytes:
        sha = hashlib.sha1(body).hexdigest().encode()
        scripts[sha] = rt.eval(b"function(KEYS, ARGV) " + body + b" end")
        return sha

    def run(sha: bytes, keys: list[bytes], argv: list[bytes]) -> Any:
        return scripts[sha](rt.table_from(keys), rt.table_from(argv))

    return load, run


def _sandbox(data: dict[bytes, bytes]) -> Floor:
    from topicsrv.scripting import lua

    state = lua.LuaState()

    def caller(argv: list[bytes], run: Any) -> tuple[Any, Any]:
        c = argv[0].upper()
        if c == b"GET" and len(argv) == 2:
            v = data.get(argv[1])
            return lua.PLAIN, False if v is None else v
        if c == b"INCR" and len(argv) == 2:
            return lua.PLAIN, _incr(data, argv[1])
        return False, b"ERR unsupported command on the floor server"

    def load(body: bytes) -> bytes:
        return state.load(body).encode()

    def run(sha: bytes, keys: list[bytes], argv: list[bytes]) -> Any:
        name = sha.decode()
        value = state.call(lua.Run(name, False, False, caller), state.scripts[name], keys, argv)
        return state.reply(value, False, 2, 1 << 30)[0]

    return load, run


def _encode(v: Any) -> bytes:
    if v is None or v is False:
        return b"$-1\r\n"
    if isinstance(v, bool):
        return b":1\r\n"
    if isinstance(v, int):
        return b":%d\r\n" % v
    if isinstance(v, bytes):
        return b"$%d\r\n%b\r\n" % (len(v), v)
    return b"-ERR the floor server returns integers and strings only\r\n"


def serve(port: int, mode: str) -> None:
    import hiredis

    data: dict[bytes, bytes] = {}
    load, run = (_bare if mode == "bare" else _sandbox)(data)
    raw = mode == "sandbox"  # the sandbox's reply is RESP already (LuaState.reply)

    def execute(req: list[bytes]) -> bytes:
        c = req[0].upper()
        try:
            if c == b"EVALSHA":
                n = int(req[2])
                v = run(req[1], req[3:3 + n], req[3 + n:])
                return v if raw else _encode(v)
            if c == b"PING":
                return b"+PONG\r\n"
            if c == b"SCRIPT" and len(req) == 3 and req[1].upper() == b"LOAD":
                return b"$40\r\n" + load(req[2]) + b"\r\n"
            if c == b"FLOOR.SUM":  # Rule 3's check
                return b":%d\r\n" % sum(int(v) for v in data.values())
            if c == b"CONFIG":
                return b"*0\r\n"
            if c == b"CLIENT":  # redis-py's connect (CLIENT SETINFO)
                return b"+OK\r\n"
            if c == b"HELLO":  # redis-py 8 asks for RESP3: these replies read the same in it
                return b"%1\r\n+proto\r\n:3\r\n"
            return b"-ERR unknown command on the floor server\r\n"
        except Exception as e:  # Rule 3
            return b"-ERR " + str(e).replace("\r", " ").replace("\n", " ").encode() + b"\r\n"

    srv, ep = listen(port)
    conns: dict[int, tuple[socket.socket, Any]] = {}
    while True:
        for fd, _ in ep.poll():
            if fd == srv.fileno():
                conns.update((s.fileno(), (s, hiredis.Reader())) for s in accept_all(srv, ep))
                continue
            s, reader = conns[fd]
            try:
                buf = s.recv(65536)
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                buf = b""
            if not buf:
                ep.unregister(fd)
                s.close()
                del conns[fd]
                continue
            reader.feed(buf)
            out = []
            while (req := reader.gets()) is not False:
                out.append(execute(req))
            if out:
                try:
                    s.sendall(b"".join(out))  # a blocking send is fine for a floor: it costs none here
                except OSError:
                    pass


# ---- the run (Rule 2) ----------------------------------------------------------------------

def start_floor(procs: Procs, mode: str) -> Proc:
    return floorrounds.start(procs, f"floor-{mode}", lambda port, _: [
        "-m", "bench.scriptfloor", "--serve", str(port), "--mode", mode])


def floor_sum(port: int) -> int:
    r = client(port)
    try:
        return int(r.execute_command("FLOOR.SUM"))
    finally:
        r.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3,
                    help="rounds of every row on the four servers, the order reversed every "
                         "other round (default 3; ~5 minutes on 2 cores)")
    ap.add_argument("--quick", action="store_true",
                    help="a third of the requests a row (~2 minutes at 3 rounds)")
    ap.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--mode", choices=MODES, default="bare", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.serve:
        serve(args.serve, args.mode)
        return 0
    install_signal_handlers()
    scale = 1 if args.quick else 3
    plan = {"PING, P1": (["PING"], 1, 100_000 * scale), "EVALSHA, P1": (None, 1, 30_000 * scale),
            "EVALSHA, P16": (None, 16, 60_000 * scale)}
    procs = Procs()
    try:
        servers = [("redis-server", procs.start_redis())]
        servers += [(f"floor {m}", start_floor(procs, m)) for m in MODES]
        servers.append(("topicsrv", procs.start_topicsrv()))
        shas = {scriptbench.load(p.resp_port) for _, p in servers if p.resp_port}
        if len(shas) != 1:
            raise RuntimeError(f"SCRIPT LOAD answered different SHA1s: {shas}")
        sha = shas.pop()
        evalsha = ["EVALSHA", sha, "1", "n:__rand_int__"]
        rows = {name: (cmd or evalsha, pipeline, n) for name, (cmd, pipeline, n) in plan.items()}
        made = args.rounds * sum(n for cmd, _, n in rows.values() if cmd is evalsha)
        rates, costs = floorrounds.run(servers, rows, args.rounds, scriptbench.KEYS)
        for name, proc in servers:
            assert proc.resp_port is not None
            port = proc.resp_port
            got = floor_sum(port) if name.startswith("floor") else scriptbench.total(port)
            if got != made:
                raise RuntimeError(f"{name}: the counters sum to {got}, {made} EVALSHAs were sent")
        floorrounds.report([n for n, _ in servers], rows, rates, costs, args.rounds)
        return 0
    finally:
        procs.stop_all()


if __name__ == "__main__":
    sys.exit(main())
