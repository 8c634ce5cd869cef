"""`python -m bench.pubbench`: PUBLISH throughput to 1 and to 50 subscribers (issue 26), topicsrv
against redis-server, as the median of alternating rounds, each round's value printed.

    .venv/bin/python -m bench.pubbench [--rounds 3] [--quick|--tiny] [--rows sub1p1,...]

Rule 1 (the workload): redis-benchmark `-c 50 -P <P> PUBLISH ch msg`, N requests, while S
subscriber sockets (RESP2, `SUBSCRIBE ch`) read continuously; the row's value is
redis-benchmark's PUBLISH rate. Both servers run with `client-output-buffer-limit pubsub 0 0 0`
(no cut: a subscriber that falls behind must not be disconnected on one side only).
Rule 2 (every message counted): the subscribers run in `SUB_PROCS` child processes (this
module with `--subscriber`), each reading its sockets with a selector. After redis-benchmark
exits, the harness PUBLISHes `end` (same length as `msg`): each socket's byte stream must be
exactly its SUBSCRIBE confirmation, N `message ch msg` frames and the `end` frame; a wrong
byte or count fails the round (a RuntimeError), so a row is only reported when every
subscriber got every message, in order. The child reports the counts as JSON.
Rule 3 (alternation): one round = a fresh redis-server and a fresh topicsrv; each row runs on
both back to back, which one goes first alternating between rounds; the report is the
median of the per-round ratios topicsrv / redis, with the rounds listed.
Rule 4: every process (servers, subscriber children) is stopped by its pid in a `finally`.
"""

from __future__ import annotations

import argparse
import json
import selectors
import socket
import statistics
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass

from bench import respbench
from bench.procs import Procs, install_signal_handlers

CHANNEL = b"ch"
FRAME = b"*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$3\r\nmsg\r\n"
END = b"*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$3\r\nend\r\n"
CONFIRM = b"*3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n"
SUB_PROCS = 2  # child processes the subscribers are spread over (when more than one)
NO_LIMIT = "pubsub 0 0 0"


@dataclass(frozen=True)
class PubRow:
    label: str
    subscribers: int
    pipeline: int
    requests: int  # full size
    target: float  # on the ratio topicsrv / redis-server (issue 38)


ROWS: dict[str, PubRow] = {
    "sub1p1": PubRow("PUBLISH to 1 subscriber, P1", 1, 1, 100_000, 0.9),
    "sub1p16": PubRow("PUBLISH to 1 subscriber, P16", 1, 16, 500_000, 0.4),
    "sub50p1": PubRow("PUBLISH to 50 subscribers, P1", 50, 1, 50_000, 0.6),
    "sub50p16": PubRow("PUBLISH to 50 subscribers, P16", 50, 16, 100_000, 0.3),
}


# ---- the subscriber child (Rule 2) -----------------------------------------------------


