"""Router cycles (allow_cycle mirrors and rings) across kill -9 and SIGTERM, with real
processes (issue 23 item 1). Before the fix a kill -9 of an A <-> B mirror made the crash
`lost` range travel the cycle forever: heads grew by millions a second and the next restart
never became ready.

What must hold after every restart, for a two-node mirror and a three-node ring, over kill -9
and SIGTERM rounds repeated:
  - every head moves at most once per crash, by at most one HeadWatermark reservation
    (docs/storage.md: at most 65536 seqs), and not at all after a SIGTERM;
  - the routers settle (every cursor at its source's head) and the heads then stay still;
  - recovery reads each slot on disk at most once and re-derives no more copies than were
    ever written (bounded by the records on disk, never by a growing seq range);
  - every record written is in every topic of the cycle exactly once, and a record written
    after the restart makes each head move by exactly one;
  - a dest whose source's durable WAL shows every forwarded record (a clean WAL end) gets
    no `lost` tombstone from the router (docs/routers.md "After a crash").
"""

from __future__ import annotations

import re
import signal
import time
from pathlib import Path

from conftest import JsonClient, ServerProcess

RESERVE_MAX = 65536  # the largest HeadWatermark reservation (docs/storage.md "Write path")
ROUNDS = ("kill", "term", "kill", "kill", "term")
RECOVERED = re.compile(r"recovered \d+ topics, (\d+) records, \d+ routers \((\d+) copies re-derived\)")


def _start(data: Path) -> tuple[ServerProcess, JsonClient]:
    srv = ServerProcess(data).start(timeout=30)
    return srv, JsonClient(srv.http_port)


def _heads(c: JsonClient, topics: list[str]) -> dict[str, int]:
    return {t: c.ok("GET", f"/v0/topics/{t}?touch=false")["head_seq"] for t in topics}


def _settled(c: JsonClient, routers: dict[str, tuple[str, str]], timeout: float = 20) -> dict[str, int]:
    """Wait until every router's cursor is at its source's head; the heads then."""
    topics = sorted({t for pair in routers.values() for t in pair})
    deadline = time.monotonic() + timeout
    while True:
        heads = _heads(c, topics)
        cursors = {name: c.ok("GET", f"/v0/routers/{name}")["cursor"] for name in routers}
        if all(cursors[name] >= heads[src] for name, (src, _) in routers.items()) and _heads(c, topics) == heads:
            return heads
        assert time.monotonic() < deadline, f"routers never settled: heads {heads}, cursors {cursors}"
        time.sleep(0.05)


def _datas(c: JsonClient, topic: str) -> list[str]:
    recs, _ = c.read_all(topic)
    return sorted(r["data"] for r in recs.values())


def _last_recovery(srv: ServerProcess) -> tuple[int, int]:
    """(records replayed, copies re-derived) of the last startup, from the server's log."""
    found = RECOVERED.findall(srv.log_path.read_text())
    assert found, "no `recovered ...` line in the log"
    records, copies = found[-1]
    return int(records), int(copies)


def _cycle(tmp_path: Path, nodes: list[str]) -> None:
    topics = [f"t.{n}" for n in nodes]
    routers = {f"r.{a}": (f"t.{a}", f"t.{b}") for a, b in zip(nodes, nodes[1:] + nodes[:1], strict=True)}
    data = tmp_path / "data"
    srv, c = _start(data)
    try:
        for name, (src, dst) in routers.items():
            c.ok("PUT", f"/v0/routers/{name}", {"source": src, "dest": dst, "allow_cycle": True})
        written: list[str] = []
        for n in nodes:
            c.ok("POST", f"/v0/topics/t.{n}", {"records": [{"data": f"from {n}", "node": n}]})
            written.append(f"from {n}")
        heads = _settled(c, routers)
        assert heads == {t: len(nodes) for t in topics}  # each record reached every topic once
        for i, how in enumerate(ROUNDS):
            srv.stop(signal.SIGKILL if how == "kill" else signal.SIGTERM)
            srv, c = _start(data)
            after = _settled(c, routers)
            for t in topics:
                moved = after[t] - heads[t]
                assert 0 <= moved <= (RESERVE_MAX if how == "kill" else 0), (how, t, heads[t], after[t])
            records, copies = _last_recovery(srv)
            assert records <= sum(heads.values()), (how, records)  # each slot read at most once
            assert copies <= len(written) * (len(topics) - 1), (how, copies)
            for t in topics:
                assert _datas(c, t) == sorted(written), (how, t)
            # still: a new record moves every head by exactly one, and nothing else moves
            n = nodes[i % len(nodes)]
            c.ok("POST", f"/v0/topics/t.{n}", {"records": [{"data": f"round {i}", "node": n}]})
            written.append(f"round {i}")
            heads = _settled(c, routers)
            assert heads == {t: after[t] + 1 for t in topics}, (how, after, heads)
            time.sleep(0.3)
            assert _heads(c, topics) == heads, "heads moved with nothing written"
    finally:
        srv.stop()


def test_mirror_survives_kill9_and_sigterm(tmp_path: Path) -> None:
    _cycle(tmp_path, ["x", "y"])


def test_three_node_ring_survives_kill9_and_sigterm(tmp_path: Path) -> None:
    _cycle(tmp_path, ["n1", "n2", "n3"])


def test_no_lost_tombstone_when_no_forwarded_copy_was_lost(tmp_path: Path) -> None:
    """A `disk` source into an `fsync` dest: the source's WAL ended cleanly, so every record
    the router forwarded is back and re-derived; the dest gets no `lost` gap and keeps its head."""
    data = tmp_path / "data"
    srv, c = _start(data)
    try:
        c.ok("PUT", "/v0/topics/dst", {"durability": "fsync"})
        c.ok("PUT", "/v0/routers/r", {"source": "src", "dest": "dst"})
        c.ok("POST", "/v0/topics/src", {"records": [{"data": f"r{i}"} for i in range(5)]})
        routers = {"r": ("src", "dst")}
        heads = _settled(c, routers)
        assert heads == {"src": 5, "dst": 5}
        for round_ in range(3):
            srv.stop(signal.SIGKILL)
            srv, c = _start(data)
            after = _settled(c, routers)
            assert after["dst"] == heads["dst"], after  # no router gap
            recs, lost = c.read_all("dst")
            assert lost == set()
            assert sorted(r["data"] for r in recs.values()) == sorted(f"r{i}" for i in range(5 + round_))
            c.ok("POST", "/v0/topics/src", {"records": [{"data": f"r{5 + round_}"}]})
            heads = _settled(c, routers)
            assert heads["dst"] == after["dst"] + 1
    finally:
        srv.stop()
