"""Routers under SIGKILL with real processes (issue 13, Must show): a writer feeds a source,
two routers forward it (at_least_once and exactly_once) while a reader reads both dests, the
server is killed at a random moment, restarted, and left to catch up. After every restart:
  - at_least_once: every acknowledged source record is in its dest;
  - exactly_once: every acknowledged source record is in its dest exactly once;
  - every dest record a reader saw before the kill is back at the same seq;
  - `python -m topicsrv check` finds no damage.
"""

from __future__ import annotations

import random
import threading
import time
from pathlib import Path
from typing import Any

from conftest import JsonClient
from topicsrv.storage.fsck import check

CYCLES = 3
DESTS = {"al": ("d-al", "at_least_once"), "ex": ("d-ex", "exactly_once")}


def read_all(c: JsonClient, topic: str) -> dict[int, Any]:
    """seq -> data of every record of `topic` (the root conftest's JsonClient.read_all)."""
    return {seq: rec["data"] for seq, rec in c.read_all(topic)[0].items()}


class Load:
    def __init__(self, port: int, cycle: int) -> None:
        self.port = port
        self.cycle = cycle
        self.stop = threading.Event()
        self.acked: list[dict[str, int]] = []
        self.seen: dict[str, dict[int, Any]] = {d: {} for d, _ in DESTS.values()}

    def writer(self) -> None:
        c = JsonClient(self.port)
        n = 0
        try:
            while not self.stop.is_set():
                datas = [{"c": self.cycle, "n": n, "i": i} for i in range(5)]
                status, _ = c.call("POST", "/v0/topics/src", {"records": [{"data": d} for d in datas]})
                if status == 200:
                    self.acked += datas
                n += 1
        except OSError:
            return

    def reader(self) -> None:
        c = JsonClient(self.port)
        try:
            while not self.stop.is_set():
                for dest in self.seen:
                    self.seen[dest].update(read_all(c, dest))
        except (OSError, AssertionError):
            return


def _caught_up(c: JsonClient) -> bool:
    head = c.ok("GET", "/v0/topics/src?touch=false")["head_seq"]
    return all(c.ok("GET", f"/v0/routers/{name}")["cursor"] >= head for name in DESTS)


def test_sigkill_during_forwarding(server_factory: Any, tmp_path: Path) -> None:
    data = tmp_path / "data"
    srv = server_factory(data_dir=data)
    c = JsonClient(srv.http_port)
    c.ok("PUT", "/v0/topics/src", {"durability": "fsync"})
    for name, (dest, guarantee) in DESTS.items():
        c.ok("PUT", f"/v0/routers/{name}", {"source": "src", "dest": dest, "guarantee": guarantee})
    rng = random.Random(13)
    acked: list[dict[str, int]] = []
    seen: dict[str, dict[int, Any]] = {d: {} for d, _ in DESTS.values()}
    for cycle in range(CYCLES):
        load = Load(srv.http_port, cycle)
        threads = [threading.Thread(target=load.writer), threading.Thread(target=load.reader)]
        for t in threads:
            t.start()
        time.sleep(rng.uniform(0.4, 1.0))
        srv.kill()  # mid-forwarding: no drain, no checkpoint
        load.stop.set()
        for t in threads:
            t.join(30)
        acked += load.acked
        for dest, recs in load.seen.items():
            for seq, d in recs.items():
                assert seen[dest].setdefault(seq, d) == d, (dest, seq)
        srv = server_factory(data_dir=data)
        c = JsonClient(srv.http_port)
        deadline = time.monotonic() + 30
        while not _caught_up(c):
            assert time.monotonic() < deadline, "the routers never caught up after a restart"
            time.sleep(0.05)
        src = read_all(c, "src")
        want = sorted(map(repr, src.values()))
        assert {repr(d) for d in acked} <= set(want)  # fsync: every ack survived
        for dest, guarantee in DESTS.values():
            got = read_all(c, dest)
            assert {s: got.get(s) for s in seen[dest]} == seen[dest], f"{dest}: a seen seq changed"
            datas = sorted(map(repr, got.values()))
            if guarantee == "exactly_once":
                assert datas == want, f"{dest}: not exactly once"
            else:
                assert set(datas) == set(want), f"{dest}: a source record is missing"
            seen[dest].update(got)
    assert sum(len(s) for s in seen.values()) > 0
    srv.stop()
    assert check(data).problems == []
