"""Pub/sub against a real `topicsrv serve` process: the `--client-output-buffer-limit-pubsub`
flag, and a subscriber that never reads (a 4 KB receive buffer) while a publisher sends 12.8 MB
of 64 KB messages: the bytes the server queues for it stay under the hard limit (INFO's
`pubsub_max_pending_bytes`), it is cut (the disconnect counter, EOF on its socket after an
in-order prefix of the messages), and two subscribers that read get every message in order.
The publisher goes in lock step with the readers (message i+1 after both got message i), so
the readers never fall behind and nothing depends on timing."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading

import pytest

N = 200
SIZE = 64 << 10
HARD = 1 << 20


def _cmd(*args: bytes) -> bytes:
    return b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%b\r\n" % (len(a), a) for a in args)


def _payload(i: int) -> bytes:
    return (b"%06d" % i) * (SIZE // 6) + b"x" * (SIZE % 6)


def _frame(i: int) -> bytes:
    p = _payload(i)
    return b"*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$%d\r\n%b\r\n" % (len(p), p)


def _recv_exact(s: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        assert chunk, buf[-200:]
        buf += chunk
    return buf


def _info(s: socket.socket) -> dict[str, str]:
    s.sendall(_cmd(b"INFO", b"stats"))
    head = b""
    while not head.endswith(b"\r\n"):
        head += s.recv(1)
    body = _recv_exact(s, int(head[1:-2]) + 2).decode()
    return dict(line.split(":", 1) for line in body.splitlines() if ":" in line)


def _subscribe(s: socket.socket) -> None:
    s.sendall(_cmd(b"SUBSCRIBE", b"ch"))
    want = b"*3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n"
    assert _recv_exact(s, len(want)) == want


def test_bad_pubsub_limit_flag_is_refused() -> None:
    run = subprocess.run([sys.executable, "-m", "topicsrv", "serve",
                          "--client-output-buffer-limit-pubsub", "32mb 8mb"],
                         capture_output=True, text=True)
    assert run.returncode == 2
    assert "Wrong number of arguments in buffer limit configuration." in run.stderr


@pytest.mark.parametrize("io", ["reactor", "tasks"])
def test_a_subscriber_that_never_reads_is_cut_at_the_hard_limit(server_factory, io: str) -> None:
    srv = server_factory("--client-output-buffer-limit-pubsub", "1mb 0 0", "--resp-io", io)
    port = srv.resp_port
    admin = socket.create_connection(("127.0.0.1", port), timeout=30)
    admin.sendall(_cmd(b"CONFIG", b"GET", b"client-output-buffer-limit"))
    assert b"pubsub 1048576 0 0" in admin.recv(4096)

    slow = socket.socket()
    slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connect: the window
    slow.settimeout(30)
    slow.connect(("127.0.0.1", port))
    _subscribe(slow)
    readers = [socket.create_connection(("127.0.0.1", port), timeout=30) for _ in range(2)]
    for r in readers:
        _subscribe(r)

    got = [bytearray(), bytearray()]
    progress = threading.Condition()

    def read(k: int) -> None:
        total = N * len(_frame(0))
        while len(got[k]) < total:
            chunk = readers[k].recv(1 << 20)
            if not chunk:
                return
            with progress:
                got[k] += chunk
                progress.notify_all()

    threads = [threading.Thread(target=read, args=(k,), daemon=True) for k in range(2)]
    for t in threads:
        t.start()
    pub = socket.create_connection(("127.0.0.1", port), timeout=30)
    receivers = []
    for i in range(N):
        pub.sendall(_cmd(b"PUBLISH", b"ch", _payload(i)))
        reply = b""
        while not reply.endswith(b"\r\n"):
            reply += pub.recv(16)
        receivers.append(int(reply[1:-2]))
        with progress:  # lock step: both readers have message i before i+1 is sent
            assert progress.wait_for(lambda i=i: all(len(g) >= (i + 1) * len(_frame(0))
                                                     for g in got), timeout=30)
    for t in threads:
        t.join(30)

    want = b"".join(_frame(i) for i in range(N))
    assert bytes(got[0]) == want and bytes(got[1]) == want  # every message, in order
    # 3 receivers up to the message that would cross the limit (dropped, yet counted as a
    # receiver, as Redis), 2 after it, never back
    cut_at = receivers.index(2) - 1
    assert cut_at > 0 and set(receivers[:cut_at + 1]) == {3} and set(receivers[cut_at + 1:]) == {2}

    stats = _info(admin)
    assert stats["pubsub_slow_subscriber_disconnections"] == "1"
    assert int(stats["pubsub_messages_dropped"]) == 1
    assert 0 < int(stats["pubsub_max_pending_bytes"]) <= HARD  # never more queued than hard
    assert int(stats["pubsub_messages_delivered"]) == 2 * N + cut_at

    # the slow subscriber: an in-order prefix of the messages (the last maybe cut short), then EOF
    seen = bytearray()
    while True:
        chunk = slow.recv(1 << 20)
        if not chunk:
            break
        seen += chunk
    whole = len(seen) // len(_frame(0))
    assert seen and whole <= cut_at  # messages 0 .. cut_at-1 were queued to it, some not sent
    assert want.startswith(bytes(seen))
    for s in (slow, pub, admin, *readers):
        s.close()
