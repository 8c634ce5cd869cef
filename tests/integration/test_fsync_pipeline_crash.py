"""A pipelined client of an `fsync` topic is never acknowledged a record that a kill -9 loses.

Several connections each keep a deep pipeline of XADDs to a `DURABILITY fsync` topic in
flight (a writer thread sends without waiting, a reader thread records every ID the server
acknowledges), so acks go out from the reactor's group commit (resp/reactor.py Rule 5) while
more requests of the same and other clients are being executed. The server is killed with
SIGKILL mid-stream; after the restart every acknowledged ID must be in the topic; three
cycles on one data dir (a kill only loses what had not reached the kernel, so one cycle
might miss an early ack; a reactor that acked before the commit failed this test in 2 of
3 runs, each cycle killing right after the 3000th ack).
"""

from __future__ import annotations

import itertools
import os
import signal
import socket
import threading
from collections.abc import Callable
from pathlib import Path

import redis

CONNS = 4
ACKS_BEFORE_KILL = 3000  # acknowledged XADDs (all connections) before the kill
CYCLES = 3


def _xadd(topic: bytes, i: int) -> bytes:
    value = b"v%d" % i
    return (b"*5\r\n$4\r\nXADD\r\n$%d\r\n%s\r\n$1\r\n*\r\n$1\r\nn\r\n$%d\r\n%s\r\n"
            % (len(topic), topic, len(value), value))


class _Client:
    """One connection: a writer that pipelines XADDs until the socket fails, a reader that
    collects the acknowledged IDs (and the errors, which must not occur)."""

    def __init__(self, port: int, topic: bytes, on_ack: Callable[[], None]) -> None:
        self.on_ack = on_ack
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.topic = topic
        self.acked: list[bytes] = []
        self.errors: list[bytes] = []
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._write, daemon=True),
                        threading.Thread(target=self._read, daemon=True)]

    def start(self) -> None:
        for t in self.threads:
            t.start()

    def _write(self) -> None:
        i = 0
        try:
            while not self.stop.is_set():
                self.sock.sendall(b"".join(_xadd(self.topic, i + k) for k in range(32)))
                i += 32
        except OSError:
            pass

    def _read(self) -> None:
        buf = b""
        try:
            while True:
                data = self.sock.recv(65536)
                if not data:
                    return
                buf += data
                while True:  # replies: $<n>\r\n<id>\r\n or -ERR ...\r\n
                    end = buf.find(b"\r\n")
                    if end < 0:
                        break
                    if buf[:1] == b"$":
                        n = int(buf[1:end])
                        if len(buf) < end + 2 + n + 2:
                            break
                        self.acked.append(buf[end + 2:end + 2 + n])
                        self.on_ack()
                        buf = buf[end + 2 + n + 2:]
                    else:
                        self.errors.append(buf[:end])
                        buf = buf[end + 2:]
        except OSError:
            pass

    def join(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(10)
        self.sock.close()


def _load_and_kill(srv, topic: bytes) -> list[_Client]:
    count = itertools.count(1)
    killed = threading.Event()

    def on_ack() -> None:  # the kill follows an ack at once: nothing else runs in between
        if next(count) == ACKS_BEFORE_KILL:
            os.kill(srv.proc.pid, signal.SIGKILL)
            killed.set()

    clients = [_Client(srv.resp_port, topic, on_ack) for _ in range(CONNS)]
    for c in clients:
        c.start()
    killed.wait(60)
    srv.kill()  # reaps it (and kills it, had the acks stopped coming)
    for c in clients:
        c.join()
    return clients


def test_pipelined_fsync_acks_survive_sigkill(server_factory, tmp_path: Path) -> None:
    data = tmp_path / "fsync-pipeline"
    srv = server_factory(data_dir=data)
    redis.Redis(port=srv.resp_port).execute_command("TOPIC.CREATE", "fp", "DURABILITY", "fsync")
    acked: list[bytes] = []
    for _ in range(CYCLES):  # each cycle: load, kill -9 mid-stream, restart, check
        clients = _load_and_kill(srv, b"fp")
        assert [e for c in clients for e in c.errors] == []
        got = [i for c in clients for i in c.acked]
        assert len(got) >= ACKS_BEFORE_KILL
        acked += got
        for c in clients:  # each connection's acks came in its own order, which the log keeps
            assert c.acked == sorted(c.acked, key=lambda i: tuple(map(int, i.split(b"-"))))
        srv = server_factory(data_dir=data)
        present = {entry_id for entry_id, _ in redis.Redis(port=srv.resp_port).xrange("fp")}
        missing = [i for i in acked if i not in present]
        assert missing == [], f"{len(missing)} of {len(acked)} acknowledged records lost"
