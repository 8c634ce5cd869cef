"""redis-py's PubSub (get_message, listen, run_in_thread, patterns, shard channels) and its
asyncio variant against topicsrv, on both RESP I/O paths and both protocols."""

from __future__ import annotations

import time

import pytest
import redis
import redis.asyncio as aredis

from tests.resp.conftest import InProc


def get(ps: redis.client.PubSub, timeout: float = 5.0) -> dict | None:  # type: ignore[type-arg]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        m = ps.get_message(ignore_subscribe_messages=True, timeout=0.5)
        if m is not None:
            return m  # type: ignore[no-any-return]
    return None


@pytest.mark.parametrize("protocol", [2, 3])
def test_get_message_patterns_and_shards(inproc: InProc, protocol: int) -> None:
    r = redis.Redis(port=inproc.port, protocol=protocol)
    ps = r.pubsub()
    ps.subscribe("news")
    ps.psubscribe("ev.*")
    ps.ssubscribe("orders")
    assert ps.get_message(timeout=2)["type"] == "subscribe"  # type: ignore[index]
    assert ps.get_message(timeout=2)["type"] == "psubscribe"  # type: ignore[index]
    assert ps.get_message(timeout=2)["type"] == "ssubscribe"  # type: ignore[index]
    assert r.publish("news", "n1") == 1
    assert r.publish("ev.x", "e1") == 1
    assert r.spublish("orders", "o1") == 1
    assert get(ps) == {"type": "message", "pattern": None, "channel": b"news", "data": b"n1"}
    assert get(ps) == {"type": "pmessage", "pattern": b"ev.*", "channel": b"ev.x",
                       "data": b"e1"}
    assert get(ps) == {"type": "smessage", "pattern": None, "channel": b"orders",
                       "data": b"o1"}
    assert r.pubsub_numsub("news") == [(b"news", 1)]
    assert r.pubsub_numpat() == 1
    ps.close()
    r.close()


def test_listen_and_run_in_thread(inproc: InProc) -> None:
    r = redis.Redis(port=inproc.port)
    got: list[bytes] = []
    ps = r.pubsub(ignore_subscribe_messages=True)
    ps.subscribe(**{"jobs": lambda m: got.append(m["data"])})
    worker = ps.run_in_thread(sleep_time=0.05, daemon=True)
    deadline = time.monotonic() + 5
    while r.pubsub_numsub("jobs") != [(b"jobs", 1)] and time.monotonic() < deadline:
        time.sleep(0.01)
    for i in range(20):
        assert r.publish("jobs", str(i)) == 1
    while len(got) < 20 and time.monotonic() < deadline:
        time.sleep(0.01)
    worker.stop()
    worker.join(5)
    assert got == [str(i).encode() for i in range(20)]
    ps2 = r.pubsub(ignore_subscribe_messages=True)
    ps2.subscribe("l")
    ps2.get_message(timeout=1)
    r.publish("l", "a")
    r.publish("l", "b")
    seen = []
    for m in ps2.listen():
        seen.append(m["data"])
        if len(seen) == 2:
            break
    assert seen == [b"a", b"b"]
    ps2.close()
    r.close()


@pytest.mark.parametrize("protocol", [2, 3])
def test_asyncio_pubsub(inproc: InProc, protocol: int) -> None:
    import asyncio

    async def main() -> list[dict]:  # type: ignore[type-arg]
        r = aredis.Redis(port=inproc.port, protocol=protocol)
        ps = r.pubsub(ignore_subscribe_messages=True)
        await ps.subscribe("a")
        await ps.psubscribe("b*")
        out = []
        assert await r.publish("a", "1") == 1
        assert await r.publish("bee", "2") == 1
        while len(out) < 2:
            m = await ps.get_message(timeout=1.0)
            if m is not None:
                out.append(m)
        await ps.aclose()
        await r.aclose()
        return out

    got = asyncio.run(main())
    assert [(m["type"], m["channel"], m["data"]) for m in got] == [
        ("message", b"a", b"1"), ("pmessage", b"bee", b"2")]
