"""Consumer lines (topicsrv/notify/lines.py) and served waiters (Rules 9-12 of topicsrv/notify):
a key makes only as many of its waiting consumers ready as it has units for, first come first
served; a consumer that leaves passes its turn on; one that comes back empty keeps its place.

The key is a list of units in the test; its line's supply is the list's length. Trio time is
a MockClock that moves only when told (timeouts), so nothing here depends on the machine.
"""

from __future__ import annotations

from typing import Any

import trio
import trio.testing

from topicsrv.notify import NOTHING, Notifier, Waiter
from topicsrv.notify.blocks import Block
from topicsrv.notify.lines import Line


class Key:
    """A key holding units (a stream's new entries, a queue's jobs)."""

    def __init__(self, n: Notifier, name: str = "k") -> None:
        self.n = n
        self.name = name
        self.units: list[int] = []
        self.next = 0
        self.line: Line = n.line(("test", name), name, lambda: len(self.units))

    def put(self, k: int = 1) -> None:
        """K units in one step (one change)."""
        self.units += range(self.next, self.next + k)
        self.next += k
        self.n.changed(self.name)

    def taker(self, got: list[tuple[int, list[int]]], who: int, demand: int = 1) -> Any:
        def take() -> Any:
            if not self.units:
                return NOTHING
            mine, self.units[:demand] = self.units[:demand], []
            got.append((who, mine))
            return mine
        return take


async def settle() -> None:
    await trio.testing.wait_all_tasks_blocked()


def consumers(key: Key, got: list[tuple[int, list[int]]], count: int, demand: int = 1) -> list[Waiter]:
    out = []
    for i in range(count):
        w = key.n.consumer([key.line], demand, key.taker(got, i, demand))
        w.arm()
        out.append(w)
    return out


async def test_one_unit_makes_one_of_fifty_consumers_ready_the_first(
        mock_clock: trio.testing.MockClock) -> None:
    n = Notifier()
    key = Key(n)
    got: list[tuple[int, list[int]]] = []
    ws = consumers(key, got, 50)
    await settle()
    assert n.armed("k") == 50 and n.statistics()["parked"] == 50
    before = n.statistics()
    key.put()
    await settle()
    after = n.statistics()
    assert after["wakeups"] - before["wakeups"] == 1
    assert after["served"] - before["served"] == 1 and after["served_empty"] == 0
    assert got == [(0, [0])] and ws[0].result == [0]
    assert n.armed("k") == 49
    for w in ws:
        w.close()
    assert n.statistics()["lines"] == 0 and n.waiting_topics() == 0


async def test_a_burst_of_k_units_makes_k_ready_in_arrival_order(
        mock_clock: trio.testing.MockClock) -> None:
    n = Notifier()
    key = Key(n)
    got: list[tuple[int, list[int]]] = []
    ws = consumers(key, got, 30)
    await settle()
    before = n.statistics()["wakeups"]
    key.put(5)
    await settle()
    assert n.statistics()["wakeups"] - before == 5
    assert got == [(i, [i]) for i in range(5)]  # the first to wait gets the first unit
    key.put()
    key.put()
    await settle()
    assert got[5:] == [(5, [5]), (6, [6])] and n.armed("k") == 23
    for w in ws:
        w.close()


async def test_demand_counts_every_unit_a_consumer_may_take(
        mock_clock: trio.testing.MockClock) -> None:
    n = Notifier()
    key = Key(n)
    got: list[tuple[int, list[int]]] = []
    ws = consumers(key, got, 10, demand=3)
    await settle()
    key.put(7)
    await settle()
    assert got == [(0, [0, 1, 2]), (1, [3, 4, 5]), (2, [6])]
    assert n.statistics()["wakeups"] == 3
    for w in ws:
        w.close()


async def test_a_consumer_that_comes_back_empty_keeps_its_place_and_exhausts_the_key(
        mock_clock: trio.testing.MockClock) -> None:
    """Nothing for it (its reply would not fit, say): nobody else is tried until the key
    changes again, and then it is still first in line."""
    n = Notifier()
    key = Key(n)
    got: list[tuple[int, list[int]]] = []
    ws = consumers(key, got, 5)
    take = key.taker(got, 0)
    refused: list[int] = []

    def first() -> Any:
        if not refused:
            refused.append(1)
            return NOTHING
        return take()

    ws[0].serve = first
    await settle()
    key.put()
    await settle()
    st = n.statistics()
    assert (st["wakeups"], st["served"], st["served_empty"]) == (1, 1, 1) and got == []
    assert key.line.exhausted and n.armed("k") == 5
    key.put()
    await settle()
    assert got == [(0, [0]), (1, [1])]  # its place was kept
    for w in ws:
        w.close()


