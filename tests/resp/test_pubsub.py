"""Pub/sub over RESP on both I/O paths: reply and push bytes, subscribed mode, CLIENT LIST,
RESET, ACL, the bus shared by every connection."""

from __future__ import annotations

import socket

from tests.resp.conftest import InProc, frame, read_until, start_inproc, wait_for


def call(s: socket.socket, *args: bytes, want: bytes = b"\r\n") -> bytes:
    s.sendall(frame(*args))
    return read_until(s, want)


def exact(s: socket.socket, n: int, timeout: float = 5.0) -> bytes:
    s.settimeout(timeout)
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        assert chunk, buf
        buf += chunk
    return buf


SUB_AB = (b"*3\r\n$9\r\nsubscribe\r\n$1\r\na\r\n:1\r\n"
          b"*3\r\n$9\r\nsubscribe\r\n$1\r\nb\r\n:2\r\n"
          b"*3\r\n$9\r\nsubscribe\r\n$1\r\na\r\n:2\r\n")


def test_subscribe_publish_resp2(inproc: InProc) -> None:
    sub, pub = inproc.connect(), inproc.connect()
    sub.sendall(frame(b"SUBSCRIBE", b"a", b"b", b"a"))
    assert exact(sub, len(SUB_AB)) == SUB_AB
    assert call(pub, b"PUBLISH", b"a", b"hello") == b":1\r\n"
    msg = b"*3\r\n$7\r\nmessage\r\n$1\r\na\r\n$5\r\nhello\r\n"
    assert exact(sub, len(msg)) == msg
    assert call(pub, b"PUBLISH", b"zz", b"x") == b":0\r\n"


def test_subscribed_mode_resp2(inproc: InProc) -> None:
    s = inproc.connect()
    s.sendall(frame(b"SUBSCRIBE", b"a"))
    exact(s, len(b"*3\r\n$9\r\nsubscribe\r\n$1\r\na\r\n:1\r\n"))
    assert call(s, b"XLEN", b"x") == (
        b"-ERR Can't execute 'xlen': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / "
        b"RESET are allowed in this context\r\n")
    assert call(s, b"PING", want=b"\r\n\r\n") == b"*2\r\n$4\r\npong\r\n$0\r\n\r\n"
    s.sendall(frame(b"PING", b"hi"))
    assert exact(s, 22) == b"*2\r\n$4\r\npong\r\n$2\r\nhi\r\n"
    assert call(s, b"FOO").startswith(b"-ERR unknown command 'FOO'")
    assert call(s, b"RESET") == b"+RESET\r\n"
    assert call(s, b"PING") == b"+PONG\r\n"
    assert inproc.ctx.bus.channels == {}


def test_resp3_push_interleaved_with_replies(inproc: InProc) -> None:
    s = inproc.connect()
    assert call(s, b"HELLO", b"3", want=b"modules").startswith(b"%7")
    s.sendall(frame(b"SUBSCRIBE", b"a"))
    assert exact(s, 30) == b">3\r\n$9\r\nsubscribe\r\n$1\r\na\r\n:1\r\n"
    # a subscriber may publish to itself: the push comes before PUBLISH's reply, as Redis
    s.sendall(frame(b"PUBLISH", b"a", b"m") + frame(b"PING"))
    want = b">3\r\n$7\r\nmessage\r\n$1\r\na\r\n$1\r\nm\r\n:1\r\n+PONG\r\n"
    assert exact(s, len(want)) == want


