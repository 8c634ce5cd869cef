"""The pub/sub bus: channel -> subscribers, pattern -> subscribers, shard channel -> subscribers.

A bus beside the engine, not in it (docs/architecture.md): nothing is stored. Both fronts
subscribe to the same Bus (`ServerContext.bus`): a RESP session (topicsrv/resp/pubsub.py) and
an SSE stream (topicsrv/http/channels.py) are `Subscriber`s; a publish from either front
reaches both.

Rule 1 (at-most-once, no storage): `publish` hands the message to the subscribers connected
at that instant, synchronously, and forgets it. A subscriber that joins later never sees it;
a subscriber that is cut loses what it had not read.
Rule 2 (order): `publish` runs to completion before the caller goes on, so the messages of one
publisher reach every subscriber in publish order. Within one publish Redis's order is kept:
the channel's subscribers first (in subscription order), then each matching pattern (in
subscription order of the patterns), one delivery per (subscriber, channel-or-pattern): a
client subscribed to `news` and to `n*` receives a `news` message twice.
Rule 3 (receivers): `publish` answers the number of deliveries made, as Redis's PUBLISH.
Rule 4 (bounded memory): each delivery goes through `Subscriber.offer`, which queues the
encoded bytes only if the subscriber's pending bytes stay within the hard limit
(topicsrv/bus/limits.py); a subscriber over the hard limit, or over the soft limit for longer
than its seconds, is cut (disconnected, logged, counted) and the message counted dropped. So a
subscriber that never reads holds at most `hard` bytes of server memory.
Rule 5: shard channels (SSUBSCRIBE/SPUBLISH) are a namespace of their own, as redis-server
without cluster: no pattern ever matches them.
Rule 6: sans-IO and synchronous: no trio, no sockets; waking a front's writer is the
subscriber's business (`Subscriber.offer` returns, the front schedules the write).
Rule 7 (one call a delivery): a publish reads the clock once and hands each subscriber the
message, the limits and that reading in ONE `offer` call, which encodes (cached per wire
shape), checks the limits and queues, or refuses; the bus counts once per subscriber list.
"""

from __future__ import annotations

import logging
from abc import abstractmethod
from dataclasses import dataclass
from typing import Any

from mypy_extensions import mypyc_attr

from topicsrv.bus.keyspace import Notifications
from topicsrv.bus.limits import OutputLimits
from topicsrv.clock import Clock, SystemClock
from topicsrv.engine.glob import Glob, compile_glob

log = logging.getLogger("topicsrv.bus")

MESSAGE = b"message"
PMESSAGE = b"pmessage"
SMESSAGE = b"smessage"


@dataclass(slots=True)
class BusStats:
    """What the bus counts (INFO, /metrics, the status page)."""

    published: int = 0  # PUBLISH/SPUBLISH/HTTP publish calls
    delivered: int = 0  # deliveries queued to a subscriber
    dropped: int = 0  # deliveries refused: the subscriber was over its limit and cut
    slow_disconnects: int = 0  # subscribers cut by the output-buffer limits
    max_pending: int = 0  # the most bytes one subscriber held queued after a delivery


class Message:
    """One publish: the fronts cache their encodings of it in `cache` (one per wire shape),
    so fifty RESP2 subscribers share one encoding."""

    __slots__ = ("channel", "payload", "shard", "cache")

    def __init__(self, channel: bytes, payload: bytes, shard: bool) -> None:
        self.channel = channel
        self.payload = payload
        self.shard = shard
        self.cache: dict[Any, bytes] = {}