async def test_a_consumer_that_leaves_while_ready_passes_its_turn_on(
        mock_clock: trio.testing.MockClock) -> None:
    """A Block whose client is found gone just before its attempt gets nothing, and the unit
    goes to the next in line in the same step (notify Rule 12)."""
    n = Notifier()
    key = Key(n)
    got: list[tuple[int, list[int]]] = []
    gone = Block(n, key.taker(got, 0), lines=[key.line])
    gone.attach(lambda: None, lambda: False)
    rest = [Block(n, key.taker(got, i), lines=[key.line]) for i in (1, 2)]
    for b in rest:
        b.attach(lambda: None, lambda: True)
    await settle()
    key.put()
    await settle()
    assert got == [(1, [0])] and gone.closed and gone.result is NOTHING
    assert n.statistics()["wakeups"] == 2  # the one that left, then the next
    rest[1].close()


async def test_a_timed_out_consumer_leaves_its_line(mock_clock: trio.testing.MockClock) -> None:
    n = Notifier()
    key = Key(n)
    got: list[tuple[int, list[int]]] = []
    early = Block(n, key.taker(got, 0), lines=[key.line], timeout_s=1.0, timeout_result="null")
    late = Block(n, key.taker(got, 1), lines=[key.line])
    results: list[Any] = []

    async def wait(b: Block) -> None:
        results.append(await b)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(wait, early)
        await settle()
        mock_clock.jump(1.0)
        await settle()
        assert results == ["null"] and n.armed("k") == 1
        nursery.start_soon(wait, late)
        key.put()
        await settle()
    assert results == ["null", [0]] and got == [(1, [0])]


async def test_a_result_never_handed_over_is_given_back(mock_clock: trio.testing.MockClock) -> None:
    n = Notifier()
    key = Key(n)
    got: list[tuple[int, list[int]]] = []
    given: list[Any] = []
    b = Block(n, key.taker(got, 0), lines=[key.line])
    b.give_back = lambda: given.append(b.result)
    b.attach(lambda: None, lambda: True)
    key.put()
    await settle()
    assert b.result == [0]
    b.close()  # its client left before the session took the reply
    assert given == [[0]]


async def test_a_task_consumer_reports_and_keeps_the_others_parked(
        mock_clock: trio.testing.MockClock) -> None:
    """A consumer that attempts itself (a /v0/work stream): made ready only for a unit, and
    the next unit goes to the next in line while it is away."""
    n = Notifier()
    key = Key(n)
    woke: list[int] = []

    async def worker(i: int, w: Waiter) -> None:
        while await w.wait():
            woke.append(i)
            if key.units:
                key.units.pop(0)
                w.took()
            w.arm()

    ws = [n.consumer([key.line]) for _ in range(10)]
    for w in ws:
        w.arm()  # in this order (the tasks start in any order)
    async with trio.open_nursery() as nursery:
        for i, w in enumerate(ws):
            nursery.start_soon(worker, i, w)
        await settle()
        key.put()
        await settle()
        assert woke == [0]
        key.put(2)
        await settle()
        assert sorted(woke) == [0, 1, 2] and n.statistics()["wakeups"] == 3
        nursery.cancel_scope.cancel()
    for w in ws:
        w.close()


async def test_a_fan_out_served_waiter_is_served_by_every_change(
        mock_clock: trio.testing.MockClock) -> None:
    """XREAD BLOCK's kind: every reader of the topic is served, with no task of its own."""
    n = Notifier()
    served: list[int] = []
    blocks = []
    for i in range(100):
        b = Block(n, lambda i=i: served.append(i) or i, topics=["t"])
        b.attach(lambda: None)
        blocks.append(b)
    await settle()
    n.changed("t")
    await settle()
    assert served == list(range(100)) and all(b.result == i for i, b in enumerate(blocks))
    assert n.armed("t") == 0 and n.statistics()["served"] == 100
