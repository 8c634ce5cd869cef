"""The router workers (tasks/routers.py): background forwarding, backoff, logging, stopping.

trio's MockClock (autojump) drives the backoff sleeps; the engine runs on a FakeClock."""

from __future__ import annotations

import itertools
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import orjson
import pytest
import trio
import trio.testing

from topicsrv.clock import FakeClock
from topicsrv.engine import Engine
from topicsrv.engine.log.records import prepare_json
from topicsrv.engine.routing import routers
from topicsrv.tasks.routers import Routers


def write(eng: Engine, name: str, *recs: dict[str, Any]) -> dict[str, Any]:
    result, _ = eng.write(name, [prepare_json(r, i) for i, r in enumerate(recs)])
    return result


def data(eng: Engine, name: str) -> list[Any]:
    return [orjson.loads(b)["data"] for b in eng.diff(name, 0, 10_000).records]


async def until(cond: Callable[[], bool], seconds: float = 30) -> None:
    """Poll `cond` each (mock) millisecond: the workers wake on engine events the test
    does not see."""
    with trio.fail_after(seconds):
        for _ in itertools.count():
            if cond():
                return
            await trio.sleep(0.001)


@pytest.fixture
async def eng() -> Engine:
    return Engine(clock=FakeClock())


@pytest.fixture
async def service(eng: Engine) -> AsyncIterator[Routers]:
    """The service on `eng`; a test using it takes `autojump_clock` (pytest-trio hands trio.run
    the clock only from the test's own arguments)."""
    svc = Routers(eng, batch=10)
    async with trio.open_nursery() as nursery:
        await nursery.start(svc.run)
        yield svc
        nursery.cancel_scope.cancel()


async def test_forwards_in_the_background(eng: Engine, service: Routers, autojump_clock: trio.testing.MockClock) -> None:
    eng.router_put("r", {"source": "a", "dest": "b"})
    write(eng, "a", *({"data": i} for i in range(95)))
    assert data(eng, "b") == []  # the write returned before any forwarding
    await until(lambda: len(data(eng, "b")) == 95)
    assert data(eng, "b") == list(range(95))
    await until(lambda: eng.router_get("r")["status"] == "caught_up")
    write(eng, "a", {"data": "more"})
    await until(lambda: data(eng, "b")[-1:] == ["more"])
    assert eng.router_get("r")["lag"] == 0 and eng.router_get("r")["forwarded"] == 96


async def test_routers_that_exist_at_start_get_workers(eng: Engine, autojump_clock: trio.testing.MockClock) -> None:
    eng.router_put("r", {"source": "a", "dest": "b"})
    write(eng, "a", {"data": 1})
    svc = Routers(eng)
    async with trio.open_nursery() as nursery:
        await nursery.start(svc.run)
        await until(lambda: data(eng, "b") == [1])
        nursery.cancel_scope.cancel()


async def test_blocked_dest_never_slows_the_source_and_logs_once(
        eng: Engine, service: Routers, autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="topicsrv.routers")
    eng.put_topic("b", {"cap_records": 5, "discard": "reject"})
    eng.router_put("r", {"source": "a", "dest": "b"})
    for i in range(200):  # every source write is accepted at once while the dest is full
        assert write(eng, "a", {"data": i})["seqs"] == [i + 1]  # synchronous: no wait, no error
        await trio.sleep(0.005)  # the worker runs (and backs off) meanwhile
    await until(lambda: eng.router_get("r")["status"] == "blocked")
    steps = service.steps
    await trio.sleep(10)  # 10 s blocked: backoff 10 ms doubling to 1 s -> ~16 tries, not 1000
    retries = service.steps - steps
    assert 5 <= retries <= 25, retries
    st = eng.router_get("r")
    assert st["cursor"] == 5 and st["lag"] == 195 and st["last_error"]["code"] == "topic_full"
    assert st["retries"] >= retries - 1
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "blocked" in warnings[0].getMessage()
    eng.put_topic("b", {"cap_records": 1000})  # room: the dest's change wakes it at once
    await until(lambda: eng.router_get("r")["status"] == "caught_up", seconds=0.5)
    assert data(eng, "b") == list(range(200))
    infos = [r for r in caplog.records if r.levelno == logging.INFO and "resumed" in r.getMessage()]
    assert len(infos) == 1
    assert eng.router_get("r")["last_error"] is None