@mypyc_attr(allow_interpreted_subclasses=True)
class Subscriber:
    """A front's end of the bus. Subclasses implement `encode`, `pending`, `enqueue`, `cut`
    (compiled with the bus: the SSE subscriber is an interpreted subclass).

    The sets are the subscriber's subscriptions, in subscription order (dicts as ordered sets);
    the bus keeps them in step with its own maps.
    """

    def __init__(self) -> None:
        self.channels: dict[bytes, None] = {}
        self.patterns: dict[bytes, None] = {}
        self.shard_channels: dict[bytes, None] = {}
        self.soft_since: int | None = None  # ms when pending first passed the soft limit
        self.gone = False  # cut or left: takes no more deliveries
        self.refused = ""  # why `offer` refused the last delivery (Rule 7)

    def count(self) -> int:
        """Channels + patterns: the count SUBSCRIBE/PSUBSCRIBE replies show (Redis 7)."""
        return len(self.channels) + len(self.patterns)

    def subscribed(self) -> bool:
        return bool(self.channels or self.patterns or self.shard_channels)

    # ---- implemented by the fronts ------------------------------------------------------

    @abstractmethod
    def encode(self, msg: Message, pattern: bytes | None) -> bytes:
        """The bytes one delivery adds to this subscriber's output."""
        raise NotImplementedError

    @abstractmethod
    def pending(self) -> int:
        """Bytes queued to this subscriber and not yet taken by its socket."""
        raise NotImplementedError

    @abstractmethod
    def enqueue(self, data: bytes) -> None:
        """Queue `data` and make sure the front's writer will send it."""
        raise NotImplementedError

    @abstractmethod
    def cut(self, reason: str) -> None:
        """Disconnect the subscriber (it was over its output limit)."""
        raise NotImplementedError

    def offer(self, msg: Message, pattern: bytes | None, limits: OutputLimits, now_ms: int) -> int:
        """Rule 7: one delivery within the limits (Rule 4): the bytes pending after it when it
        was queued, or -1 when the subscriber must be cut (the reason in `refused`). Compiled
        with the RESP subscriber and the limits, so its calls are native ones there."""
        data = self.encode(msg, pattern)
        pending = self.pending() + len(data)
        reason = limits.check(self, pending, now_ms)
        if reason is not None:
            self.refused = reason
            return -1
        self.enqueue(data)
        return pending