def test_patterns_shards_and_counts(inproc: InProc) -> None:
    s, pub = inproc.connect(), inproc.connect()
    s.sendall(frame(b"PSUBSCRIBE", b"n*") + frame(b"SSUBSCRIBE", b"s1"))
    want = (b"*3\r\n$10\r\npsubscribe\r\n$2\r\nn*\r\n:1\r\n"
            b"*3\r\n$10\r\nssubscribe\r\n$2\r\ns1\r\n:1\r\n")
    assert exact(s, len(want)) == want
    assert call(pub, b"PUBLISH", b"news", b"x") == b":1\r\n"
    assert call(pub, b"SPUBLISH", b"s1", b"y") == b":1\r\n"
    assert call(pub, b"PUBLISH", b"s1", b"z") == b":0\r\n"  # shard channels: own namespace
    want = (b"*4\r\n$8\r\npmessage\r\n$2\r\nn*\r\n$4\r\nnews\r\n$1\r\nx\r\n"
            b"*3\r\n$8\r\nsmessage\r\n$2\r\ns1\r\n$1\r\ny\r\n")
    assert exact(s, len(want)) == want
    assert call(pub, b"PUBSUB", b"NUMPAT") == b":1\r\n"
    assert call(pub, b"PUBSUB", b"SHARDNUMSUB", b"s1", want=b":1\r\n") == \
        b"*2\r\n$2\r\ns1\r\n:1\r\n"
    assert call(pub, b"PUBSUB", b"SHARDCHANNELS", want=b"s1\r\n") == b"*1\r\n$2\r\ns1\r\n"
    assert call(pub, b"PUBSUB", b"CHANNELS") == b"*0\r\n"
    line = call(pub, b"CLIENT", b"LIST", want=b"cmd=client|list").decode()
    mine = next(x for x in line.split("\n") if "cmd=ssubscribe" in x)
    assert " flags=P " in mine and " sub=0 psub=1 ssub=1 " in mine
    info = call(pub, b"INFO", b"stats", want=b"records_read").decode()
    assert "pubsub_channels:0\r\npubsub_patterns:1\r\npubsubshard_channels:1\r\n" in info


def test_unsubscribe_all_and_disconnect_leave_the_bus(inproc: InProc) -> None:
    s = inproc.connect()
    assert call(s, b"UNSUBSCRIBE") == b"*3\r\n$11\r\nunsubscribe\r\n$-1\r\n:0\r\n"
    s.sendall(frame(b"SUBSCRIBE", b"a", b"b"))
    exact(s, 60)
    s.sendall(frame(b"UNSUBSCRIBE"))
    want = (b"*3\r\n$11\r\nunsubscribe\r\n$1\r\na\r\n:1\r\n"
            b"*3\r\n$11\r\nunsubscribe\r\n$1\r\nb\r\n:0\r\n")
    assert exact(s, len(want)) == want
    assert call(s, b"XLEN", b"x") == b":0\r\n"  # out of subscribed mode
    s.sendall(frame(b"SUBSCRIBE", b"c"))
    exact(s, 30)
    assert inproc.ctx.bus.numsub(b"c") == 1
    s.close()
    wait_for(lambda: inproc.ctx.bus.numsub(b"c") == 0)


def test_reader_may_subscribe_not_publish() -> None:
    srv, stop = start_inproc(read_token="r3ad")
    try:
        s = srv.connect()
        assert call(s, b"AUTH", b"reader", b"r3ad") == b"+OK\r\n"
        assert call(s, b"PUBLISH", b"a", b"x") == (
            b"-NOPERM this user has no permissions to run the 'publish' command\r\n")
        assert call(s, b"SPUBLISH", b"a", b"x").startswith(b"-NOPERM")
        s.sendall(frame(b"SUBSCRIBE", b"a"))
        assert exact(s, 30) == b"*3\r\n$9\r\nsubscribe\r\n$1\r\na\r\n:1\r\n"
    finally:
        stop()


def test_many_messages_in_order_to_many_subscribers(inproc: InProc) -> None:
    subs = [inproc.connect() for _ in range(5)]
    for s in subs:
        s.sendall(frame(b"SUBSCRIBE", b"c"))
        exact(s, 30)
    pub = inproc.connect()
    pub.sendall(b"".join(frame(b"PUBLISH", b"c", b"%04d" % i) for i in range(500)))
    assert read_until(pub, b":5\r\n" * 500) == b":5\r\n" * 500
    want = b"".join(b"*3\r\n$7\r\nmessage\r\n$1\r\nc\r\n$4\r\n%04d\r\n" % i for i in range(500))
    for s in subs:
        assert exact(s, len(want)) == want


