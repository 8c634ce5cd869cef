"""The delivery scheduler (topicsrv/notify/scheduler.py): passes in P_eff order and the starvation bound.

Engine time is a FakeClock and trio time a MockClock that only moves when told, so a pass
never outlives its tick by accident.
"""

from __future__ import annotations

import pytest
import trio
import trio.testing

from topicsrv.clock import FakeClock
from topicsrv.engine import Engine
from topicsrv.engine.queues.priority import AGE_CAP_MS
from topicsrv.notify import PASS_BUDGET, Delivery, Notifier, Waiter, delivery


def setup() -> tuple[FakeClock, Engine, Notifier]:
    clock = FakeClock()
    eng = Engine(clock=clock)
    eng.put_topic("hi", {"priority": 1000, "auto_priority": False})
    eng.put_topic("lo", {"priority": -500, "auto_priority": False})
    eng.put_topic("mid", {"priority": 0, "auto_priority": False})
    return clock, eng, Notifier(eng)


async def settle() -> None:
    await trio.testing.wait_all_tasks_blocked()


async def start(nursery: trio.Nursery, waiters: list[Waiter], admitted: list[Waiter]) -> None:
    async def one(w: Waiter) -> None:
        if await w.wait():
            admitted.append(w)  # in service until the test closes it

    for w in waiters:
        w.arm()
        nursery.start_soon(one, w)
    await settle()


async def serve_all(admitted: list[Waiter]) -> None:
    """Every admitted waiter is served and leaves, in the order admitted, until nobody is left
    (closing without a connection's Delivery ends the turn at once)."""
    served = 0
    while served < len(admitted):
        for w in admitted[served:]:
            served += 1
            w.close()
        await settle()


async def test_a_single_waiter_is_admitted_by_its_own_wakeup(mock_clock: trio.testing.MockClock) -> None:
    _, _, n = setup()
    with n.waiter(["lo"]) as w:
        w.arm()
        n.changed("lo")
        assert await w.wait(1.0)
        assert w.serving
    assert n.statistics()["contended_passes"] == 0
    assert n.statistics()["in_service"] == 0 and not n.armed("lo")


async def test_a_wait_times_out_without_a_change(mock_clock: trio.testing.MockClock) -> None:
    _, _, n = setup()
    mock_clock.autojump_threshold = 0
    with n.waiter(["lo"]) as w:
        w.arm()
        assert not await w.wait(0.5)


async def test_many_waiters_on_one_topic_are_one_pass(mock_clock: trio.testing.MockClock) -> None:
    _, _, n = setup()
    admitted: list[Waiter] = []
    ws = [n.waiter(["lo"]) for _ in range(PASS_BUDGET * 3)]
    async with trio.open_nursery() as nursery:
        await start(nursery, ws, admitted)
        n.changed("lo")
        await settle()
        assert len(admitted) == len(ws)  # no contention: everyone at once
    assert n.statistics()["contended_passes"] == 0


async def test_higher_p_eff_is_admitted_first_and_everyone_is_served(
        mock_clock: trio.testing.MockClock) -> None:
    _, _, n = setup()
    admitted: list[Waiter] = []
    lo = [n.waiter(["lo"]) for _ in range(40)]
    hi = [n.waiter(["hi"]) for _ in range(40)]
    async with trio.open_nursery() as nursery:
        await start(nursery, lo + hi, admitted)
        n.changed("lo")  # lo changes first: the order of the writes does not matter
        n.changed("hi")
        await settle()
        assert len(admitted) == PASS_BUDGET and all(w in hi for w in admitted)
        await serve_all(admitted)  # members check in: the next step, the next pass come
        assert len(admitted) == 80
        assert admitted[:40] == [w for w in admitted if w in hi]  # every hi before every lo
        assert max(w.pass_no for w in hi) <= min(w.pass_no for w in lo)
        assert max(w.pass_no for w in hi) < max(w.pass_no for w in lo)


