"""MULTI/EXEC/WATCH beyond what compat/test_transactions.py compares with redis-server: WATCH
hears the HTTP front and TTL expiry, a transaction is atomic for readers of both fronts, its
commits are awaited per element, the queue is bounded, and watches leave with the client.
Socket tests run on both RESP I/O paths."""

from __future__ import annotations

import json
import threading
import urllib.request
from typing import Any

import pytest
import redis
import trio
import trio.testing

from tests.resp.conftest import InProc, frame, wait_for
from tests.resp.test_session import make, new, run
from topicsrv.clock import FakeClock
from topicsrv.errors import TopicsError
from topicsrv.resp import multi
from topicsrv.resp.commands.base import REGISTRY, Pending
from topicsrv.resp.session import NEED_DATA, WAIT_COMMIT

Srv = tuple[InProc, FakeClock]


def http(s: InProc, method: str, path: str, body: Any = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{s.http_port}{path}", data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        raw = resp.read()
        return json.loads(raw) if raw else None


def conn(s: InProc) -> redis.Redis:
    return redis.Redis(port=s.port, socket_timeout=10, decode_responses=True)


def watched_exec(r: redis.Redis, key: str, change: Any) -> Any:
    r.execute_command("WATCH", key)
    change()
    r.execute_command("MULTI")
    r.execute_command("XADD", key, "*", "tx", "1")
    return r.execute_command("EXEC")


def test_http_changes_to_a_watched_key_abort_exec(srv: Srv) -> None:
    s, _ = srv
    r = conn(s)
    r.xadd("k", {"a": "1"})
    changes = [
        lambda: http(s, "POST", "/v0/topics/k", {"records": [{"data": {"x": "1"}}]}),
        lambda: http(s, "POST", "/v0/topics/k/delete", {"before_seq": 2}),
        lambda: http(s, "PUT", "/v0/topics/k", {"cap_records": 100}),
        lambda: http(s, "DELETE", "/v0/topics/k"),
    ]
    for change in changes:
        r.xadd("k", {"a": "again"})
        assert watched_exec(r, "k", change) is None
    assert watched_exec(r, "k", lambda: http(s, "POST", "/v0/topics/other",
                                             {"records": [{"data": 1}]})) is not None


def test_records_expiring_under_a_watch_abort_exec(srv: Srv) -> None:
    s, clock = srv
    r = conn(s)
    r.execute_command("TOPIC.CREATE", "ttl", "TTL_MS", "1000")
    r.xadd("ttl", {"a": "1"})
    assert watched_exec(r, "ttl", lambda: clock.advance(500)) is not None  # nothing expired
    assert watched_exec(r, "ttl", lambda: clock.advance(2000)) is None  # the records expired


def test_a_transaction_is_atomic_for_readers_of_both_fronts(srv: Srv) -> None:
    """Each EXEC appends 3 records to `a` then 3 to `b`; a reader over XREAD (both keys in one
    command) or HTTP diff never sees a count that is not a whole number of transactions."""
    s, _ = srv
    n_tx, per = 150, 3
    seen: list[tuple[str, int, int]] = []
    done = threading.Event()

    def reader() -> None:
        rr = conn(s)
        while not done.is_set():
            got = dict(rr.xread({"a": 0, "b": 0}) or [])
            seen.append(("xread", len(got.get("a", [])), len(got.get("b", []))))
            for key in ("a", "b"):
                try:
                    d = http(s, "POST", f"/v0/topics/{key}/diff", {"from_seq": 0, "limit": 10000})
                except urllib.error.HTTPError:  # 404 before the first transaction
                    continue
                seen.append((f"diff {key}", len(d["records"]), 0))

    t = threading.Thread(target=reader)
    t.start()
    try:
        r = conn(s)
        for i in range(n_tx):
            with r.pipeline() as p:  # MULTI ... EXEC
                for key in ("a", "b"):
                    for j in range(per):
                        p.xadd(key, {"tx": str(i), "j": str(j)})
                assert len(p.execute()) == 2 * per
    finally:
        done.set()
        t.join(30)
    assert r.xlen("a") == r.xlen("b") == n_tx * per
    assert len(seen) > 10
    torn = [x for x in seen if x[1] % per or x[2] % per or (x[0] == "xread" and x[1] != x[2])]
    assert not torn, torn[:5]


def test_a_blocked_reader_wakes_with_the_whole_transaction(srv: Srv) -> None:
    s, _ = srv
    r = conn(s)
    r.xadd("w", {"seed": "0"})
    box: dict[str, Any] = {}
    t = threading.Thread(target=lambda: box.update(got=conn(s).xread({"w": "$"}, block=5000)))
    t.start()
    wait_for(lambda: any(c.blocked for c in list(s.ctx.metrics.resp.clients.values())))
    with r.pipeline() as p:
        for i in range(5):
            p.xadd("w", {"i": str(i)})
        p.execute()
    t.join(10)
    assert len(box["got"][0][1]) == 5


def test_watches_leave_the_registry_with_the_client(srv: Srv) -> None:
    s, _ = srv
    r = conn(s)
    r.execute_command("WATCH", "gone1", "gone2")
    registry = multi.watches_of(s.ctx.engine)
    assert set(registry.by_topic) == {"gone1", "gone2"}
    r.execute_command("UNWATCH")
    assert not registry.by_topic
    sock = s.connect()
    sock.sendall(frame(b"WATCH", b"gone3"))
    assert sock.recv(100) == b"+OK\r\n"
    sock.close()
    wait_for(lambda: not registry.by_topic)


# ---- in memory: commits, limits --------------------------------------------------------------

class _Token:
    def __init__(self, error: Exception | None = None) -> None:
        self.done = trio.Event()
        self.error = error

    async def wait(self) -> None:
        await self.done.wait()
        if self.error is not None:
            raise self.error


def test_exec_waits_for_every_commit_and_fails_only_its_own_element(
        monkeypatch: pytest.MonkeyPatch) -> None:
    made: dict[bytes, _Token] = {}

    def echo(ctx: Any, args: list[bytes]) -> Any:
        failed = TopicsError("insufficient_storage", "no space left on device")
        token = made[args[0]] = _Token(failed if args[0] == b"fail" else None)
        return Pending(token, args[0])

    env = make()  # loads the command table first: the test runs alone too
    monkeypatch.setattr(REGISTRY["echo"], "handler", echo)
    s = new(env)
    out, r = run(s, frame(b"MULTI") + frame(b"ECHO", b"ok") + frame(b"PING")
                 + frame(b"ECHO", b"fail") + frame(b"EXEC"))
    assert r is WAIT_COMMIT and out == b""  # nothing goes out before the commits

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(s.wait_commits)
            await trio.testing.wait_all_tasks_blocked()
            made[b"ok"].done.set()
            await trio.testing.wait_all_tasks_blocked()
            assert nursery.child_tasks  # still waiting for the second commit
            made[b"fail"].done.set()

    trio.run(main)
    assert s.data_to_send() == (b"+OK\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n"
                                b"*3\r\n$2\r\nok\r\n+PONG\r\n-ERR no space left on device\r\n")
    assert run(s) == (b"", NEED_DATA)


def test_the_queue_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(multi, "MAX_QUEUED", 2)
    s = new(make())
    out, _ = run(s, frame(b"MULTI") + frame(b"PING") * 3 + frame(b"EXEC") + frame(b"PING"))
    assert out == (b"+OK\r\n+QUEUED\r\n+QUEUED\r\n-ERR the transaction is too large (2 commands, "
                   b"8 bytes queued); EXEC or DISCARD it\r\n-" + multi.EXECABORT.encode()
                   + b"\r\n+PONG\r\n")


def test_reset_and_exec_end_the_transaction() -> None:
    s = new(make())
    out, _ = run(s, frame(b"WATCH", b"k") + frame(b"MULTI") + frame(b"PING") + frame(b"RESET")
                 + frame(b"EXEC"))
    assert out == b"+OK\r\n+OK\r\n+QUEUED\r\n+RESET\r\n-ERR EXEC without MULTI\r\n"
    assert s.client.tx is None


def test_exec_of_many_xadds_is_a_few_batched_engine_writes(
        srv: Srv, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 23 item 7 (transactions.py Rule 5): EXEC of 2,500 plain XADDs to one key, with a
    bad one and another key's XADD in the middle, goes to the engine as batched writes (one per
    batch.MAX_RUN commands of a run), not 2,500; every command keeps its own reply, in order,
    and still nothing runs between them (one synchronous step)."""
    s, _ = srv
    engine = s.ctx.engine
    writes: list[tuple[str, int]] = []
    real_write = engine.write

    def counting(name: str, recs: Any, *a: Any, **kw: Any) -> Any:
        writes.append((name, len(recs)))
        return real_write(name, recs, *a, **kw)

    monkeypatch.setattr(engine, "write", counting)
    r = conn(s)
    pipe = r.pipeline(transaction=True)
    for i in range(1200):
        pipe.xadd("big", {"i": str(i)})
    pipe.execute_command("XADD", "big", "*", "a", "b", "c")  # odd pairs: its own error, in place
    pipe.xadd("other", {"x": "1"})
    for i in range(1200, 2500):
        pipe.xadd("big", {"i": str(i)})
    replies = pipe.execute(raise_on_error=False)
    assert len(replies) == 2502
    assert isinstance(replies[1200], redis.ResponseError)
    ids = [x for k, x in enumerate(replies) if k not in (1200, 1201)]
    seqs = [int(x.split("-")[1]) for x in ids]
    assert seqs == list(range(1, 2501))  # topic seqs: one per XADD, in queue order
    assert [e[1]["i"] for e in r.xrange("big")] == [str(i) for i in range(2500)]
    assert writes == [("big", 1000), ("big", 200), ("other", 1), ("big", 1000), ("big", 300)]


def test_a_big_transaction_leaves_the_gc_little_to_scan_and_waits_each_commit_once() -> None:
    """Issue 23 item 7 (multi.py Rule 5, awaits.py Rule 1): 3,000 queued commands are kept as
    tuples the cyclic GC no longer tracks after a collection (a full collection during a big
    MULTI used to scan each of them, stalling every client), and the replies of a batched
    write, which share one commit token, cost one wait, not one each."""
    import gc

    from tests.resp.test_session import make, new, run
    from topicsrv.resp.awaits import settle

    s = new(make())
    run(s, frame(b"MULTI") + frame(b"XADD", b"k", b"*", b"f", b"v") * 3000)
    tx = s.client.tx
    assert tx is not None and len(tx.queued) == 3000
    gc.collect()
    assert sum(gc.is_tracked(argv) for argv in tx.queued) == 0

    class Token:
        waits = 0

        async def wait(self) -> None:
            Token.waits += 1

    shared, other = Token(), Token()
    marks = [(shared, i, i + 1) for i in range(1000)] + [(other, 1000, 1001)]
    trio.run(settle, marks, bytearray(1001), s.front)
    assert Token.waits == 2


def test_a_big_exec_is_answered_whole_and_its_queue_is_freed_after_the_step(srv: Srv) -> None:
    """Issue 23 item 7 (topicsrv/lazyfree.py): the queue, the argv lists and the reply of an
    EXEC of more than lazyfree.SLICE commands are released in slices after EXEC's step, not
    inside it; the client still gets every reply, in order, and the writes are all there."""
    from topicsrv.lazyfree import SLICE

    s, _ = srv
    n = SLICE + 5000
    r = conn(s)
    pipe = r.pipeline(transaction=True)
    for i in range(n):
        pipe.set(f"lazy:{i % 100}", str(i))
    pipe.xadd("lazy:s", {"f": "v"})
    replies = pipe.execute()
    assert replies[:n] == [True] * n and replies[n].endswith("-1")
    assert r.get("lazy:99") == str(n - 1) and r.xlen("lazy:s") == 1
    lazy = s.ctx.lazyfree
    wait_for(lambda: not lazy.pending and lazy.freed >= 3 * (n + 1))  # queue, argvs, reply
    memory = r.info("memory")  # Redis's own INFO fields for it
    assert memory["lazyfree_pending_objects"] == 0 and memory["lazyfreed_objects"] >= 3 * (n + 1)
