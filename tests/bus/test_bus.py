"""The bus alone: routing, order, receiver counts, shard namespace, limits, keyspace flags."""

from __future__ import annotations

import pytest

from topicsrv.bus import Bus, Message, OutputLimits, Subscriber
from topicsrv.bus.keyspace import GENERIC, STREAM, flags_text, parse_flags
from topicsrv.clock import FakeClock


class Box(Subscriber):
    """A subscriber whose socket never reads: everything queued stays pending."""

    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name
        self.got: list[tuple[bytes | None, bytes, bytes]] = []
        self.queued = 0
        self.cuts: list[str] = []

    def encode(self, msg: Message, pattern: bytes | None) -> bytes:
        self.got.append((pattern, msg.channel, msg.payload))
        return msg.payload

    def pending(self) -> int:
        return self.queued

    def enqueue(self, data: bytes) -> None:
        self.queued += len(data)

    def cut(self, reason: str) -> None:
        self.cuts.append(reason)


def test_channel_then_patterns_one_delivery_each() -> None:
    bus = Bus()
    a, b = Box("a"), Box("b")
    assert bus.subscribe(a, b"news")
    assert not bus.subscribe(a, b"news")  # already
    assert bus.psubscribe(a, b"n*")
    assert bus.psubscribe(b, b"n?ws")
    assert bus.publish(b"news", b"hi") == 3
    assert a.got == [(None, b"news", b"hi"), (b"n*", b"news", b"hi")]
    assert b.got == [(b"n?ws", b"news", b"hi")]
    assert bus.publish(b"other", b"x") == 0
    assert (bus.stats.published, bus.stats.delivered) == (2, 3)


def test_publish_order_is_kept() -> None:
    bus = Bus()
    a = Box("a")
    bus.subscribe(a, b"c")
    for i in range(100):
        bus.publish(b"c", b"%d" % i)
    assert [m for _, _, m in a.got] == [b"%d" % i for i in range(100)]


def test_shard_channels_are_their_own_namespace() -> None:
    bus = Bus()
    a, b = Box("a"), Box("b")
    bus.ssubscribe(a, b"orders")
    bus.psubscribe(b, b"*")
    assert bus.publish(b"orders", b"plain") == 1  # only the pattern: not the shard subscriber
    assert bus.spublish(b"orders", b"shard") == 1  # no pattern ever matches a shard channel
    assert a.got == [(None, b"orders", b"shard")]
    assert b.got == [(b"*", b"orders", b"plain")]
    assert bus.active_channels(None, shard=True) == [b"orders"]
    assert bus.active_channels(None) == []


def test_unsubscribe_and_leave_all_empty_the_maps() -> None:
    bus = Bus()
    a, b = Box("a"), Box("b")
    bus.subscribe(a, b"x")
    bus.subscribe(b, b"x")
    bus.psubscribe(a, b"p*")
    bus.ssubscribe(a, b"s")
    assert bus.numsub(b"x") == 2 and bus.numpat() == 1
    assert bus.unsubscribe(b, b"x") and not bus.unsubscribe(b, b"x")
    bus.leave_all(a)
    assert (bus.channels, bus.patterns, bus.shard_channels) == ({}, {}, {})
    assert not a.subscribed()


def test_hard_limit_cuts_before_queueing() -> None:
    bus = Bus(limits=OutputLimits(hard=10, soft=0, soft_seconds=0))
    slow, fine = Box("slow"), Box("fine")
    bus.subscribe(slow, b"c")
    bus.subscribe(fine, b"c")
    fine.pending = lambda: 0  # type: ignore[method-assign]  # a reader that keeps up
    assert bus.publish(b"c", b"123456") == 2
    assert bus.publish(b"c", b"123456") == 2  # slow would hold 12 > 10: cut, not queued
    assert slow.queued == 6 and len(slow.cuts) == 1
    assert bus.numsub(b"c") == 1
    assert bus.publish(b"c", b"123456") == 1
    assert fine.queued == 18
    assert (bus.stats.dropped, bus.stats.slow_disconnects) == (1, 1)


def test_soft_limit_needs_its_seconds() -> None:
    clock = FakeClock()
    bus = Bus(clock=clock, limits=OutputLimits(hard=0, soft=5, soft_seconds=2))
    a = Box("a")
    bus.subscribe(a, b"c")
    bus.publish(b"c", b"123456")  # over soft: the timer starts
    clock.advance(2000)
    bus.publish(b"c", b"1")  # exactly 2 s: not yet
    assert not a.cuts
    clock.advance(1)
    bus.publish(b"c", b"1")
    assert len(a.cuts) == 1 and "soft limit" in a.cuts[0]


def test_soft_timer_resets_under_the_limit() -> None:
    clock = FakeClock()
    bus = Bus(clock=clock, limits=OutputLimits(hard=0, soft=5, soft_seconds=1))
    a = Box("a")
    bus.subscribe(a, b"c")
    bus.publish(b"c", b"123456")
    assert a.soft_since is not None
    a.queued = 0  # the client read everything
    bus.publish(b"c", b"1")
    assert a.soft_since is None


@pytest.mark.parametrize(("text", "shown"), [
    ("An", "A"), ("KEA", "AKE"), ("gxK", "gxK"), ("Kn", "nK"), ("Kgn", "gnK"), ("Ag", "A"),
    ("KEm", "KEm"), ("KE$lshzxetd", "$lshzxetdKE"), ("KE$lshzxetdn", "$lshzxetdnKE"), ("", ""),
])
def test_flags_read_back_as_redis_renders_them(text: str, shown: str) -> None:
    assert flags_text(parse_flags(text)) == shown  # checked against redis-server 7.0.15


def test_unknown_flag_letter() -> None:
    with pytest.raises(ValueError, match="Invalid event class character"):
        parse_flags("KEq")


def test_keyspace_notifications_need_k_or_e_and_the_class() -> None:
    bus = Bus()
    a = Box("a")
    bus.psubscribe(a, b"__key*__:*")
    bus.notify(STREAM, b"xadd", b"k")  # off by default
    bus.keyspace.flags = parse_flags("t")  # a class without K/E: nothing
    bus.notify(STREAM, b"xadd", b"k")
    bus.keyspace.flags = parse_flags("KEt")
    bus.notify(GENERIC, b"del", b"k")  # class not enabled
    bus.notify(STREAM, b"xadd", b"k")
    assert a.got == [(b"__key*__:*", b"__keyspace@0__:k", b"xadd"),
                     (b"__key*__:*", b"__keyevent@0__:xadd", b"k")]