async def test_a_pass_that_outlives_its_tick_lets_the_next_one_start(
        mock_clock: trio.testing.MockClock) -> None:
    _, _, n = setup()
    admitted: list[Waiter] = []
    lo = [n.waiter(["lo"]) for _ in range(10)]
    hi = [n.waiter(["hi"]) for _ in range(40)]
    async with trio.open_nursery() as nursery:
        await start(nursery, lo + hi, admitted)
        n.changed("hi")
        n.changed("lo")
        await settle()
        assert len(admitted) == PASS_BUDGET  # and nobody checks in (a slow socket, say)
        mock_clock.jump(0.051)
        await settle()
        assert len(admitted) == 50
        for w in admitted:
            w.close()


@pytest.mark.parametrize("aged", [False, True])
async def test_starvation_bound_a_waiter_ready_for_age_cap_joins_the_next_pass(
        mock_clock: trio.testing.MockClock, aged: bool) -> None:
    clock, _, n = setup()
    admitted: list[Waiter] = []
    lo = n.waiter(["lo"])
    hi = [n.waiter(["hi"]) for _ in range(PASS_BUDGET)]
    fresh = [n.waiter(["hi"]) for _ in range(PASS_BUDGET * 2)]
    async with trio.open_nursery() as nursery:
        await start(nursery, [lo, *hi], admitted)
        n.changed("lo")
        n.changed("hi")
        await settle()
        assert lo not in admitted and len(admitted) == PASS_BUDGET  # passed over
        # age_boost alone (+1000 at most) cannot lift -500 over +1000: the bound does
        clock.advance(AGE_CAP_MS if aged else AGE_CAP_MS - 1)
        await start(nursery, fresh, admitted)  # more high-priority work keeps arriving
        n.changed("hi")
        await settle()
        await serve_all(admitted)
        second = [w for w in admitted if w.pass_no == admitted[PASS_BUDGET].pass_no]
        assert len(second) == PASS_BUDGET
        assert (lo in second) is aged
        assert (admitted[PASS_BUDGET] is lo) is aged  # the starved go first in their pass
        assert n.statistics()["starved_admits"] == (1 if aged else 0)
        nursery.cancel_scope.cancel()
    for w in [lo, *hi, *fresh]:
        w.close()
    assert n.statistics()["ready"] == 0 and n.waiting_topics() == 0


async def test_a_multi_topic_waiter_takes_the_key_of_its_best_topic(
        mock_clock: trio.testing.MockClock) -> None:
    _, eng, n = setup()
    admitted: list[Waiter] = []
    both = n.waiter(["lo", "hi"])
    mids = [n.waiter(["mid"]) for _ in range(PASS_BUDGET)]
    async with trio.open_nursery() as nursery:
        await start(nursery, [*mids, both], admitted)
        n.changed("lo")
        n.changed("mid")
        n.changed("hi")
        await settle()
        assert admitted[0] is both or both in admitted[:PASS_BUDGET]
        assert eng.state("hi", touch=False)["priority_components"]["age"] == 0
        nursery.cancel_scope.cancel()
    for w in [both, *mids]:
        w.close()
    assert n.waiting_topics() == 0


