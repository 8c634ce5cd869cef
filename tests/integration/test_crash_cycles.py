"""Crash cycles with real processes: SIGKILL a server under concurrent fsync writers and
deleters at random moments, restart it, and check every acknowledged write and delete.

What must hold after every restart:
  - every acknowledged write is present with its seq and identical bytes (unless an
    acknowledged delete removed it);
  - every acknowledged delete stays deleted, including deletes of records sealed into
    segments after the WAL holding them was trimmed by a checkpoint;
  - no seq is ever reused: a seq once read never comes back with other bytes, and new
    writes get seqs above everything seen before the crash;
  - `python -m topicsrv check` finds no damage.
"""

from __future__ import annotations

import http.client
import random
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from conftest import JsonClient

TOPICS = ("crash-a", "crash-b")
CYCLES = 20


class Client(JsonClient):
    """The root conftest's JSON client (10 s timeout)."""


def read_all(port: int, topic: str) -> dict[int, dict[str, Any]]:
    return Client(port).read_all(topic)[0]


class Load:
    """Writers and a deleter; records only what the server acknowledged."""

    def __init__(self, port: int, seed: int) -> None:
        self.port = port
        self.rng = random.Random(seed)
        self.seed = seed
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.acked: dict[tuple[str, int], dict[str, Any]] = {}
        self.deleted: set[tuple[str, int]] = set()
        self.attempted: set[tuple[str, int]] = set()  # a delete was sent (maybe unacked)
        self.tags: dict[tuple[str, str], list[int]] = {}

    def writer(self, wid: int) -> None:
        try:
            c = Client(self.port)
            n = 0
            while not self.stop.is_set():
                topic = TOPICS[n % 2]
                tag = f"c{self.seed}-w{wid}-{n}"
                datas = [{"w": wid, "n": n, "i": i, "pad": "x" * (n % 50)} for i in range(10)]
                status, body = c.call("POST", f"/v0/topics/{topic}",
                                      {"records": [{"data": d, "tag": tag} for d in datas]})
                if status != 200:
                    continue
                with self.lock:
                    for seq, d in zip(body["seqs"], datas, strict=True):
                        self.acked[(topic, seq)] = {"data": d, "tag": tag}
                    self.tags[(topic, tag)] = body["seqs"]
                n += 1
        except (OSError, http.client.HTTPException):
            return

    def deleter(self) -> None:
        try:
            c = Client(self.port)
            while not self.stop.is_set():
                time.sleep(0.01)
                with self.lock:
                    if not self.tags:
                        continue
                    (topic, tag), seqs = self.rng.choice(list(self.tags.items()))
                    self.attempted.update((topic, s) for s in seqs)
                status, _ = c.call("POST", f"/v0/topics/{topic}/delete", {"match": tag})
                if status == 200:
                    with self.lock:
                        self.deleted.update((topic, s) for s in seqs)
                        self.tags.pop((topic, tag), None)
        except (OSError, http.client.HTTPException):
            return


def fsck(data_dir: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "topicsrv", "check", "--data-dir", str(data_dir)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.slow
def test_sigkill_under_concurrent_fsync_writers(server_factory: Any, tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    rng = random.Random(1234)
    acked: dict[tuple[str, int], dict[str, Any]] = {}
    deleted: set[tuple[str, int]] = set()
    attempted: set[tuple[str, int]] = set()
    seen: dict[tuple[str, int], dict[str, Any]] = {}
    for cycle in range(CYCLES):
        srv = server_factory("--checkpoint-interval-ms", "250", "--wal-shards", "2", data_dir=data_dir)
        srv.wait_ready()
        port = srv.http_port
        c = Client(port)
        for topic in TOPICS:
            status, body = c.call("PUT", f"/v0/topics/{topic}", {"durable": True})
            assert status in (200, 201), body
        # 1. everything acknowledged before the kill is exactly there
        max_seen = {t: 0 for t in TOPICS}
        for topic in TOPICS:
            got = read_all(port, topic)
            for seq, rec in got.items():
                key = (topic, seq)
                assert key not in deleted, f"cycle {cycle}: deleted {key} came back"
                if key in seen:
                    assert seen[key] == rec, f"cycle {cycle}: seq {key} reused with other bytes"
                seen[key] = rec
            for (t, seq), want in acked.items():
                if t != topic or (t, seq) in deleted:
                    continue
                if (t, seq) in attempted and seq not in got:
                    continue  # a delete was in flight at the kill: it may have applied
                assert seq in got, f"cycle {cycle}: acknowledged {topic}:{seq} is missing"
                assert got[seq]["data"] == want["data"] and got[seq]["$tag"] == want["tag"]
            max_seen[topic] = max([s for (t, s) in seen if t == topic], default=0)
        # 2. load, then SIGKILL at a random moment
        load = Load(port, cycle)
        threads = [threading.Thread(target=load.writer, args=(w,)) for w in range(4)]
        threads.append(threading.Thread(target=load.deleter))
        for th in threads:
            th.start()
        time.sleep(rng.uniform(0.3, 0.9))
        srv.kill()
        load.stop.set()
        for th in threads:
            th.join(15)
        for (topic, seq) in load.acked:
            assert seq > max_seen[topic], f"cycle {cycle}: new write got old seq {topic}:{seq}"
        acked.update(load.acked)
        deleted |= load.deleted
        attempted |= load.attempted
        if cycle % 5 == 4:
            fsck(data_dir)
    srv = server_factory(data_dir=data_dir)
    srv.wait_ready()
    for topic in TOPICS:
        got = read_all(srv.http_port, topic)
        live = {s for (t, s) in acked if t == topic and (t, s) not in attempted}
        assert live <= set(got)
        assert not {s for (t, s) in deleted if t == topic} & set(got)
        assert max(got) > 4096  # sealed segments were exercised
    srv.stop()
    fsck(data_dir)
    assert len(acked) > 5000 and deleted