class Bus:
    def __init__(self, clock: Clock | None = None, limits: OutputLimits | None = None) -> None:
        self.clock: Clock = clock or SystemClock()
        self.limits = limits or OutputLimits()
        self.channels: dict[bytes, dict[Subscriber, None]] = {}
        self.patterns: dict[bytes, tuple[Glob, dict[Subscriber, None]]] = {}
        self.shard_channels: dict[bytes, dict[Subscriber, None]] = {}
        self.stats = BusStats()
        self.keyspace = Notifications(self)  # notify-keyspace-events (keyspace.py)

    def notify(self, klass: int, event: bytes, key: bytes) -> None:
        """A keyspace notification (topicsrv/bus/keyspace.py; free when they are off)."""
        self.keyspace.notify(klass, event, key)

    # ---- subscriptions (each returns True when the subscription is new) ------------------

    def subscribe(self, sub: Subscriber, channel: bytes) -> bool:
        return _join(self.channels, sub.channels, sub, channel)

    def unsubscribe(self, sub: Subscriber, channel: bytes) -> bool:
        return _leave(self.channels, sub.channels, sub, channel)

    def ssubscribe(self, sub: Subscriber, channel: bytes) -> bool:
        return _join(self.shard_channels, sub.shard_channels, sub, channel)

    def sunsubscribe(self, sub: Subscriber, channel: bytes) -> bool:
        return _leave(self.shard_channels, sub.shard_channels, sub, channel)

    def psubscribe(self, sub: Subscriber, pattern: bytes) -> bool:
        """Raises engine.glob.PatternTooLong for a pattern the matcher refuses."""
        if pattern in sub.patterns:
            return False
        entry = self.patterns.get(pattern)
        if entry is None:
            entry = self.patterns[pattern] = (compile_glob(pattern), {})
        entry[1][sub] = None
        sub.patterns[pattern] = None
        return True

    def punsubscribe(self, sub: Subscriber, pattern: bytes) -> bool:
        if pattern not in sub.patterns:
            return False
        del sub.patterns[pattern]
        entry = self.patterns.get(pattern)
        if entry is not None:
            entry[1].pop(sub, None)
            if not entry[1]:
                del self.patterns[pattern]
        return True

    def leave_all(self, sub: Subscriber) -> None:
        """Every subscription of `sub` ends (disconnect, RESET); it takes no more messages."""
        for ch in list(sub.channels):
            self.unsubscribe(sub, ch)
        for p in list(sub.patterns):
            self.punsubscribe(sub, p)
        for ch in list(sub.shard_channels):
            self.sunsubscribe(sub, ch)

    # ---- publishing -----------------------------------------------------------------------

    def publish(self, channel: bytes, payload: bytes) -> int:
        """Deliver to the channel's subscribers and the matching patterns' (Rules 1-3)."""
        self.stats.published += 1
        subs = self.channels.get(channel)
        patterns = self.patterns
        if not subs and not patterns:
            return 0
        msg = Message(channel, payload, False)
        cut: list[tuple[Subscriber, str]] = []
        now = self.clock.now_ms()
        n = 0
        if subs:
            n += self._deliver(subs, msg, None, now, cut)
        if patterns:
            for pattern, (glob, psubs) in patterns.items():
                if glob.match(channel):
                    n += self._deliver(psubs, msg, pattern, now, cut)
        self._cut(cut)
        return n

    def spublish(self, channel: bytes, payload: bytes) -> int:
        """Deliver to the shard channel's subscribers (Rule 5)."""
        self.stats.published += 1
        subs = self.shard_channels.get(channel)
        if not subs:
            return 0
        msg = Message(channel, payload, True)
        cut: list[tuple[Subscriber, str]] = []
        n = self._deliver(subs, msg, None, self.clock.now_ms(), cut)
        self._cut(cut)
        return n

    def _deliver(self, subs: dict[Subscriber, None], msg: Message, pattern: bytes | None,
                 now: int, cut: list[tuple[Subscriber, str]]) -> int:
        """One delivery to each of `subs`, within the limits (Rule 4), one `offer` call each
        (Rule 7); the receivers, counted as Redis does (a delivery dropped because its
        subscriber is being cut counts too)."""
        stats = self.stats
        limits = self.limits
        top = stats.max_pending
        delivered = dropped = 0
        for sub in subs:
            if sub.gone:
                dropped += 1
                continue
            pending = sub.offer(msg, pattern, limits, now)
            if pending < 0:
                sub.gone = True
                dropped += 1
                cut.append((sub, sub.refused))
                log.warning("pub/sub subscriber %r closed for overcoming of output buffer "
                            "limits: %s", sub, sub.refused)
                continue
            delivered += 1
            if pending > top:
                top = pending
        stats.delivered += delivered
        stats.dropped += dropped
        stats.max_pending = top
        return len(subs)

    def _cut(self, cut: list[tuple[Subscriber, str]]) -> None:
        for sub, reason in cut:
            self.stats.slow_disconnects += 1
            self.leave_all(sub)
            sub.cut(reason)

    # ---- introspection (PUBSUB) -------------------------------------------------------------

    def active_channels(self, pattern: bytes | None, shard: bool = False) -> list[bytes]:
        names = self.shard_channels if shard else self.channels
        if pattern is None:
            return list(names)
        match = compile_glob(pattern).match
        return [ch for ch in names if match(ch)]

    def numsub(self, channel: bytes, shard: bool = False) -> int:
        subs = (self.shard_channels if shard else self.channels).get(channel)
        return len(subs) if subs else 0

    def numpat(self) -> int:
        return len(self.patterns)


def _join(index: dict[bytes, dict[Subscriber, None]], own: dict[bytes, None], sub: Subscriber,
          channel: bytes) -> bool:
    if channel in own:
        return False
    own[channel] = None
    subs = index.get(channel)
    if subs is None:
        subs = index[channel] = {}
    subs[sub] = None
    return True


def _leave(index: dict[bytes, dict[Subscriber, None]], own: dict[bytes, None], sub: Subscriber,
           channel: bytes) -> bool:
    if channel not in own:
        return False
    del own[channel]
    subs = index.get(channel)
    if subs is not None:
        subs.pop(sub, None)
        if not subs:
            del index[channel]
    return True
