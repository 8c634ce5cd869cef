"""Storage benchmark: fsync-class ack latency under group commit, and recovery throughput.

    python bench/storage_bench.py [--records 1000000] [--seconds 2] [--dir DIR]
    python bench/storage_bench.py --wal [--rounds 5] [--seconds 2]

Prints, for 1, 8 and 64 concurrent writers of single-record fsync writes: ack latency
p50/p99 (ms), writes/s and records per fdatasync; then the time to recover N records from
the WAL alone (a crash, no checkpoint) and from segment files (after a clean stop).
`--wal` instead varies the WAL shards (1, 2, 4, 8) under 64 writers, to one topic (`hot`)
and to 64 topics (`spread`, one per writer), in alternating rounds (issue 16; the same
question against a real server: bench/walbench.py).
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import trio
import trio.lowlevel

from topicsrv.engine import Engine
from topicsrv.engine.log.records import prepare_json
from topicsrv.storage import recovery
from topicsrv.storage.fsops import OsOps
from topicsrv.storage.store import Storage


def pct(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(len(s) * p))] if s else 0.0


class SlowSync(OsOps):
    """A slower disk: every fdatasync takes `delay_s` longer (a sleep, which like the real
    call releases the GIL; concurrent syncs overlap fully, so this models a device that
    serves parallel flushes at no extra cost: the best case for more shards)."""

    def __init__(self, delay_s: float) -> None:
        self.delay_s = delay_s

    def fdatasync(self, fd: int) -> None:
        super().fdatasync(fd)
        time.sleep(self.delay_s)


async def _open(path: Path, shards: int = 4, sync_delay_s: float = 0.0) -> tuple[Engine, Storage]:
    engine = Engine()
    ops = SlowSync(sync_delay_s) if sync_delay_s > 0 else None
    st = Storage(engine, path, shards=shards, checkpoint_interval_s=3600, ops=ops)
    st.refuse_until_recovered()
    await st.open()
    return engine, st


async def latency(path: Path, writers: int, seconds: float, shards: int = 4,
                  spread: bool = False, sync_delay_s: float = 0.0) -> dict[str, float]:
    """`spread`: writer i writes to its own topic `w:i` (else all write to `lat`);
    `sync_delay_s`: model a slower disk (SlowSync)."""
    engine, st = await _open(path, shards, sync_delay_s)
    lat: list[float] = []
    rec = prepare_json({"data": {"payload": "x" * 100}})
    names = [f"w:{i:012d}" if spread else "lat" for i in range(writers)]
    cpu0 = time.process_time()
    async with trio.open_nursery() as nursery:
        await nursery.start(st.run)
        await st.settled.wait()
        for name in set(names):
            engine.put_topic(name, {"durable": True})
        deadline = time.perf_counter() + seconds

        async def writer(name: str) -> None:
            while time.perf_counter() < deadline:
                t0 = time.perf_counter()
                _, token = engine.write(name, [rec])
                if token is not None:
                    await token.wait()
                lat.append((time.perf_counter() - t0) * 1000)

        async with trio.open_nursery() as inner:
            for name in names:
                inner.start_soon(writer, name)
        stats = st.stats()
        nursery.cancel_scope.cancel()
    cpu = (time.process_time() - cpu0) / seconds
    await st.close()
    return {"p50": pct(lat, 0.50), "p99": pct(lat, 0.99), "rate": len(lat) / seconds,
            "per_sync": stats["records_per_sync"], "cpu": cpu}


async def fill(path: Path, records: int, crash: bool) -> None:
    engine, st = await _open(path)
    batch = [prepare_json({"data": {"i": i, "payload": "y" * 80}, "tag": f"t{i % 100}"}) for i in range(1000)]
    async with trio.open_nursery() as nursery:
        await nursery.start(st.run)
        await st.settled.wait()
        engine.put_topic("big", {})
        for _ in range(records // len(batch)):
            engine.write("big", batch)
            await trio.lowlevel.checkpoint()
        _, _, token = engine.put_topic("big", {})  # same shard, fsync-gated: all before it is on disk
        if token is not None:
            await token.wait()
        nursery.cancel_scope.cancel()
    if crash:
        for sh in st.shards:
            sh.close()
    else:
        await st.close()


def recover_rate(path: Path) -> tuple[int, float]:
    t0 = time.perf_counter()
    rec = recovery.recover(path, None, 4, OsOps(), int(time.time() * 1000), repair=False)
    dt = time.perf_counter() - t0
    return sum(t.count for t in rec.topics), dt


def wal_shards(root: Path, rounds: int, seconds: float, shards: list[int],
               sync_delay_s: float = 0.0, ios: tuple[str, ...] = ("thread",)) -> None:
    """64 writers, WAL shards (and I/O paths: env TOPICS_WAL_IO) varied, alternating rounds;
    medians and per-round values."""
    configs = [(n, io) for n in shards for io in ios]  # A/B pairs run back to back
    res: dict[tuple[str, str, int], list[dict[str, float]]] = {}
    try:
        for rnd in range(rounds):
            for n, io in configs[rnd % len(configs):] + configs[:rnd % len(configs)]:
                os.environ["TOPICS_WAL_IO"] = io  # read by each Shard when it is made
                for wl in ("hot", "spread"):
                    d = root / f"wal-{rnd}-{n}-{io}-{wl}"
                    res.setdefault((wl, io, n), []).append(trio.run(
                        latency, d, 64, seconds, n, wl == "spread", sync_delay_s))
                    shutil.rmtree(d, ignore_errors=True)
    finally:
        os.environ.pop("TOPICS_WAL_IO", None)
    slow = f", fdatasync + {sync_delay_s * 1000:g} ms" if sync_delay_s else ""
    print(f"64 writers, fsync-class single-record writes{slow}, {rounds} rounds x {seconds:g} s "
          "(medians; cpu = process CPU s / wall s; per round: writes/s/p99 ms)")
    print(f"{'workload':<8} {'io':<9} {'shards':>6} {'p50 ms':>7} {'p99 ms':>7} {'writes/s':>9} "
          f"{'rec/sync':>8} {'cpu':>5}   per round")
    med = statistics.median
    for (wl, io, n), rs in sorted(res.items()):
        print(f"{wl:<8} {io:<9} {n:>6} {med(r['p50'] for r in rs):>7.3f} "
              f"{med(r['p99'] for r in rs):>7.3f} {med(r['rate'] for r in rs):>9.0f} "
              f"{med(r['per_sync'] for r in rs):>8.1f} {med(r['cpu'] for r in rs):>5.2f}   "
              + " ".join(f"{r['rate']:.0f}/{r['p99']:.2f}" for r in rs))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--dir", type=Path, default=None, help="where to write (default: a temp dir)")
    ap.add_argument("--wal", action="store_true", help="vary the WAL shards at 64 writers instead")
    ap.add_argument("--rounds", type=int, default=5, help="rounds of --wal (default 5)")
    ap.add_argument("--shards", default="1,2,4,8", help="shard counts of --wal (default 1,2,4,8)")
    ap.add_argument("--io", default="thread",
                    help="--wal: WAL I/O paths, comma-separated: thread (shipped), to_thread")
    ap.add_argument("--sync-delay-ms", type=float, default=0.0,
                    help="--wal: add this to every fdatasync (a slower disk; default 0)")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    root = Path(tempfile.mkdtemp(prefix="storage-bench-", dir=args.dir))
    try:
        if args.wal:
            wal_shards(root, args.rounds, args.seconds, [int(x) for x in args.shards.split(",")],
                       args.sync_delay_ms / 1000.0, tuple(args.io.split(",")))
            return
        print("fsync-class ack latency (single-record writes, group commit)")
        print(f"{'writers':>8} {'p50 ms':>9} {'p99 ms':>9} {'writes/s':>10} {'records/fdatasync':>18}")
        for n in (1, 8, 64):
            r = trio.run(latency, root / f"lat{n}", n, args.seconds)
            print(f"{n:>8} {r['p50']:>9.3f} {r['p99']:>9.3f} {r['rate']:>10.0f} {r['per_sync']:>18.1f}")
        print(f"\nrecovery of {args.records} records")
        for crash, label in ((True, "from the WAL (crash)"), (False, "from segments (clean stop)")):
            d = root / f"rec-{crash}"
            trio.run(fill, d, args.records, crash)
            n, dt = recover_rate(d)
            print(f"  {label:<28} {n:>9} records in {dt:6.2f}s = {n / dt:>10.0f} records/s")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
