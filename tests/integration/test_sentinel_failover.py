"""Real processes: failover run by the real Redis Sentinel (issue 37; docs/replication.md).

One topicsrv primary, two topicsrv replicas and three `redis-server --sentinel` processes
(quorum 2, down-after-milliseconds 2000) on loopback. A writer goes through redis-py's
`Sentinel.master_for`, each SET and XADD followed by `WAIT 1 1000`. Each round kills the
primary with SIGKILL under that load and asserts: Sentinel promotes a replica and the other
follows it; the same client objects go on writing; every write whose WAIT counted a replica is
on the new primary; the restarted old primary rejoins as a replica (Sentinel tells it to),
answers READONLY and holds exactly the new primary's data. Five rounds of successive failovers.
"""

from __future__ import annotations

import shutil
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import redis
from redis.sentinel import Sentinel

from conftest import free_port
from tests.integration.replhelp import caught_up, dump, wait_until

ROUNDS = 5


class Writer(threading.Thread):
    """SET and XADD through Sentinel's master, each followed by WAIT 1 1000."""

    def __init__(self, sentinel: Sentinel) -> None:
        super().__init__(daemon=True)
        self.master = sentinel.master_for("mymaster", socket_timeout=2, retry_on_timeout=False)
        self.acked_keys: list[str] = []
        self.acked_ids: list[bytes] = []
        self.attempts = 0
        self.stop = threading.Event()
        self.n = 0

    def run(self) -> None:
        while not self.stop.is_set():
            self.n += 1
            key = f"k{self.n}"
            try:
                self.attempts += 1
                self.master.set(key, self.n)
                xid = self.master.xadd("events", {"n": self.n})
                if self.master.execute_command("WAIT", 1, 1000) >= 1:
                    self.acked_keys.append(key)
                    self.acked_ids.append(xid)
            except (redis.ConnectionError, redis.TimeoutError, redis.ReadOnlyError,
                    redis.ResponseError):
                time.sleep(0.05)


def _sentinel(workdir: Path, i: int, primary_port: int) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    conf = workdir / f"sentinel{i}.conf"
    conf.write_text(
        f"port {port}\nbind 127.0.0.1\ndir {workdir}\n"
        f"sentinel monitor mymaster 127.0.0.1 {primary_port} 2\n"
        "sentinel down-after-milliseconds mymaster 2000\n"
        "sentinel failover-timeout mymaster 6000\n"
        "sentinel parallel-syncs mymaster 2\n")
    log = open(workdir / f"sentinel{i}.log", "ab")  # noqa: SIM115 - closed with the process
    proc = subprocess.Popen(["redis-server", str(conf), "--sentinel"], stdout=log, stderr=log)
    return proc, port


def _client(port: int) -> redis.Redis:
    return redis.Redis(port=port, socket_timeout=5)


def _round(rnd: int, sentinel: Sentinel, nodes: dict[int, Any], ports: list[int],
           writer: Writer) -> None:
    """One failover: kill the primary, check the promotion, the writes and the rejoin."""
    old = sentinel.discover_master("mymaster")[1]
    others = [p for p in ports if p != old]
    start = writer.n
    wait_until(lambda: len(writer.acked_keys) > 0 and writer.n > start + 20, 30,
               "writes before the kill")
    nodes[old].kill()
    t0 = time.monotonic()

    def promoted() -> bool:
        try:
            return sentinel.discover_master("mymaster")[1] != old
        except redis.RedisError:
            return False

    wait_until(promoted, 40, f"round {rnd}: Sentinel to promote a replica")
    new = sentinel.discover_master("mymaster")[1]
    assert new in others
    follower = [p for p in others if p != new][0]
    wait_until(lambda: _client(new).info("replication")["role"] == "master", 20,
               "the promoted replica's role")
    N = _client(new)
    wait_until(lambda: _client(follower).info("replication").get("master_port") == new
               and _client(follower).info("replication")["master_link_status"] == "up",
               40, f"round {rnd}: the other replica to follow the new primary")
    failover_s = time.monotonic() - t0
    # the same client objects go on writing
    after = len(writer.acked_keys)
    wait_until(lambda: len(writer.acked_keys) > after + 10, 30,
               f"round {rnd}: acknowledged writes on the new primary")
    # every write a replica acknowledged is on the new primary (the lists are read
    # before the new primary is: the writer goes on meanwhile)
    acked, acked_ids = list(writer.acked_keys), list(writer.acked_ids)
    missing = [k for k in acked if N.exists(k) == 0]
    assert not missing, (rnd, len(missing), missing[:5])
    have = {xid for xid, _ in N.xrange("events")}
    assert not [x for x in acked_ids if x not in have]
    # the old primary comes back; Sentinel turns it into a replica of the new one
    nodes[old].start()
    back = _client(old)
    wait_until(lambda: back.info("replication")["role"] == "slave"
               and back.info("replication").get("master_port") == new, 60,
               f"round {rnd}: the old primary to rejoin as a replica")
    try:
        back.set("x", "y")
        raise AssertionError("the old primary accepted a write after rejoining")
    except redis.ReadOnlyError:
        pass
    print(f"round {rnd}: killed {old}, promoted {new} in {failover_s:.1f}s, "
          f"{len(acked)} acknowledged writes checked")


def test_sentinel_failover_rounds(server_factory: Any, tmp_path: Path) -> None:
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed and scripts/ensure-tools.sh could not install "
                    "it: Sentinel is redis-server's --sentinel mode")
    ports = [free_port() for _ in range(3)]
    nodes = {}
    nodes[ports[0]] = server_factory("--resp-port", str(ports[0]), data_dir=tmp_path / "n0")
    for i in (1, 2):
        nodes[ports[i]] = server_factory("--resp-port", str(ports[i]), "--replicaof",
                                         f"127.0.0.1:{ports[0]}", data_dir=tmp_path / f"n{i}")
    for p in ports[1:]:
        caught_up(_client(ports[0]), _client(p))
    sentinels = [_sentinel(tmp_path, i, ports[0]) for i in range(3)]
    try:
        sentinel = Sentinel([("127.0.0.1", p) for _, p in sentinels], socket_timeout=1)
        wait_until(lambda: len(sentinel.discover_slaves("mymaster")) == 2, 30,
                   "Sentinel to find both replicas")
        writer = Writer(sentinel)
        writer.start()
        for rnd in range(ROUNDS):
            _round(rnd, sentinel, nodes, ports, writer)
        writer.stop.set()
        writer.join(10)
        current = sentinel.discover_master("mymaster")[1]
        C = _client(current)
        for p in ports:
            if p != current:
                caught_up(C, _client(p), 60)
                assert dump(_client(p)) == dump(C)
    finally:
        for proc, _ in sentinels:
            proc.terminate()
        for proc, _ in sentinels:
            proc.wait(10)
