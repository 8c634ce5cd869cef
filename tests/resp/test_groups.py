"""Consumer groups over real sockets (in-process server), with time driven by a FakeClock:
idle times, min-idle claims, TTL loss of pending entries, queue topics, blocking reads."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from topicsrv.clock import FakeClock

from .conftest import InProc, start_inproc, wait_for


@pytest.fixture
def srv() -> Iterator[tuple[InProc, FakeClock]]:
    clock = FakeClock()
    s, stop = start_inproc(clock)  # only the test moves time; the engine reads it per command
    yield s, clock
    stop()


def conn(s: InProc, protocol: int = 2) -> redis.Redis:
    return redis.Redis(port=s.port, protocol=protocol, decode_responses=True, socket_timeout=10)


def test_idle_times_and_min_idle_claims(srv: tuple[InProc, FakeClock]) -> None:
    s, clock = srv
    r = conn(s)
    ids = [r.xadd("t", {"n": str(i)}) for i in range(4)]
    r.xgroup_create("t", "g", id="0")
    r.xreadgroup("g", "a", {"t": ">"}, count=2)
    clock.advance(5000)
    r.xreadgroup("g", "b", {"t": ">"})
    rows = r.xpending_range("t", "g", "-", "+", 10)
    assert [(x["message_id"], x["consumer"], x["time_since_delivered"]) for x in rows] == [
        (ids[0], "a", 5000), (ids[1], "a", 5000), (ids[2], "b", 0), (ids[3], "b", 0)]
    assert [x["message_id"] for x in r.xpending_range("t", "g", "-", "+", 10, idle=4000)] == ids[:2]
    assert {c["name"]: c["idle"] for c in r.xinfo_consumers("t", "g")} == {"a": 5000, "b": 0}
    assert r.xclaim("t", "g", "c", 5001, [ids[0]]) == []
    assert [e[0] for e in r.xclaim("t", "g", "c", 5000, [ids[0]])] == [ids[0]]
    row = r.xpending_range("t", "g", ids[0], ids[0], 1)[0]
    assert (row["consumer"], row["time_since_delivered"], row["times_delivered"]) == ("c", 0, 2)
    # XAUTOCLAIM takes only entries idle long enough, scanning from the cursor
    clock.advance(100)
    nxt, claimed, deleted = r.xautoclaim("t", "g", "d", 3000, "0-0", count=10)
    assert [e[0] for e in claimed] == [ids[1]] and deleted == [] and nxt == "0-0"
    r.close()


def test_ttl_expired_pending_entries_read_as_nil_and_autoclaim_drops_them(srv: tuple[InProc, FakeClock]) -> None:
    s, clock = srv
    r = conn(s)
    r.execute_command("TOPIC.CREATE", "t", "TTL_MS", "1000")
    first = r.xadd("t", {"n": "0"})
    r.xgroup_create("t", "g", id="0")
    r.xreadgroup("g", "a", {"t": ">"})
    clock.advance(2000)
    second = r.xadd("t", {"n": "1"})
    hist = r.xreadgroup("g", "a", {"t": "0"})
    assert hist[0][1] == [(first, {})]  # [id, nil] on the wire (compat checks the raw shape)
    got = r.xreadgroup("g", "a", {"t": ">"})
    assert [e[0] for e in got[0][1]] == [second]  # the expired record is behind us: no gap
    nxt, claimed, deleted = r.xautoclaim("t", "g", "b", 0, "0-0")
    assert deleted == [first] and [e[0] for e in claimed] == [second]
    r.close()


def test_entries_added_and_lag_agree_while_a_write_waits_for_its_fsync(
        srv: tuple[InProc, FakeClock]) -> None:
    s, _ = srv
    r = conn(s)
    ids = [r.xadd("t", {"n": str(i)}) for i in range(3)]
    r.xgroup_create("t", "g", id="0")
    r.xreadgroup("g", "a", {"t": ">"})
    r.xadd("t", {"n": "3"})
    s.ctx.engine.get("t").hide_from(4)  # seq 4 waits for its fsync, as an fsync-class write does
    info, group = r.xinfo_stream("t"), r.xinfo_groups("t")[0]
    assert info["last-generated-id"] == ids[2] and info["entries-added"] == 3
    assert group["entries-read"] == 3 and group["lag"] == 0  # the group has read all it can see
    r.close()


def test_xreadgroup_node_skips_that_nodes_records_like_xread(srv: tuple[InProc, FakeClock]) -> None:
    s, _ = srv
    r = conn(s)
    r.execute_command("XADD", "t", "NODE", "a", "*", "n", "1")
    mine = [r.execute_command("XADD", "t", "NODE", "b", "*", "n", "2"), r.xadd("t", {"n": "3"})]
    r.xgroup_create("t", "g", id="0")
    got = r.execute_command("XREADGROUP", "GROUP", "g", "c", "NODE", "a", "STREAMS", "t", ">")
    assert [e[0] for e in got[0][1]] == mine
    assert r.xpending("t", "g")["pending"] == 2  # node a's record was never delivered
    r.execute_command("XADD", "t", "NODE", "a", "*", "n", "4")
    assert not r.execute_command("XREADGROUP", "GROUP", "g", "c", "NODE", "a", "BLOCK", "20",
                                 "STREAMS", "t", ">")  # nil: nothing new for this reader
    assert r.xpending("t", "g")["pending"] == 2
    r.close()


def test_queue_topics_are_wrongtype_for_groups(srv: tuple[InProc, FakeClock]) -> None:
    s, _ = srv
    r = conn(s)
    r.execute_command("TOPIC.CREATE", "q", "TYPE", "queue")
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        r.xgroup_create("q", "g", id="0")
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        r.xinfo_groups("q")
    r.close()


@pytest.mark.parametrize("protocol", [2, 3])
def test_blocked_readgroup_wakes_on_append_and_times_out(srv: tuple[InProc, FakeClock], protocol: int) -> None:
    s, _ = srv
    r, w = conn(s, protocol), conn(s)
    r.xgroup_create("b", "g", id="$", mkstream=True)
    box: dict[str, Any] = {}

    def reader() -> None:
        box["got"] = r.xreadgroup("g", "c", {"b": ">"}, block=0)

    th = threading.Thread(target=reader)
    th.start()
    wait_for(lambda: w.info("clients")["blocked_clients"] == 1)
    assert th.is_alive()  # BLOCK 0 waits
    ident = w.xadd("b", {"x": "1"})
    th.join(5)
    assert not th.is_alive()
    got = box["got"]
    entries = got["b"][0] if protocol == 3 else got[0][1]
    assert [e[0] for e in entries] == [ident]
    assert r.xpending("b", "g")["pending"] == 1
    t0 = time.monotonic()
    assert not r.xreadgroup("g", "c", {"b": ">"}, block=50)
    assert time.monotonic() - t0 >= 0.045
    r.close()
    w.close()


def test_group_state_snapshot_survives_restore(srv: tuple[InProc, FakeClock]) -> None:
    """What storage will persist: the snapshot restores the same replies."""
    from topicsrv.engine import groups as eg

    s, _ = srv
    r = conn(s)
    [r.xadd("t", {"n": str(i)}) for i in range(3)]
    r.xgroup_create("t", "g", id="0")
    r.xreadgroup("g", "a", {"t": ">"}, count=2)
    before = (r.xinfo_groups("t"), r.xpending_range("t", "g", "-", "+", 10))
    topic = s.ctx.engine.get("t")
    snap = eg.snapshot(topic)
    eg.restore(topic, None)
    assert r.xinfo_groups("t") == []
    eg.restore(topic, snap)
    assert (r.xinfo_groups("t"), r.xpending_range("t", "g", "-", "+", 10)) == before
    r.close()
