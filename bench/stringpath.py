"""In-process cost of GET/SET on random keys with real storage: the RESP session, the keyspace
and the WAL, without the network or the reactor (issue 25's third pass, docs/performance.md).

    .venv/bin/python -m bench.stringpath [--class disk|memory|fsync] [--rounds 7] [--step]
                                         [ping get set get16 set16 gethot getmiss ...]

Rule 1: one interpreter, the installed build (TOPICS_PURE=1 for the pure one); a real
`Storage` of the chosen keyspace class on a temporary directory (removed at the end), its
writer and I/O thread running under trio, `--max-memory` at its default (`auto`), 100,000
keys of 100 bytes loaded first, as in bench/stringbench.py.
Rule 2: each workload drives bench/hotpath.py's 50 `Session`s in turn (`driver`:
`receive_data`, `step` until NEED_DATA, the reply through a socketpair) and gives trio a turn
every 25 commands, roughly a reactor pass at P1; the keys are drawn at random, so the
keyspace's cache misses are in the figure.
Rule 3: a figure is the best of `--rounds` runs of 20,000 commands: `loop` is the CPU time of
the loop thread per command, `process` adds the WAL's I/O thread.
Rule 4: `--step` reports instead the wall time of the session's own work per command
(`receive_data`, `step` until NEED_DATA, `data_to_send`; no socket, no trio turn; `disk` and
`memory` only: an `fsync` reply waits for a commit only the loop can release): the
figure the fourth pass's list in docs/performance.md gives. `gethot` GETs 100 keys only (no
cache miss: the difference to `get` is the cost of a random key's misses), `getmiss` keys
that do not exist.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import trio

from bench.hotpath import SESSIONS, driver, frame

KEYS = 100_000
PASS = 25  # commands between two trio turns (Rule 2)
VALUE = b"v" * 100


def _key(rnd: random.Random) -> bytes:
    return b"key:%012d" % rnd.randrange(KEYS)


def workloads(rnd: random.Random) -> dict[str, tuple[Callable[[], bytes], int]]:
    """name -> (one read's bytes, commands in it)."""
    return {
        "ping": (lambda: frame(b"PING"), 1),
        "get": (lambda: frame(b"GET", _key(rnd)), 1),
        "set": (lambda: frame(b"SET", _key(rnd), VALUE), 1),
        "get16": (lambda: b"".join(frame(b"GET", _key(rnd)) for _ in range(16)), 16),
        "set16": (lambda: b"".join(frame(b"SET", _key(rnd), VALUE) for _ in range(16)), 16),
        "gethot": (lambda: frame(b"GET", b"key:%012d" % rnd.randrange(100)), 1),
        "getmiss": (lambda: frame(b"GET", b"nokey:%012d" % rnd.randrange(KEYS)), 1),
        **{f"{name}{'16' if n == 16 else ''}": (lambda argv=argv, n=n: b"".join(
            _fill(argv, rnd) for _ in range(n)), n)
           for name, argv in COLLS.items() for n in (1, 16)},
    }


# the list and hash rows of bench/collbench.py (issue 35) and the set and sorted-set writes of
# bench/zsetbench.py (issue 36), their keys loaded as there when one of them runs
COLLS: dict[str, list[bytes]] = {
    "lpush": [b"LPUSH", b"list:%012d", VALUE], "rpop": [b"RPOP", b"list:%012d"],
    "hset": [b"HSET", b"hash:%012d", b"f", VALUE], "hget": [b"HGET", b"hash:%012d", b"f"],
    "sadd": [b"SADD", b"set:%012d", b"m:%012d"],
    "zadd": [b"ZADD", b"zset:%012d", b"%d", b"m:%012d"],
    "zpopmin": [b"ZPOPMIN", b"zset:%012d"],
}
ZSETS = ("sadd", "zadd", "zpopmin")


def _fill(argv: list[bytes], rnd: random.Random) -> bytes:
    """One command of COLLS's `argv`: each `%d` argument a random key number."""
    return frame(argv[0], *[a % rnd.randrange(KEYS) if b"%" in a else a for a in argv[1:]])


async def _step_round(sessions: list[Any], reads: list[bytes]) -> float:
    """Rule 4: µs of the sessions' own work per read, over one round of `reads`."""
    from topicsrv.resp.session import NEED_DATA

    total = 0
    for i, data in enumerate(reads):
        s = sessions[i % SESSIONS]
        t0 = time.perf_counter_ns()
        s.receive_data(data)
        while s.step() is not NEED_DATA:
            pass
        s.data_to_send()
        total += time.perf_counter_ns() - t0
        if i % PASS == 0:
            await trio.lowlevel.checkpoint()
    await trio.sleep(0.003)
    return total / len(reads) / 1000


async def _run(kclass: str, names: list[str], rounds: int, step: bool, data_dir: Path) -> None:
    from topicsrv.context import ServerConfig, make_context
    from topicsrv.memory import auto_limit
    from topicsrv.storage.store import Storage

    cfg = ServerConfig(data_dir=data_dir,
                       http_port=None, resp_port=None, max_memory=auto_limit(),
                       keyspace_durability=kclass)
    ctx = make_context(cfg)
    st = ctx.storage = Storage(ctx.engine, cfg.data_dir, shards=cfg.wal_shards,
                               cold_dir=cfg.cold_dir, checkpoint_interval_s=3600,
                               keyspace_class=kclass)
    st.refuse_until_recovered()
    sessions, serve = driver(ctx)  # bench/hotpath.py's sessions and socketpair

    async with trio.open_nursery() as nursery:
        await st.open()
        await nursery.start(st.run)
        await st.settled.wait()  # the startup checkpoint done: none runs while timed
        for i in range(0, KEYS, 1000):  # Rule 1
            serve(sessions[0], b"".join(frame(b"SET", b"key:%012d" % k, VALUE)
                                        for k in range(i, i + 1000)))
            await trio.lowlevel.checkpoint()
        if any(name.rstrip("16") in COLLS and name.rstrip("16") not in ZSETS for name in names):
            for i in range(0, KEYS, 100):  # bench/collbench.py's lists and hashes
                serve(sessions[0], b"".join(
                    frame(b"RPUSH", b"list:%012d" % k, *[VALUE] * 10) + frame(
                        b"HSET", b"hash:%012d" % k, b"f", VALUE,
                        *[x for j in range(1, 10) for x in (b"f%d" % j, b"v" * 10)])
                    for k in range(i, i + 100)))
                await trio.lowlevel.checkpoint()
        if any(name.rstrip("16") in ZSETS for name in names):
            zset = [x for j in range(16) for x in (b"%d" % j, b"z%09d" % j)]
            for i in range(0, KEYS, 100):  # bench/zsetbench.py's sets and sorted sets
                serve(sessions[0], b"".join(
                    frame(b"SADD", b"set:%012d" % k, b"m", *(b"m%09d" % j for j in range(1, 10)))
                    + frame(b"ZADD", b"zset:%012d" % k, *zset) for k in range(i, i + 100)))
                await trio.lowlevel.checkpoint()
        work = workloads(random.Random(1))
        for name in names:
            make, per = work[name]
            reads = [make() for _ in range(20_000 // per)]
            if step:
                best = min([await _step_round(sessions, reads) for _ in range(rounds)])
                print(f"{name:7s} {kclass:6s} step {best / per:6.2f} µs", flush=True)
                continue
            loop = proc = float("inf")
            for _ in range(rounds):
                t0, p0 = time.thread_time(), time.process_time()
                for i, data in enumerate(reads):
                    serve(sessions[i % SESSIONS], data)
                    if i % PASS == 0:
                        await trio.lowlevel.checkpoint()
                await trio.sleep(0.003)  # the last batch's sync, counted in `process`
                n = len(reads) * per
                loop = min(loop, (time.thread_time() - t0) / n * 1e6)
                proc = min(proc, (time.process_time() - p0) / n * 1e6)
            print(f"{name:7s} {kclass:6s} loop {loop:6.2f} µs  process {proc:6.2f} µs", flush=True)
        nursery.cancel_scope.cancel()
    await st.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--class", dest="kclass", default="disk", choices=["disk", "memory", "fsync"])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--step", action="store_true", help="time the session's own work (Rule 4)")
    ap.add_argument("workloads", nargs="*", default=["ping", "get", "set", "get16", "set16"])
    args = ap.parse_args(argv)
    if args.step and args.kclass == "fsync":
        # an fsync-class reply waits for its commit, which needs the loop: Rule 4 never yields
        ap.error("--step times the sessions alone; use it with --class disk or memory")
    unknown = set(args.workloads) - set(workloads(random.Random()))
    if unknown:
        ap.error(f"unknown workload(s): {', '.join(sorted(unknown))}")
    with tempfile.TemporaryDirectory(prefix="bench-stringpath-") as tmp:  # removed after
        trio.run(_run, args.kclass, args.workloads, args.rounds, args.step, Path(tmp))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