class _Reader:
    """One subscribed socket: checks its bytes against CONFIRM, FRAME* and END as they come."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.sendall(b"*2\r\n$9\r\nSUBSCRIBE\r\n$2\r\nch\r\n")
        got = b""
        while len(got) < len(CONFIRM):
            chunk = self.sock.recv(len(CONFIRM) - len(got))
            if not chunk:
                raise RuntimeError("subscriber: EOF before the SUBSCRIBE confirmation")
            got += chunk
        if got != CONFIRM:
            raise RuntimeError(f"subscriber: unexpected confirmation {got!r}")
        self.sock.setblocking(False)
        self.checked = 0  # bytes verified as FRAME copies
        self.carry = b""  # the last len(FRAME) bytes, unchecked: they may be END
        self.done = False

    def feed(self, data: bytes, pattern: bytes) -> None:
        data = self.carry + data
        body, self.carry = data[:-len(FRAME)], data[-len(FRAME):]
        off = self.checked % len(FRAME)
        if body != pattern[off:off + len(body)]:
            raise RuntimeError(f"subscriber: unexpected bytes after {self.checked // len(FRAME)} "
                               "messages")
        self.checked += len(body)
        if self.carry == END and self.checked % len(FRAME) == 0:
            self.done = True


def subscriber_main(port: int, sockets: int) -> None:
    """`--subscriber`: open and subscribe `sockets` sockets, print `ready`, read until every
    socket saw END, print the message count of each socket as JSON."""
    readers = [_Reader(port) for _ in range(sockets)]
    pattern = FRAME * ((1 << 18) // len(FRAME) + 2)
    sel = selectors.DefaultSelector()
    for r in readers:
        sel.register(r.sock, selectors.EVENT_READ, r)
    print("ready", flush=True)
    left = len(readers)
    while left:
        for key, _ in sel.select():
            r = key.data
            data = r.sock.recv(1 << 18)
            if not data:
                raise RuntimeError("subscriber: EOF before the end message")
            r.feed(data, pattern)
            if r.done:
                sel.unregister(r.sock)
                left -= 1
    print(json.dumps([r.checked // len(FRAME) for r in readers]), flush=True)


# ---- the harness -----------------------------------------------------------------------


def measure(port: int, row: PubRow, requests: int) -> float:
    """One row on one server: subscribers up, redis-benchmark, END, every count checked."""
    per = [row.subscribers // SUB_PROCS + (i < row.subscribers % SUB_PROCS)
           for i in range(SUB_PROCS)] if row.subscribers > 1 else [1]
    children = [subprocess.Popen([sys.executable, "-m", "bench.pubbench", "--subscriber",
                                  str(port), str(n)], stdout=subprocess.PIPE, text=True)
                for n in per if n]
    try:
        for c in children:
            assert c.stdout is not None
            if c.stdout.readline().strip() != "ready":
                raise RuntimeError("a subscriber process did not start")
        r = respbench.client(port)
        receivers = r.pubsub_numsub(CHANNEL.decode())[0][1]
        if receivers != row.subscribers:
            raise RuntimeError(f"{receivers} subscribers, expected {row.subscribers}")
        rate = respbench.redis_benchmark(port, ["PUBLISH", "ch", "msg"], requests=requests,
                                         pipeline=row.pipeline).ops_per_s
        r.publish(CHANNEL.decode(), "end")
        r.close()
        counts: list[int] = []
        for c in children:
            out, _ = c.communicate(timeout=600)
            if c.returncode != 0:
                raise RuntimeError(f"a subscriber process failed (exit {c.returncode})")
            counts += json.loads(out.strip().splitlines()[-1])
        if counts != [requests] * row.subscribers:
            raise RuntimeError(f"subscribers counted {sorted(set(counts))}, expected {requests} "
                               f"each ({row.subscribers} subscribers)")
        return rate
    finally:
        for c in children:
            if c.poll() is None:
                c.kill()
                c.wait()


def requests_for(row: PubRow, divisor: int) -> int:
    """A multiple of 50 clients x the pipeline: redis-benchmark then sends exactly that many
    (otherwise its last pipelines overshoot -n, and the counts of Rule 2 could not be exact)."""
    step = 50 * row.pipeline
    return max(1, -(-row.requests // divisor // step)) * step


@dataclass
class Result:
    redis: list[float]
    topicsrv: list[float]

    def ratios(self) -> list[float]:
        return [t / r for t, r in zip(self.topicsrv, self.redis, strict=True)]


def run(rows: list[str], rounds: int, divisor: int,
        log: Callable[[str], None] = print) -> dict[str, Result]:
    """`divisor`: the row sizes are divided by it (1 full, 3 quick, more for tiny)."""
    results = {name: Result([], []) for name in rows}
    procs = Procs()
    try:
        for rnd in range(rounds):
            red = procs.start_redis()
            top = procs.start_topicsrv()
            try:
                for p in (red, top):
                    assert p.resp_port is not None
                    respbench.client(p.resp_port).config_set("client-output-buffer-limit",
                                                              NO_LIMIT)
                for name in rows:
                    row = ROWS[name]
                    n = requests_for(row, divisor)
                    who = [("redis", red), ("topicsrv", top)]
                    if rnd % 2:
                        who.reverse()
                    got = {}
                    for label, proc in who:
                        assert proc.resp_port is not None
                        got[label] = measure(proc.resp_port, row, n)
                    results[name].redis.append(got["redis"])
                    results[name].topicsrv.append(got["topicsrv"])
                    log(f"round {rnd + 1} {name:8s} redis {got['redis']:>10,.0f}  topicsrv "
                        f"{got['topicsrv']:>10,.0f} ({got['topicsrv'] / got['redis']:.2f})")
            finally:
                procs.stop(red)
                procs.stop(top)
    finally:
        procs.stop_all()
    return results


def report(results: dict[str, Result]) -> list[str]:
    lines = []
    for name, res in results.items():
        rs = res.ratios()
        lines.append(f"{ROWS[name].label:32s} {statistics.median(rs):5.2f}  "
                     f"({', '.join(f'{x:.2f}' for x in rs)})  redis "
                     f"{statistics.median(res.redis):,.0f}/s")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--subscriber", nargs=2, type=int, metavar=("PORT", "SOCKETS"),
                    help=argparse.SUPPRESS)
    ap.add_argument("--rounds", type=int, default=3)
    size = ap.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true")
    size.add_argument("--tiny", action="store_true")
    ap.add_argument("--rows", default=",".join(ROWS))
    args = ap.parse_args(argv)
    if args.subscriber:
        subscriber_main(*args.subscriber)
        return 0
    install_signal_handlers()
    divisor = 500 if args.tiny else 3 if args.quick else 1
    results = run(args.rows.split(","), args.rounds, divisor)
    print("\nmedian topicsrv / redis-server PUBLISH rate (per round in brackets)")
    for line in report(results):
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