async def test_delete_stops_forwarding_at_once(eng: Engine, service: Routers, autojump_clock: trio.testing.MockClock) -> None:
    eng.router_put("r", {"source": "a", "dest": "b"})
    write(eng, "a", *({"data": i} for i in range(1000)))
    while not data(eng, "b"):  # look between the worker's batches (it yields after each)
        await trio.lowlevel.checkpoint()
    eng.router_delete("r")
    copied = len(data(eng, "b"))
    assert copied < 1000
    await until(lambda: not service.workers)
    write(eng, "a", {"data": "after"})
    await trio.sleep(1)
    assert len(data(eng, "b")) == copied  # the copies made stay; nothing more comes


async def test_topic_delete_ends_the_worker(eng: Engine, service: Routers, autojump_clock: trio.testing.MockClock) -> None:
    eng.router_put("r", {"source": "a", "dest": "b"})
    await until(lambda: "r" in service.workers)
    eng.delete_topic("b")
    await until(lambda: not service.workers)
    assert eng.routers == {}


async def test_recreated_router_gets_a_new_worker(eng: Engine, service: Routers, autojump_clock: trio.testing.MockClock) -> None:
    eng.router_put("r", {"source": "a", "dest": "b"})
    await until(lambda: "r" in service.workers)
    eng.router_delete("r")
    eng.router_put("r", {"source": "a", "dest": "c"})
    write(eng, "a", {"data": 1})
    await until(lambda: data(eng, "c") == [1])
    assert service.workers["r"] is eng.routers["r"] and data(eng, "b") == []


async def test_mirror_through_the_workers_settles(eng: Engine, service: Routers, autojump_clock: trio.testing.MockClock) -> None:
    eng.router_put("ab", {"source": "a", "dest": "b", "allow_cycle": True})
    eng.router_put("ba", {"source": "b", "dest": "a", "allow_cycle": True})
    for i in range(30):
        write(eng, "a", {"data": f"a{i}", "node": "A"})
        write(eng, "b", {"data": f"b{i}", "node": "B"})
    await until(lambda: len(data(eng, "a")) == 60 and len(data(eng, "b")) == 60)
    await trio.sleep(5)
    assert sorted(data(eng, "a")) == sorted(data(eng, "b"))
    assert len(data(eng, "a")) == 60
    assert all(r["status"] == "caught_up" for r in eng.router_list())


async def test_a_failing_step_is_logged_once_and_retried(
        eng: Engine, service: Routers, autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture,
        monkeypatch: pytest.MonkeyPatch) -> None:
    real = routers.forward
    broken = True

    def forward(engine: Engine, router: routers.Router, limit: int = 1000, until: int | None = None) -> routers.Step:
        if broken:
            raise RuntimeError("boom")
        return real(engine, router, limit, until)

    monkeypatch.setattr(routers, "forward", forward)
    eng.router_put("r", {"source": "a", "dest": "b"})
    write(eng, "a", {"data": 1})
    await until(lambda: eng.router_get("r")["status"] == "blocked")
    await trio.sleep(5)
    assert eng.router_get("r")["last_error"]["code"] == "internal"
    assert len([r for r in caplog.records if r.levelno >= logging.ERROR]) == 1
    broken = False
    await until(lambda: data(eng, "b") == [1], seconds=2)


async def test_pacer_holds_forwarding_to_its_share_while_clients_write(
        eng: Engine, autojump_clock: trio.testing.MockClock) -> None:
    """Rule 6: after a step that took 10 ms, with share 0.1 the next step waits 90 ms if a
    client wrote meanwhile, and does not wait at all when nobody wrote."""
    from topicsrv.tasks.routers import Pacer

    pacer = Pacer(eng, share=0.1)
    t0 = trio.current_time()
    await pacer.step_start()  # nothing written since the pacer was made: no wait
    pacer.step_done(0.010)
    await pacer.step_start()
    assert trio.current_time() == t0
    write(eng, "a", {"data": 1})
    await pacer.step_start()  # a client wrote, but no contended step ran before: no wait
    assert trio.current_time() == t0
    pacer.step_done(0.010)
    write(eng, "a", {"data": 2})
    await pacer.step_start()  # the contended 10 ms step is followed by 90 ms of the fronts
    assert trio.current_time() - t0 == pytest.approx(0.090)
    assert pacer.held == 1
    pacer.step_done(0.010)
    write(eng, "a", {"data": 3})
    await pacer.step_start()
    assert trio.current_time() - t0 == pytest.approx(0.180)
    await trio.sleep(0.2)  # nobody wrote for 200 ms: no wait, and the debt is cleared
    t1 = trio.current_time()
    await pacer.step_start()
    pacer.step_done(0.010)
    write(eng, "a", {"data": 4})
    await pacer.step_start()
    assert trio.current_time() == t1
    with pytest.raises(ValueError):
        Pacer(eng, share=0)


