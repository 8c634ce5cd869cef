"""`make bench` still works: the harness runs end to end in its tiny mode.

Runs `python -m bench --tiny` (a few hundred ops per workload, real redis-server and topicsrv
processes on free ports) and checks what a user of `make bench` sees: the table, a JSON
results file with every workload row, numbers in the rows that must have them, and no
server process left behind. No timing assertions: benchmarks are not timed tests.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from bench import zsetbench

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(shutil.which("redis-server") is None or shutil.which("redis-benchmark") is None,
                    reason="redis-server/redis-benchmark not installed (scripts/ensure-tools.sh)")
def test_bench_tiny_runs_and_reports(tmp_path: Path) -> None:
    out = tmp_path / "latest.json"
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench", "--tiny", "--quiet", "--out", str(out)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    try:
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    text = stdout.decode()
    assert proc.returncode == 0, stderr.decode()[-2000:]
    assert "topicsrv vs redis-server (tiny mode)" in text
    for label in ("XADD s * f v, P1", "XRANGE r - + COUNT 100, P16", "POST batches of 1000",
                  "RSS growth per record", "tag index Eq lookup"):
        assert label in text, label

    doc = orjson.loads(out.read_bytes())
    assert doc["mode"] == "tiny"
    assert doc["machine"]["nproc"] >= 1
    rows = {r["workload"]: r for r in doc["rows"]}
    # Redis-side and in-process cells never depend on topicsrv's progress: they must be numbers.
    assert isinstance(rows["XADD s * f v, P1"]["redis"], float)
    assert isinstance(rows["XADD s * f v, P16"]["redis"], float)
    assert isinstance(rows["tag index Eq lookup"]["topicsrv"], float)
    assert isinstance(rows["tag index Glob lookup, 100 tags"]["topicsrv"], float)
    # The HTTP front works: its workloads produced numbers and a ratio.
    assert isinstance(rows["POST batches of 1000 x 100 B"]["topicsrv"], float)
    assert rows["POST batches of 1000 x 100 B"]["ratio"] > 0
    assert isinstance(rows["SSE delivery to 10 watchers"]["topicsrv"], float)
    # The lease-queue rows ran on both servers (every job claimed/read and acked once).
    # Each in two pairings with the same durability work on both servers (queuebench Rule 3).
    for label in (f"{row}, {kind}" for kind in ("in memory", "logged") for row in (
            "CLAIM MAX 1 + ACK vs XREADGROUP COUNT 1 + XACK",
            "CLAIM MAX 100 + one ACK vs XREADGROUP COUNT 100 + XACK")):
        assert isinstance(rows[label]["redis"], float) and isinstance(rows[label]["topicsrv"], float), rows[label]
    # The router rows ran (every router forwarded every record; the writers' ratio exists).
    for label in ("source writes with 4 routers vs none (POST 1000 x 100 B)",
                  "forwarding, fan-out 1 (source rec/s per router)",
                  "forwarding, fan-out 4 (source rec/s per router)"):
        assert isinstance(rows[label]["topicsrv"], float) and rows[label]["ratio"] > 0, rows[label]
    # The string rows (issue 25) ran on both servers: GET/SET at P1 and P16, the PING row
    # whose ratio is their P1 target, and memory per string key.
    for p in (1, 16):
        for label in (f"SET key:__rand_int__ <100 B>, P{p}", f"GET key:__rand_int__, P{p}"):
            assert isinstance(rows[label]["redis"], float), rows[label]
            assert isinstance(rows[label]["topicsrv"], float), rows[label]
    assert rows["GET key:__rand_int__, P1"]["target"] == rows["PING, P1"]["ratio"]
    assert rows["SET key:__rand_int__ <100 B>, P1"]["target"] == 0.85  # issue 38
    # The scripting rows (issue 27): EVALSHA of the GET + INCR script ran on both servers
    # (scriptbench checks the counters sum to the EVALSHAs sent, else the cells are errors).
    for p in (1, 16):
        label = f"EVALSHA <GET + INCR> 1 n:__rand_int__, P{p}"
        assert isinstance(rows[label]["redis"], float), rows[label]
        assert isinstance(rows[label]["topicsrv"], float), rows[label]
        assert rows[label]["target"] == (0.5 if p == 1 else 0.3)  # issue 38
    assert rows["RSS growth per key"]["target"] == 2.0
    assert isinstance(rows["RSS growth per key"]["topicsrv"], float), rows["RSS growth per key"]
    # The pub/sub rows (issue 26) ran on both servers; pubbench raises (an error cell) unless
    # every subscriber counted every message, so a number here means all were delivered.
    for label, target in (("PUBLISH to 1 subscriber, P1", 0.9), ("PUBLISH to 1 subscriber, P16", 0.4),
                          ("PUBLISH to 50 subscribers, P1", 0.6),
                          ("PUBLISH to 50 subscribers, P16", 0.3)):
        assert isinstance(rows[label]["redis"], float), rows[label]
        assert isinstance(rows[label]["topicsrv"], float), rows[label]
        assert rows[label]["target"] == target  # issue 38
    # The blocked-clients rows (issue 40) ran on both servers.
    for label in ("memory per blocked client (50 XREADGROUP BLOCK)",
                  "PING p50 during 20 XADDs, 50 group readers blocked",
                  "XREAD BLOCK fan-out to 50 readers: longest PING"):
        assert isinstance(rows[label]["redis"], float), rows[label]
        assert isinstance(rows[label]["topicsrv"], float), rows[label]
    assert isinstance(rows["server CPU per XADD, 40 group readers blocked vs none"]["topicsrv"], float)
    # The list and hash rows (issue 35) ran on both servers.
    for label in ("LPUSH list:__rand_int__ <100 B>, P1", "HGET hash:__rand_int__ f, P16",
                  "another client's worst PING during the save"):
        assert isinstance(rows[label]["redis"], float), rows[label]
        assert isinstance(rows[label]["topicsrv"], float), rows[label]
    # The set and sorted-set rows (issue 36) ran on both servers: every throughput row at P1
    # and P16, memory per member, and RQ's burst (zsetbench checks every job finished with
    # its result, else the cells are errors).
    for name, command in zsetbench.ROWS.items():
        for p in (1, 16):
            label = f"{' '.join(command)}, P{p}"
            assert isinstance(rows[label]["redis"], float), (name, rows[label])
            assert isinstance(rows[label]["topicsrv"], float), (name, rows[label])
            assert rows[label]["target"] == (0.8 if p == 1 else 0.5)
    for label in ("one sorted set of 2,000 x 10 B members (per member)",
                  "200 sets x 10 members of 10 B (per member)",
                  "200 sets x 10 integers (intsets, per member)",
                  "SimpleWorker burst, in-process (no target)"):
        assert isinstance(rows[label]["redis"], float), rows[label]
        assert isinstance(rows[label]["topicsrv"], float), rows[label]
    # The replication rows (issue 37) ran on both servers: XADD and SET P16 on one node and on
    # a primary with one replica (whose target is the single-node ratio), and lag samples
    # were taken during the replicated XADD load (bench/replbench.py).
    for label in ("XADD s * f v, P16", "SET key:__rand_int__ <100 B>, P16"):
        single, repl = rows[f"{label}, single node"], rows[f"{label}, primary + 1 replica"]
        for row in (single, repl):
            assert isinstance(row["redis"], float) and isinstance(row["topicsrv"], float), row
        assert repl["target"] == single["ratio"]
    for label in ("bytes behind (primary offset - replica offset), max",
                  "ms behind (marker key, primary OK -> replica GET), max"):
        assert isinstance(rows[label]["redis"], float), rows[label]
        assert isinstance(rows[label]["topicsrv"], float), rows[label]
    # Every server the harness started (four pairs, one topicsrv for routers, one redis-server
    # with an AOF for the logged queue rows, the lists-and-hashes phase's five fresh pairs:
    # bench/collphase.py, the sets phase's five: bench/zsetphase.py, and the replication
    # phase's single pair and two primary + replica pairs: bench/replbench.py) was stopped by
    # pid and is gone.
    started = doc["processes"]
    names = sorted(name for name, _ in started)
    assert names == ["redis-server"] * 18 + ["topicsrv"] * 18
    for _, pid in started:
        assert not Path(f"/proc/{pid}").exists() or _is_zombie_of_other(pid), pid


def _is_zombie_of_other(pid: int) -> bool:
    """A pid may have been reused by an unrelated process; ours would never be reused as topicsrv."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return True
    return b"redis-server" not in cmdline and b"topicsrv" not in cmdline


