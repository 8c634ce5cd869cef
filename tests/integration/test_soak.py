"""A crash soak over every feature at once, with real processes: writers on a topic of each
durability class (over HTTP, and XADD over RESP), a lease-queue producer and a worker that
claims and acks, and a router forwarding the fsync topic, all running while the server is
SIGKILLed at a random moment; then a restart and the checks below, cycle after cycle.
`make test` runs 3 cycles; `pytest -m soak` runs 20 (the `soak` marker is skipped by default).

What must hold after every restart (storage.md, "Durability classes"):
  - fsync topic (HTTP and RESP writes): every acknowledged write, same seq, same bytes;
  - disk topic: every acknowledged write is there with its seq and bytes, or its seq lies in
    a `lost` tombstone a reader from 0 is given: never silently gone;
  - memory and ephemeral topics: the config survives; a record that is there is one that was
    written (nothing fabricated, no seq with other bytes);
  - queue: no job acknowledged by an ack comes back, no produced job that was never sent in
    an ack is missing (an ack whose reply the kill cut off may or may not have happened);
    every third claimed batch is left leased and never acked, so some jobs always stay;
  - router (at least once): once caught up, the dest holds every source record;
  - no seq is reused: a seq read before the crash never comes back with other bytes;
  - `python -m topicsrv check` finds no damage in the data dir.
"""

from __future__ import annotations

import random
import socket
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from conftest import JsonClient
from topicsrv.storage.fsck import check

CLASSES = ("fsync", "disk", "memory", "ephemeral")


def read_all(c: JsonClient, topic: str) -> tuple[dict[int, Any], set[int]]:
    """seq -> data of every record from seq 0, and the seqs inside `lost` tombstones."""
    records, lost = c.read_all(topic)
    return {seq: rec.get("data") for seq, rec in records.items()}, lost


def _xadd(key: bytes, value: bytes) -> bytes:
    parts = [b"XADD", key, b"*", b"v", value]
    return b"*5\r\n" + b"".join(b"$%d\r\n%b\r\n" % (len(p), p) for p in parts)


class Load:
    """Every writer keeps only what the server acknowledged."""

    def __init__(self, srv: Any, cycle: int) -> None:
        self.srv = srv
        self.cycle = cycle
        self.stop = threading.Event()
        self.acked: dict[str, dict[int, Any]] = {f"s-{k}": {} for k in CLASSES}
        self.resp_acked: list[bytes] = []
        self.produced: list[int] = []
        self.jobs_acked: list[int] = []
        self.ack_sent: list[int] = []  # acks sent, answered or not

    def threads(self) -> list[threading.Thread]:
        fns = [*(lambda k=k: self.writer(k) for k in CLASSES), self.resp_writer,
               self.producer, self.worker]
        return [threading.Thread(target=f) for f in fns]

    def writer(self, klass: str) -> None:
        topic = f"s-{klass}"
        c = JsonClient(self.srv.http_port)
        n = 0
        try:
            while not self.stop.is_set():
                datas = [{"c": self.cycle, "n": n, "i": i} for i in range(5)]
                status, body = c.call("POST", f"/v0/topics/{topic}", {"records": [{"data": d} for d in datas]})
                if status == 200:
                    self.acked[topic].update(zip(body["seqs"], datas, strict=True))
                n += 1
        except OSError:
            return

    def resp_writer(self) -> None:
        try:
            with socket.create_connection(("127.0.0.1", self.srv.resp_port), timeout=10) as s:
                n = 0
                while not self.stop.is_set():
                    value = b"%d-%d" % (self.cycle, n)
                    s.sendall(_xadd(b"s-resp", value))
                    reply = s.recv(200)
                    if not reply.startswith(b"$"):
                        return
                    self.resp_acked.append(value)
                    n += 1
        except OSError:
            return

    def producer(self) -> None:
        c = JsonClient(self.srv.http_port)
        try:
            while not self.stop.is_set():
                status, body = c.call("POST", "/v0/topics/s-q", {"records": [{"data": {"job": 1}}] * 3})
                if status == 200:
                    self.produced += body["seqs"]
                time.sleep(0.005)
        except OSError:
            return

    def worker(self) -> None:
        c = JsonClient(self.srv.http_port)
        batches = 0
        try:
            while not self.stop.is_set():
                status, body = c.call("POST", "/v0/topics/s-q/claim", {"node": "w", "max": 5, "wait_ms": 50})
                if status != 200 or not body["jobs"]:
                    continue
                jobs = body["jobs"]
                batches += 1
                if batches % 3 == 0:
                    continue  # a worker that dies holding its lease: these jobs must survive unacked
                self.ack_sent += [j["$seq"] for j in jobs]  # before the reply (see soak)
                status, done = c.call("POST", "/v0/topics/s-q/ack", {
                    "node": "w", "seqs": [j["$seq"] for j in jobs],
                    "lease_ids": [j["lease_id"] for j in jobs]})
                if status == 200:
                    self.jobs_acked += done["acked"]
        except OSError:
            return


