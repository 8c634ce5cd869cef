"""In-process cost of the RESP hot path per command: compiled vs pure Python, no network.

    .venv/bin/python -m bench.hotpath [--rounds 3] [--modes "compiled= pure=1"]

Rule 1: each workload drives 50 in-memory `Session`s (topicsrv/resp/session.py) in turn, the
way the reactor does (`receive_data`, `step` until NEED_DATA, `data_to_send`), and passes each
reply through a socketpair (one send, one recv), so the caches see roughly what they see in
the server between two requests; the engine has no storage and a FakeClock. This is the
per-command CPU the server spends outside trio and the epoll loop.
Rule 2: every mode runs in a fresh interpreter (the build is chosen at import: topicsrv/
buildinfo.py Rule 3), the modes rotating round by round; a figure is the best of 40 short
timed runs inside a process (the least noisy estimator of a CPU cost on a shared machine)
and the report is the median over rounds.
Rule 3: a mode is a value of TOPICS_PURE (empty = the installed build, `1` = pure Python),
optionally run from another copy of the tree (`name=VALUE@/path/to/tree`, e.g. one holding a
Cython build), so that builds can be compared in one run.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
N_STREAM = 2_000  # entries of the read workloads' stream
SESSIONS = 50


def frame(*args: bytes) -> bytes:
    out = b"*%d\r\n" % len(args)
    for a in args:
        out += b"$%d\r\n%b\r\n" % (len(a), a)
    return out


WORK: dict[str, tuple[bytes, int]] = {  # name -> (one read's bytes, commands in it)
    "ping-p1": (frame(b"PING"), 1),
    "xadd-p1": (frame(b"XADD", b"s", b"*", b"f", b"v"), 1),
    "xadd-p16": (frame(b"XADD", b"s", b"*", b"f", b"v") * 16, 16),
    "xrange100-p16": (frame(b"XRANGE", b"r", b"-", b"+", b"COUNT", b"100") * 16, 16),
    "xread100-p16": (frame(b"XREAD", b"COUNT", b"100", b"STREAMS", b"r", b"0") * 16, 16),
    "get-p1": (frame(b"GET", b"key:000000000001"), 1),
    "set-p1": (frame(b"SET", b"key:000000000001", b"v" * 100), 1),
    "get-p16": (b"".join(frame(b"GET", b"key:%012d" % i) for i in range(16)), 16),
    "set-p16": (b"".join(frame(b"SET", b"key:%012d" % i, b"v" * 100) for i in range(16)), 16),
}
QUEUE_WORK = {"claim1+ack": 1, "claim100+ack": 100}  # name -> MAX; µs per job (claim + ack)


def driver(ctx: Any) -> tuple[list[Any], Callable[[Any, bytes], bytes]]:
    """SESSIONS in-memory sessions of `ctx` and `serve(session, read)`, which runs one read as
    the reactor does and passes the replies through a socketpair (Rule 1); returns them."""
    from topicsrv.resp.commands import load_all
    from topicsrv.resp.commands.base import Front
    from topicsrv.resp.session import NEED_DATA, Session

    load_all()
    front = Front()
    ctx.metrics.resp = front
    sessions = [Session(ctx, front, f"127.0.0.1:{50000 + i}", "127.0.0.1:6379", 9 + i)
                for i in range(SESSIONS)]
    a, b = socket.socketpair()
    a.setblocking(False)
    b.setblocking(False)
    sink = bytearray(1 << 20)

    def serve(s: Session, data: bytes) -> bytes:
        s.receive_data(data)
        while s.step() is not NEED_DATA:
            pass
        out = whole = s.data_to_send()
        while out:
            n = a.send(out)
            out = out[n:]
            b.recv_into(sink)  # one read takes all that was sent (the sink is larger)
        return whole

    return sessions, serve


def _measure(only: list[str]) -> dict[str, float]:
    """µs per command of each workload, in this interpreter's build."""
    from topicsrv.clock import FakeClock
    from topicsrv.context import ServerConfig, make_context

    sessions, serve = driver(make_context(ServerConfig(storage=False, http_port=None,
                                                       resp_port=None), FakeClock()))
    for _ in range(N_STREAM // 100):
        serve(sessions[0], frame(b"XADD", b"r", b"*", b"f", b"x" * 100) * 100)
    for i in range(0, 1000, 100):  # the string keys the get/set workloads read and overwrite
        serve(sessions[0], b"".join(frame(b"SET", b"key:%012d" % k, b"v" * 100)
                                    for k in range(i, i + 100)))
    res: dict[str, float] = {}
    for name, (data, per) in WORK.items():
        if only and name not in only:
            continue
        loops = 2000 // per // (10 if "100" in name else 1)
        best = float("inf")
        for _ in range(40):
            t0 = time.perf_counter()
            for i in range(loops):
                serve(sessions[i % SESSIONS], data)
            best = min(best, (time.perf_counter() - t0) / loops / per)
            if name.startswith("xadd"):  # keep the write stream small
                serve(sessions[0], frame(b"DEL", b"s"))
        res[name] = best * 1e6
    for name, k in QUEUE_WORK.items():
        if only and name not in only:
            continue
        res[name] = _queue(serve, sessions, k) * 1e6
    return res


def _queue(serve: Any, sessions: list[Any], k: int) -> float:
    """Seconds per job of `TOPIC.CLAIM q wI MAX k` + `TOPIC.ACK q wI seq...` (the engine has
    no storage here: Rule 1), best of 40 runs; the queue is refilled between runs, untimed."""
    q = b"q%d" % k
    serve(sessions[0], frame(b"TOPIC.CREATE", q, b"TYPE", b"queue", b"DURABILITY", b"memory"))
    loops = 400 // k + 20
    seq = 1  # the first seq of a topic
    appended = 0
    best = float("inf")
    for _ in range(40):
        for _ in range(loops * k // 100 + 1):
            serve(sessions[0], frame(b"XADD", q, b"*", b"f", b"x" * 100) * 100)
            appended += 100
        work = []
        for i in range(loops):
            node = b"w%d" % (i % len(sessions))
            seqs = [b"%d" % s for s in range(seq, seq + k)]
            seq += k
            work.append((sessions[i % len(sessions)], frame(b"TOPIC.CLAIM", q, node, b"MAX", b"%d" % k),
                         frame(b"TOPIC.ACK", q, node, *seqs)))
        t0 = time.perf_counter()
        for s, claim, ack in work:
            serve(s, claim)
            serve(s, ack)
        best = min(best, (time.perf_counter() - t0) / loops / k)
    info = serve(sessions[0], frame(b"TOPIC.INFO", q))
    if b"in_flight\r\n:0\r\n" not in info or b"count\r\n:%d\r\n" % (appended - seq + 1) not in info:
        raise RuntimeError(f"the claims/acks did not all apply: {info[:600]!r}")
    return best


def _child(mode: str, only: list[str]) -> dict[str, float]:
    pure, _, tree = mode.partition("@")
    env = {k: v for k, v in os.environ.items() if k not in ("TOPICS_PURE", "PYTHONPATH")}
    if pure:
        env["TOPICS_PURE"] = pure
    out = subprocess.run([sys.executable, "-m", "bench.hotpath", "--child", "--only",
                          ",".join(only)], env=env, capture_output=True, check=True, timeout=900,
                         cwd=tree or ROOT)
    res: dict[str, float] = json.loads(out.stdout)
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--modes", default="compiled= pure=1",
                    help="space-separated name=TOPICS_PURE value; the last is the base")
    ap.add_argument("--only", default="", help="workloads to run (comma-separated)")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    only = [w for w in args.only.split(",") if w]
    if args.child:
        print(json.dumps(_measure(only)))
        return 0
    modes = dict(part.partition("=")[::2] for part in args.modes.split())
    base = "pure" if "pure" in modes else list(modes)[-1]
    got: dict[str, list[dict[str, float]]] = {m: [] for m in modes}
    names = list(modes)
    for rnd in range(args.rounds):
        k = rnd % len(names)
        for m in names[k:] + names[:k]:
            got[m].append(_child(modes[m], only))
            print(f"round {rnd + 1} {m:28s} " + " ".join(
                f"{w}={v:.2f}" for w, v in got[m][-1].items()), flush=True)
    works = list(got[base][0])
    print(f"\nµs per command, median of {args.rounds} rounds (best of 40 inside each); "
          f"×: speed-up against {base}")
    print(f"{'mode':28s}" + "".join(f"{w:>22s}" for w in works))
    for m in names:
        cells = []
        for w in works:
            med = statistics.median(r[w] for r in got[m])
            ref = statistics.median(r[w] for r in got[base])
            cells.append(f"{med:12.2f} (×{ref / med:.2f})")
        print(f"{m:28s}" + "".join(f"{c:>22s}" for c in cells))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