@pytest.mark.parametrize("mode", ["bare", "sandbox"])
def test_script_floor_server_answers_as_redis_would(mode: str) -> None:
    """bench/scriptfloor.py's floor servers (Rule 1) must run the bench's script right, or
    their speed means nothing: the SHA1 is Redis's, the counter counts, an unknown command or a
    failing script is an error reply and the server goes on (Rule 3)."""
    import hashlib

    import redis

    from bench import scriptbench, scriptfloor
    from bench.procs import Procs

    procs = Procs()
    try:
        proc = scriptfloor.start_floor(procs, mode)
        assert proc.resp_port is not None
        sha = scriptbench.load(proc.resp_port)
        assert sha == hashlib.sha1(scriptbench.SCRIPT.encode()).hexdigest()
        r = redis.Redis(host="127.0.0.1", port=proc.resp_port, protocol=2)
        assert [r.evalsha(sha, 1, "n:1") for _ in range(3)] == [1, 2, 3]
        assert r.evalsha(sha, 1, "n:2") == 1
        assert scriptfloor.floor_sum(proc.resp_port) == 4
        with pytest.raises(redis.ResponseError, match="unknown command"):
            r.execute_command("LPUSH", "q", "x")
        with pytest.raises(redis.ResponseError):
            r.evalsha("0" * 40, 0)
        assert r.ping() is True
        r.close()
    finally:
        procs.stop_all()
    assert not proc.alive()


