"""A RESP connection as a pub/sub subscriber: the session's output buffer is its queue.

Rule 1 (one output, in order): a delivery is appended to the session's `out`, the same
buffer its replies go to, so a RESP3 client sees push messages interleaved with its replies
in the order they happened (a client that publishes to a channel it is subscribed to sees
the message before PUBLISH's reply, as with redis-server), and a RESP2 client in subscribed
mode sees each message as one array.
Rule 2 (bounded): `pending` is what `out` holds and the socket has not taken; the bus checks
it against the pubsub limits before each delivery (topicsrv/bus/limits.py). A subscriber past
them is cut: its unsent output is dropped at once and the connection is killed (CLIENT KILL's
path), logged and counted by the bus.
Rule 3 (waking the writer): after appending, `session.wake()` tells the I/O adapter that
output is due although the client sent nothing: the reactor flushes idle sockets in a batch
(topicsrv/resp/reactor.py), a connection task parked in a read is woken
(topicsrv/resp/connection.py). Several deliveries before the writer runs go out as one send.
Rule 4: encodings are cached on the Message per (protocol, pattern), so a publish to fifty
subscribers of one protocol encodes once.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from topicsrv.bus import Bus, Message, Subscriber
from topicsrv.bus.bus import MESSAGE, PMESSAGE, SMESSAGE

if TYPE_CHECKING:
    from topicsrv.resp.commands.base import Client

log = logging.getLogger("topicsrv.resp")


def _bulk(b: bytes) -> bytes:
    return b"$%d\r\n%s\r\n" % (len(b), b)


def message_frame(msg: Message, pattern: bytes | None, resp3: bool) -> bytes:
    """`message`/`pmessage`/`smessage` as redis-server sends it (array or RESP3 push)."""
    head = b">" if resp3 else b"*"
    if pattern is not None:
        return b"%s4\r\n%s%s%s%s" % (head, _bulk(PMESSAGE), _bulk(pattern), _bulk(msg.channel),
                                      _bulk(msg.payload))
    kind = SMESSAGE if msg.shard else MESSAGE
    return b"%s3\r\n%s%s%s" % (head, _bulk(kind), _bulk(msg.channel), _bulk(msg.payload))


class RespSubscriber(Subscriber):
    def __init__(self, session: Any) -> None:
        super().__init__()
        self.session = session  # topicsrv/resp/session.py Session (compiled: typed loosely)

    def __repr__(self) -> str:
        c = self.session.client
        return f"<client id={c.id} addr={c.addr}>"

    def encode(self, msg: Message, pattern: bytes | None) -> bytes:
        resp3 = self.session.client.protocol == 3
        key = resp3 if pattern is None else (resp3, pattern)
        data = msg.cache.get(key)
        if data is None:
            data = msg.cache[key] = message_frame(msg, pattern, resp3)
        return data

    def pending(self) -> int:
        s = self.session
        return len(s.out) - s.sent_off

    def enqueue(self, data: bytes) -> None:
        s = self.session
        s.out += data
        s.wake()

    def cut(self, reason: str) -> None:
        s = self.session
        client = s.client
        log.warning("client id=%d addr=%s closed for overcoming of output buffer limits "
                    "(pubsub): %s", client.id, client.addr, reason)
        s.drop_output()
        client.kill()


def subscriber(client: Client) -> RespSubscriber:
    """The client's subscriber, created on its first subscription."""
    sub = client.pubsub
    if sub is None:
        sub = client.pubsub = RespSubscriber(client.session)
    assert isinstance(sub, RespSubscriber)
    return sub


def leave(bus: Bus, client: Client) -> None:
    """The client leaves every channel (RESET, disconnect); it is no longer subscribed."""
    sub = client.pubsub
    if sub is not None:
        bus.leave_all(sub)
        sub.gone = True
        client.pubsub = None