async def test_a_step_waits_until_the_replies_of_the_one_before_are_written(
        mock_clock: trio.testing.MockClock) -> None:
    """A waiter that leaves with a reply to write (a long poll, a BLOCK) ends its turn when its
    connection's Delivery says the reply is out, not at the close (notify Rule 8)."""
    _, _, n = setup()
    n.trace = []
    out: list[tuple[Waiter, Delivery]] = []
    hi = [n.waiter(["hi"]) for _ in range(PASS_BUDGET + 8)]
    lo = [n.waiter(["lo"]) for _ in range(40)]  # pass 2: 8 hi and 24 lo (48 ready: contended)

    async def blocked(w: Waiter) -> None:
        d = delivery()  # this task's connection
        w.arm()
        with w:
            assert await w.wait()
            out.append((w, d))  # it read its reply and leaves: the reply is not written yet
        await trio.sleep_forever()

    async with trio.open_nursery() as nursery:
        for w in lo + hi:
            nursery.start_soon(blocked, w)
        await settle()
        n.changed("lo")
        n.changed("hi")
        await settle()
        assert [w for w, _ in out] == [w for w, _ in out if w in hi] and len(out) == PASS_BUDGET
        for _, d in out[:-1]:
            d.done()  # written
        await settle()
        assert len(out) == PASS_BUDGET  # one reply of the pass is still unwritten: all wait
        out[-1][1].done()
        await settle()
        assert len(out) == PASS_BUDGET + 8 and all(w in hi for w, _ in out)  # the hi step of pass 2
        for _, d in out[PASS_BUDGET:]:
            d.done()
        await settle()
        assert len(out) == len(hi) + 24  # the lo step of pass 2
        for _, d in out[len(hi):]:
            d.done()
        await settle()
        assert len(out) == len(hi) + len(lo)  # pass 3: the 16 left fit in one pass
        for _, d in out[len(hi) + 24:]:
            d.done()
        nursery.cancel_scope.cancel()
    assert [t for _, t in n.trace] == ["hi"] * len(hi) + ["lo"] * len(lo)
    assert [p for p, _ in n.trace] == [1] * PASS_BUDGET + [2] * (8 + 24) + [3] * 16
    assert n.statistics()["ready"] == 0 and n.waiting_topics() == 0


async def test_a_stream_turn_ends_when_its_frames_are_sent_not_when_it_arms_again(
        mock_clock: trio.testing.MockClock) -> None:
    _, _, n = setup()
    n.trace = []
    served: list[Waiter] = []
    hi = [n.waiter(["hi"]) for _ in range(PASS_BUDGET)]
    lo = [n.waiter(["lo"]) for _ in range(8)]
    sent = trio.Event()

    async def stream(w: Waiter) -> None:
        w.arm()
        while await w.wait():
            w.arm()  # before the read (Rule 1): the turn goes on
            served.append(w)
            await sent.wait()  # sending its frames
            w.delivered()

    async with trio.open_nursery() as nursery:
        for w in hi + lo:
            nursery.start_soon(stream, w)
        await settle()
        n.changed("lo")
        n.changed("hi")
        await settle()
        assert served == [w for w in served if w in hi] and len(served) == PASS_BUDGET
        assert all(w.serving for w in hi)
        sent.set()
        await settle()
        assert len(served) == PASS_BUDGET + len(lo)
        nursery.cancel_scope.cancel()
    assert [t for _, t in n.trace] == ["hi"] * len(hi) + ["lo"] * len(lo)


async def test_a_task_that_only_inherited_a_connections_delivery_ends_its_turn_at_the_close(
        mock_clock: trio.testing.MockClock) -> None:
    """A router worker started by an engine listener while a connection wrote inherits the
    connection's context; its turn must not wait for that connection's writes."""
    _, _, n = setup()
    admitted: list[Waiter] = []
    lo = [n.waiter(["lo"]) for _ in range(8)]
    hi = [n.waiter(["hi"]) for _ in range(PASS_BUDGET)]

    async def worker(w: Waiter) -> None:  # a long-lived task of another nursery
        w.arm()
        with w:
            assert await w.wait()
            admitted.append(w)

    async with trio.open_nursery() as services:

        async def connection() -> None:
            held = delivery()
            for w in lo + hi:
                services.start_soon(worker, w)  # started from the connection's task
            await trio.sleep_forever()
            held.done()

        services.start_soon(connection)
        await settle()
        n.changed("lo")
        n.changed("hi")
        await settle()
        assert len(admitted) == PASS_BUDGET + len(lo)  # the hi step closed: the lo step ran
        assert all(w in hi for w in admitted[:PASS_BUDGET])
        services.cancel_scope.cancel()