@pytest.mark.parametrize("mode", ["bare", "packed", "synced", "bare-synced"])
def test_write_floor_server_answers_as_redis_would(mode: str, redis_server: Any) -> None:
    """bench/writefloor.py's floor servers (writefloor_server.py, run interpreted here) must
    answer the rows' commands as redis-server does, or their speed means nothing: the same
    preload, then the bench's own CHECK sequence (its Rule 3) byte for byte against a real
    redis-server, WRONGTYPE included; the journal holds the writes; an unknown command is an
    error reply and the server goes on; a synced floor has its sync child (Rule 2b)."""
    import redis

    from bench import writefloor
    from bench.procs import Procs, children, state

    ref = redis.Redis(host="127.0.0.1", port=redis_server.port)
    ref.flushall()
    writefloor.load(redis_server.port, 20)
    procs = Procs()
    try:
        proc = writefloor.start_floor(procs, mode, None)
        assert proc.resp_port is not None
        writefloor.load(proc.resp_port, 20)
        reference = writefloor.replies(redis_server.port, writefloor.CHECK)
        assert any(b"WRONGTYPE" in r for r in reference)
        writefloor.check(proc.resp_port, reference)
        r = redis.Redis(host="127.0.0.1", port=proc.resp_port, protocol=2)
        with pytest.raises(redis.ResponseError, match="unknown command"):
            r.execute_command("LINDEX", "l", "0")
        assert r.ping() is True
        r.close()
        journal = (proc.workdir / "journal.aof").read_bytes()
        assert b"$5\r\nLPUSH\r\n$1\r\nl\r\n$1\r\nc\r\n" in journal
        assert b"HGET" not in journal  # reads are not journaled
        syncers = children(proc.pid)  # Rule 2b: a synced floor's sync child, alive
        assert [state(k) != "Z" for k in syncers] == ([True] if mode.endswith("synced") else [])
        writefloor.check_synced([(f"floor {mode}", proc)])
    finally:
        procs.stop_all()
        ref.close()
    assert not proc.alive()
    for pid in syncers:  # the child leaves with its server (reparented, then gone)
        deadline = time.monotonic() + 5
        while state(pid) not in ("Z", "") and time.monotonic() < deadline:
            time.sleep(0.01)
        assert state(pid) in ("Z", ""), f"the sync child {pid} outlived its floor"