async def test_forwarding_keeps_running_while_clients_write(
        eng: Engine, autojump_clock: trio.testing.MockClock) -> None:
    """Held back, never starved: a writer that never pauses still sees its router follow."""
    svc = Routers(eng, batch=10, share=0.5)
    eng.router_put("r", {"source": "a", "dest": "b"})
    async with trio.open_nursery() as nursery:
        await nursery.start(svc.run)

        async def writer() -> None:
            for i in range(200):
                write(eng, "a", {"data": i})
                await trio.sleep(0.0005)

        nursery.start_soon(writer)
        await until(lambda: eng.find("b") is not None and eng.find("b").head_seq == 200)
        assert data(eng, "b") == list(range(200))
        nursery.cancel_scope.cancel()


async def test_pacer_runs_up_no_debt_while_nobody_writes(
        eng: Engine, autojump_clock: trio.testing.MockClock) -> None:
    """A long catch-up with no client writing must not hold back the first step after the
    next write (regression: the debt of uncontended steps was kept)."""
    from topicsrv.tasks.routers import Pacer

    pacer = Pacer(eng, share=0.1)
    for _ in range(100):  # 1 s of uncontended forwarding
        await pacer.step_start()
        pacer.step_done(0.010)
        await trio.sleep(0.010)
    t0 = trio.current_time()
    write(eng, "a", {"data": 1})
    await pacer.step_start()
    assert trio.current_time() == t0


async def test_pacer_lets_one_held_worker_step_at_a_time(
        eng: Engine, autojump_clock: trio.testing.MockClock) -> None:
    """Workers held until the same moment do not all step then: each step's debt holds the
    others again (regression: four workers took four steps per slot)."""
    from topicsrv.tasks.routers import Pacer

    pacer = Pacer(eng, share=0.1)
    write(eng, "a", {"data": 1})
    await pacer.step_start()
    pacer.step_done(0.010)  # the next step may start 90 ms from now
    t0 = trio.current_time()
    starts: list[float] = []

    async def worker() -> None:
        await pacer.step_start()
        starts.append(trio.current_time() - t0)
        pacer.step_done(0.010)

    async with trio.open_nursery() as nursery:
        for _ in range(3):
            nursery.start_soon(worker)
    assert starts == pytest.approx([0.090, 0.180, 0.270])


def test_the_routers_listener_is_told_only_while_a_router_or_worker_exists() -> None:
    """engine/core.py Rule 4: with no router and no worker the routers task has nothing to do
    with a write, and no write calls it; once a router exists every topic change reaches it
    (held changes included), and after the last router is deleted, while its worker is still
    there (to be woken so that it exits), it still does."""
    eng = Engine(clock=FakeClock())
    svc = Routers(eng)
    heard: list[str] = []
    eng.router_listener = heard.append  # what Routers registered (svc.changed), recorded
    write(eng, "a", {"data": 1})
    assert heard == [] and eng.router_listener in eng.all_listeners()
    eng.router_put("r", {"source": "a", "dest": "b"})
    heard.clear()
    write(eng, "a", {"data": 2})
    assert heard == ["a"]
    eng.hold_changes()
    write(eng, "a", {"data": 3})
    assert heard == ["a"]
    eng.release_changes()
    assert heard == ["a", "a"]
    eng.router_delete("r")
    svc.workers["r"] = object()  # type: ignore[assignment]  # a worker not yet gone
    heard.clear()
    write(eng, "a", {"data": 4})
    assert heard == ["a"]
    svc.workers.clear()
    heard.clear()
    write(eng, "a", {"data": 5})
    assert heard == []