def _setup(c: JsonClient) -> None:
    for klass in CLASSES:
        c.ok("PUT", f"/v0/topics/s-{klass}", {"durability": klass})
    c.ok("PUT", "/v0/topics/s-resp", {"durability": "fsync"})
    c.ok("PUT", "/v0/topics/s-q", {"type": "queue", "durability": "fsync", "lease_ms": 600_000})
    c.ok("PUT", "/v0/routers/s-r", {"source": "s-fsync", "dest": "s-copy"})


def _router_caught_up(c: JsonClient) -> bool:
    head = c.ok("GET", "/v0/topics/s-fsync?touch=false")["head_seq"]
    return bool(c.ok("GET", "/v0/routers/s-r")["cursor"] >= head)


def soak(server_factory: Any, data: Path, cycles: int, seed: int) -> None:
    srv = server_factory(data_dir=data)
    _setup(JsonClient(srv.http_port))
    rng = random.Random(seed)
    acked: dict[str, dict[int, Any]] = {f"s-{k}": {} for k in CLASSES}
    seen: dict[str, dict[int, Any]] = {}  # every seq ever read, per topic: never other bytes
    resp_acked: list[bytes] = []
    produced: set[int] = set()
    jobs_acked: set[int] = set()
    ack_sent: set[int] = set()
    for cycle in range(cycles):
        load = Load(srv, cycle)
        threads = load.threads()
        for t in threads:
            t.start()
        time.sleep(rng.uniform(0.3, 1.2))
        srv.kill()  # no drain, no flush, no checkpoint
        load.stop.set()
        for t in threads:
            t.join(30)
        for topic, recs in load.acked.items():
            acked[topic].update(recs)
        resp_acked += load.resp_acked
        produced.update(load.produced)
        jobs_acked.update(load.jobs_acked)
        ack_sent.update(load.ack_sent)

        srv = server_factory(data_dir=data)
        c = JsonClient(srv.http_port, timeout=30)
        where = f"cycle {cycle}"
        for klass in CLASSES:
            topic = f"s-{klass}"
            assert c.ok("GET", f"/v0/topics/{topic}?touch=false")["durability"] == klass
            got, lost = read_all(c, topic)
            for seq, data_ in got.items():
                assert seen.setdefault(topic, {}).setdefault(seq, data_) == data_, \
                    f"{where}: {topic} seq {seq} came back with other bytes"
            if klass == "fsync":
                missing = {s for s in acked[topic] if got.get(s) != acked[topic][s]}
                assert not missing, f"{where}: acknowledged {topic} seqs missing: {sorted(missing)[:10]}"
            elif klass == "disk":
                silent = {s for s in acked[topic] if got.get(s) != acked[topic][s] and s not in lost}
                assert not silent, f"{where}: {topic} lost acknowledged seqs silently: {sorted(silent)[:10]}"
            else:  # memory, ephemeral: nothing fabricated
                for seq, data_ in got.items():
                    assert acked[topic].get(seq, data_) == data_, f"{where}: {topic} seq {seq} fabricated"
        resp_recs, _ = read_all(c, "s-resp")
        via_resp = {d.get("v") if isinstance(d, dict) else d for d in resp_recs.values()}
        assert {v.decode() for v in resp_acked} <= via_resp, f"{where}: an acknowledged XADD is missing"
        jobs, _ = read_all(c, "s-q")
        assert not (set(jobs) & jobs_acked), f"{where}: acked jobs came back"
        # an ack the kill cut off before its reply may or may not have happened (it is
        # durable before it is answered); every job never sent in an ack must be there
        assert produced - ack_sent <= set(jobs), f"{where}: unacked jobs are missing"
        deadline = time.monotonic() + 30
        while not _router_caught_up(c):
            assert time.monotonic() < deadline, f"{where}: the router never caught up"
            time.sleep(0.05)
        source, _ = read_all(c, "s-fsync")
        copies, _ = read_all(c, "s-copy")
        assert {repr(d) for d in source.values()} <= {repr(d) for d in copies.values()}, \
            f"{where}: the router's dest misses source records"
    srv.stop()
    assert check(data).problems == []
    # the load really ran: every kind of write was acknowledged at some point
    assert all(acked.values()) and resp_acked and jobs_acked and produced - ack_sent, \
        ({t: len(v) for t, v in acked.items()}, len(resp_acked), len(jobs_acked), len(produced))


def test_crash_soak_over_every_feature(server_factory: Any, tmp_path: Path) -> None:
    soak(server_factory, tmp_path / "data", cycles=3, seed=17)


@pytest.mark.soak
def test_crash_soak_over_every_feature_20_cycles(server_factory: Any, tmp_path: Path) -> None:
    soak(server_factory, tmp_path / "data", cycles=20, seed=20)