def test_a_pipelined_run_of_publish_is_counted_and_answered_as_alone(inproc: InProc) -> None:
    """PUBLISH runs past the dispatcher (batch_colls.py): each its own reply, in order, a
    wrong arity or a subscribed client's PUBLISH still the dispatcher's, and INFO's counts
    (commandstats calls, last command) as if each ran alone."""
    sub, pub = inproc.connect(), inproc.connect()
    sub.sendall(frame(b"SUBSCRIBE", b"c"))
    exact(sub, 30)
    pub.sendall(frame(b"PUBLISH", b"c", b"1") + frame(b"publish", b"nobody", b"2")
                + frame(b"PUBLISH", b"c") + frame(b"PuBlIsH", b"c", b"3"))
    want = (b":1\r\n:0\r\n-ERR wrong number of arguments for 'publish' command\r\n:1\r\n")
    assert read_until(pub, want) == want
    msgs = b"".join(b"*3\r\n$7\r\nmessage\r\n$1\r\nc\r\n$1\r\n%d\r\n" % i for i in (1, 3))
    assert exact(sub, len(msgs)) == msgs
    assert b"cmd=publish" in call(inproc.connect(), b"CLIENT", b"LIST", want=b"\n\r\n")
    stats = call(pub, b"INFO", b"commandstats", want=b"\r\n\r\n")
    line = stats.split(b"cmdstat_publish:")[1].split(b"\r\n")[0]
    assert line.startswith(b"calls=3,") and b"rejected_calls=1," in line


def test_keyspace_notifications(inproc: InProc) -> None:
    c, s = inproc.connect(), inproc.connect()
    assert call(c, b"CONFIG", b"GET", b"notify-keyspace-events", want=b"\r\n$0\r\n\r\n") == \
        b"*2\r\n$22\r\nnotify-keyspace-events\r\n$0\r\n\r\n"
    s.sendall(frame(b"PSUBSCRIBE", b"__key*__:*"))
    exact(s, len(b"*3\r\n$10\r\npsubscribe\r\n$10\r\n__key*__:*\r\n:1\r\n"))
    # off by default: nothing is published
    c.sendall(frame(b"XADD", b"k0", b"*", b"f", b"v") + frame(b"XADD", b"k0", b"*", b"f", b"v"))
    read_until(c, b"\r\n$")
    assert call(c, b"CONFIG", b"SET", b"notify-keyspace-events", b"KEA") == b"+OK\r\n"
    assert call(c, b"CONFIG", b"GET", b"notify-keyspace-events", want=b"AKE\r\n").endswith(
        b"$3\r\nAKE\r\n")
    assert call(c, b"CONFIG", b"SET", b"notify-keyspace-events", b"KEq").startswith(
        b"-ERR CONFIG SET failed (possibly related to argument 'notify-keyspace-events') - "
        b"Invalid event class character.")
    assert call(c, b"CONFIG", b"SET", b"notify-keyspace-events", b"KEtgn") == b"+OK\r\n"
    c.sendall(frame(b"XADD", b"k1", b"MAXLEN", b"1", b"*", b"f", b"v")
              + frame(b"XADD", b"k1", b"MAXLEN", b"1", b"*", b"f", b"v")
              + frame(b"XDEL", b"k1", b"0-1") + frame(b"DEL", b"k1", b"nokey"))
    read_until(c, b":1\r\n")

    def ev(chan: bytes, msg: bytes) -> bytes:
        return b"*4\r\n$8\r\npmessage\r\n$10\r\n__key*__:*\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n" % (
            len(chan), chan, len(msg), msg)

    def both(event: bytes) -> bytes:
        return ev(b"__keyspace@0__:k1", event) + ev(b"__keyevent@0__:" + event, b"k1")

    want = both(b"new") + both(b"xadd") + both(b"xadd") + both(b"xtrim") + both(b"del")
    assert exact(s, len(want)) == want  # XDEL of an absent ID fires nothing
