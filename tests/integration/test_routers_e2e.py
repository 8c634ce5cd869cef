"""Routers end to end against a real `topicsrv serve` process, over HTTP and RESP:

- an A<->B mirror and a three-node ring (`allow_cycle`), where each node writes with its node
  id and reads its own topic with its node filter: every node reads every other node's
  records exactly once and never its own, and forwarding stops (heads stay put);
- backpressure: a dest with `discard: "reject"` holds the router's cursor (`status: blocked`,
  lag grows) while source writes keep being acknowledged at once, and the router resumes
  when room appears;
- the `source_trim` tombstone: source records evicted before they were forwarded become one
  gap in the dest, read identically through HTTP diff, SSE, XREAD and the Spark row mapping
  (the real Spark read is tests/spark/test_spark_routers.py).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from conftest import JsonClient, ServerProcess
from tests.httpapi.conftest import SSE
from topicsrv.engine.log.tombstone import FIELDS


@pytest.fixture
def c(server: ServerProcess) -> Iterator[JsonClient]:
    client = JsonClient(server.http_port)
    yield client
    client.conn.close()


def put_router(c: JsonClient, name: str, source: str, dest: str, **options: Any) -> Any:
    return c.ok("PUT", f"/v0/routers/{name}", {"source": source, "dest": dest, **options})


def write(c: JsonClient, topic: str, *records: dict[str, Any]) -> list[int]:
    return c.ok("POST", f"/v0/topics/{topic}", {"records": list(records)})["seqs"]  # type: ignore[no-any-return]


def read(c: JsonClient, topic: str, from_seq: int = 0, **extra: Any) -> dict[str, Any]:
    return c.ok("POST", f"/v0/topics/{topic}/diff",  # type: ignore[no-any-return]
                {"from_seq": from_seq, "limit": 10_000, **extra})


def wait(check: Any, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.01)


def heads(c: JsonClient, topics: list[str]) -> list[int]:
    return [c.ok("GET", f"/v0/topics/{t}?touch=false")["head_seq"] for t in topics]


def quiet(c: JsonClient, routers: list[str], topics: list[str]) -> None:
    """Every router handled everything it has: one sweep saw lag 0 on each router while no
    topic's head moved (a router read as idle early in a sweep may be fed by another one
    later in it, which the heads show)."""
    def done() -> bool:
        before = heads(c, topics)
        idle = all(c.ok("GET", f"/v0/routers/{n}")["lag"] == 0 for n in routers)
        return idle and heads(c, topics) == before

    wait(done)


def assert_terminated(c: JsonClient, topics: list[str], routers: list[str]) -> list[int]:
    """Forwarding stopped: routers idle, and the heads do not move any more."""
    quiet(c, routers, topics)
    before = heads(c, topics)
    time.sleep(0.2)  # a forwarding loop would keep appending; the heads must stay put
    quiet(c, routers, topics)
    assert heads(c, topics) == before
    return before


# ---- mirror and ring ---------------------------------------------------------------------------


def test_mirror_a_b_with_node_filters(c: JsonClient) -> None:
    a, b = "mirror.a", "mirror.b"
    put_router(c, "mirror-ab", a, b, allow_cycle=True)
    got = put_router(c, "mirror-ba", b, a, allow_cycle=True)
    assert got["hop_cap"] == 1
    write(c, a, *({"data": f"a{i}", "node": "node-a"} for i in range(3)))
    write(c, b, *({"data": f"b{i}", "node": "node-b"} for i in range(2)))
    write(c, a, {"data": "a3", "node": "node-a"})
    assert assert_terminated(c, [a, b], ["mirror-ab", "mirror-ba"]) == [6, 6]
    # each side reads the other's records, exactly once, never its own
    assert sorted(r["data"] for r in read(c, a, node="node-a")["records"]) == ["b0", "b1"]
    assert [r["data"] for r in read(c, b, node="node-b")["records"]] == ["a0", "a1", "a2", "a3"]
    ab, ba = (c.ok("GET", f"/v0/routers/{n}") for n in ("mirror-ab", "mirror-ba"))
    assert (ab["forwarded"], ab["skipped"]) == (4, 2)  # b's copies in a are at the hop cap
    assert (ba["forwarded"], ba["skipped"]) == (2, 4)


def test_three_node_ring_with_node_filters(c: JsonClient) -> None:
    nodes = ["n1", "n2", "n3"]
    topics = [f"ring.{n}" for n in nodes]
    routers = []
    for i, src in enumerate(topics):
        name = f"ring-{i}"
        got = put_router(c, name, src, topics[(i + 1) % 3], allow_cycle=True)
        routers.append(name)
        assert got["hop_cap"] in (None, 2)  # unlimited until the ring closes
    assert [c.ok("GET", f"/v0/routers/{n}")["hop_cap"] for n in routers] == [2, 2, 2]
    written: dict[str, list[str]] = {}
    for round_ in range(3):  # interleaved writers, each node on its own topic
        for node, topic in zip(nodes, topics, strict=True):
            batch = [f"{node}-{round_}-{j}" for j in range(round_ + 1)]
            write(c, topic, *({"data": d, "node": node} for d in batch))
            written.setdefault(node, []).extend(batch)
    total = sum(len(v) for v in written.values())
    assert assert_terminated(c, topics, routers) == [total] * 3
    for node, topic in zip(nodes, topics, strict=True):
        got = read(c, topic, node=node)["records"]
        assert all(r["$node"] != node for r in got)
        others = sorted(d for n, ds in written.items() if n != node for d in ds)
        assert sorted(r["data"] for r in got) == others  # each exactly once
        # per-source FIFO: one origin's records keep their order in every topic
        for origin in (n for n in nodes if n != node):
            assert [r["data"] for r in got if r["$node"] == origin] == written[origin]


# ---- backpressure -------------------------------------------------------------------------------


def test_reject_dest_holds_the_cursor_and_never_slows_the_source(c: JsonClient) -> None:
    src, dst = "bp.src", "bp.dst"
    c.ok("PUT", f"/v0/topics/{dst}", {"cap_records": 3, "discard": "reject"})
    put_router(c, "bp", src, dst)
    write(c, src, *({"data": i} for i in range(3)))
    wait(lambda: c.ok("GET", "/v0/routers/bp")["forwarded"] == 3)
    times = []
    for i in range(20):  # the dest is full: each source write is still acked at once
        t0 = time.perf_counter()
        write(c, src, {"data": 3 + i})
        times.append(time.perf_counter() - t0)
    assert max(times) < 1.0, times
    wait(lambda: c.ok("GET", "/v0/routers/bp")["status"] == "blocked")
    st = c.ok("GET", "/v0/routers/bp")
    assert (st["cursor"], st["lag"], st["forwarded"]) == (3, 20, 3)
    assert st["last_error"]["code"] == "topic_full"
    assert c.call("POST", f"/v0/topics/{dst}", {"records": [{"data": "x"}]})[0] == 422
    # room appears (a delete in the dest): the router goes on where it stopped
    c.ok("POST", f"/v0/topics/{dst}/delete", {"before_seq": 4})
    wait(lambda: c.ok("GET", "/v0/routers/bp")["cursor"] == 6)
    st = c.ok("GET", "/v0/routers/bp")
    assert st["status"] == "blocked" and st["forwarded"] == 6
    c.ok("PUT", f"/v0/topics/{dst}", {"cap_records": 100, "discard": "reject"})
    c.ok("POST", f"/v0/topics/{dst}/delete", {"before_seq": 5})  # any dest change wakes it
    quiet(c, ["bp"], [src, dst])
    assert [r["data"] for r in read(c, dst)["records"]] == list(range(4, 23))


# ---- source_trim on every read path ---------------------------------------------------------------


@pytest.fixture(scope="module")
def trim(server: ServerProcess) -> Iterator[dict[str, Any]]:
    """A router blocked on a full dest while its source evicts unforwarded records; readers
    of the dest (HTTP diff, SSE, XREAD) hold cursor 2 when it resumes across the gap."""
    c = JsonClient(server.http_port)
    src, dst = "trim.src", "trim.dst"
    c.ok("PUT", f"/v0/topics/{src}", {"cap_records": 2})
    c.ok("PUT", f"/v0/topics/{dst}", {"cap_records": 2, "discard": "reject"})
    put_router(c, "trim", src, dst)
    write(c, src, {"data": 1}, {"data": 2})
    wait(lambda: c.ok("GET", "/v0/routers/trim")["forwarded"] == 2)
    sse = SSE(server.http_port, f"/v0/topics/{dst}/watch?from_seq=2")
    write(c, src, *({"data": i} for i in range(3, 13)))  # src keeps 11, 12; 3..10 evicted
    wait(lambda: c.ok("GET", "/v0/routers/trim")["status"] == "blocked")
    c.ok("POST", f"/v0/topics/{dst}/delete", {"before_seq": 3})  # room: the router resumes
    wait(lambda: c.ok("GET", "/v0/routers/trim")["cursor"] == 12)
    r = redis.Redis(port=server.resp_port, protocol=2, socket_timeout=10)
    r.response_callbacks.pop("XREAD", None)
    got = {"state": c.ok("GET", "/v0/routers/trim"), "diff": read(c, dst, 2),
           "sse": sse.frames(3), "xread": r.execute_command("XREAD", "STREAMS", dst, "0-2"),
           "client": r}
    yield got
    sse.close()
    r.close()
    c.conn.close()


WANT = {"gap_from": 3, "gap_to": 10, "reason": "source_trim", "missed_estimate": 8}


def test_source_trim_on_http_diff(trim: dict[str, Any]) -> None:
    st = trim["state"]
    assert (st["source_trimmed"], st["forwarded"], st["lag"]) == (8, 4, 0)
    diff = trim["diff"]
    assert list(diff["tombstone"]) == list(FIELDS)
    assert {k: diff["tombstone"][k] for k in WANT} == WANT
    assert [(r["$seq"], r["data"]) for r in diff["records"]] == [(11, 11), (12, 12)]
    assert diff["next_from_seq"] == 12


def test_source_trim_on_sse_and_xread(trim: dict[str, Any]) -> None:
    tomb, *recs = trim["sse"]
    assert tomb["event"] == "tombstone" and tomb["cursor"] == {"trim.dst": 10}
    # the same gap; the watermarks are those of the moment the frame went out (the gap may
    # be sent before the copies after it exist)
    assert tomb["data"]["topic"] == "trim.dst"
    assert {k: tomb["data"][k] for k in WANT} == WANT
    assert list(tomb["data"])[1:] == list(FIELDS)
    assert [f["data"]["data"] for f in recs] == [11, 12]
    entries = trim["xread"][0][1]
    tid, pairs = entries[0]
    assert tid.endswith(b"-10") and pairs[:2] == [b"$type", b"tombstone"]
    fields = {pairs[i].decode(): pairs[i + 1].decode() for i in range(2, len(pairs), 2)}
    assert fields == {k: str(v) for k, v in trim["diff"]["tombstone"].items()}
    assert [e[0].split(b"-")[1] for e in entries[1:]] == [b"11", b"12"]


def test_source_trim_in_the_spark_rows(trim: dict[str, Any]) -> None:
    pytest.importorskip("pyarrow")
    from topicsrv.spark.client import read_range
    from topicsrv.spark.rows import to_batch

    pages = list(read_range(trim["client"], "trim.dst", 2, 12, page=10))
    rows = to_batch("trim.dst", [x for page in pages for x in page]).to_pylist()
    assert [(r["kind"], r["seq"]) for r in rows] == [("tombstone", 10), ("record", 11),
                                                     ("record", 12)]
    assert {k: rows[0][k] for k in ("gap_from", "gap_to", "reason")} == {
        k: WANT[k] for k in ("gap_from", "gap_to", "reason")}
