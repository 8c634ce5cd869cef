"""Lease-queue workloads: TOPIC.CLAIM + TOPIC.ACK on topicsrv vs XREADGROUP + XACK on redis.

Rule 1 (same work on both servers): both are pre-filled with the same N jobs (100-byte
entries, pipelined XADD, exactly N), then `workers` processes, each with its own redis-py client
(its default protocol, RESP3 since redis-py 8),
drain them: topicsrv `TOPIC.CLAIM q wI MAX k` + one `TOPIC.ACK q wI seq...` of what it got
(a job is `[id, fields, seq, lease_id, deadline, delivery]`, docs/resp.md);
redis-server `XREADGROUP GROUP g wI COUNT k STREAMS s >` + one `XACK s g id...` of what it
got. A worker stops at its first empty claim / read. Processes, not threads, so the clients
are not serialised by one GIL and the server is what is measured.
Rule 2: the clock runs from the moment every worker is connected and released together to
the last worker's report; the run is checked afterwards (every job delivered and acked
once in total, nothing left pending) and raises otherwise, so a fast but wrong run never
shows as a number.
Rule 3 (same durability work): a row compares servers doing the same durability work. In
memory: a queue of class `ephemeral` (nothing written to the WAL) against
redis-server with persistence off (`--save "" --appendonly no`, bench/procs.py); logged: the
default `disk` queue (every claim and ack a WAL frame, synced by group commit within ~2 ms)
against redis-server `appendonly yes` + `appendfsync everysec` (every command appended to
the AOF, fsynced once a second). The in-memory rows carry the targets of issue 12. Both
pairings are the one table PAIRINGS, for `make bench` and for `main` here.
"""

from __future__ import annotations

import multiprocessing as mp
import queue as std_queue
import threading
import time
from dataclasses import dataclass
from typing import Any

import redis

from bench.respbench import VALUE, Measure, client
from bench.sizes import SIZES

GROUP = "g"


@dataclass(frozen=True, slots=True)
class Pairing:
    """Rule 3: one way of running a row with the same durability work on both servers."""

    label: str  # in the row's name
    redis_options: tuple[str, ...]  # more redis-server options (bench/procs.py start_redis)
    queue_options: tuple[str, ...]  # the queue's TOPIC.CREATE options
    note: str  # what the ratio compares
    targeted: bool  # the row carries issue 12's target


PAIRINGS: dict[str, Pairing] = {
    "memory": Pairing("in memory", (), ("DURABILITY", "ephemeral"),
                      "topicsrv DURABILITY ephemeral vs redis-server without persistence", True),
    "logged": Pairing("logged", ("--appendonly", "yes", "--appendfsync", "everysec"), (),
                      "topicsrv default (disk class, WAL) vs redis-server appendonly yes, "
                      "appendfsync everysec", False),
}


def prefill(port: int, key: str, jobs: int, *, queue: bool, options: tuple[str, ...] = ()) -> None:
    """`jobs` entries in `key`: a queue topic (topicsrv; `options` are TOPIC.CREATE's, e.g.
    ("DURABILITY", "memory")) or a stream with group g (redis)."""
    r = client(port)
    if queue:
        r.execute_command("TOPIC.CREATE", key, "TYPE", "queue", *options)
    pipe = r.pipeline(transaction=False)
    for i in range(jobs):
        pipe.xadd(key, {b"f": VALUE})
        if i % 1000 == 999 or i == jobs - 1:
            pipe.execute()
    if not queue:
        r.xgroup_create(key, GROUP, id="0")
    if r.xlen(key) != jobs:
        raise RuntimeError(f"{key} holds {r.xlen(key)} entries, not {jobs}")
    r.close()


def _map(reply: Any) -> Any:
    """A RESP3 map as redis-py gives it (a dict), also when the client speaks RESP2 (flat)."""
    return reply if isinstance(reply, dict) else dict(zip(reply[::2], reply[1::2], strict=True))


def _seqs(jobs: list[Any]) -> list[Any]:
    """The seqs of claimed jobs (an older server's RESP3 map jobs too, for A/B runs)."""
    return [j[2] for j in jobs] if type(jobs[0]) is list else [j[b"seq"] for j in jobs]


def _drain(port: int, key: str, node: str, count: int, queue: bool,
           ready: Any, go: Any, out: Any) -> None:
    """One worker (Rule 1): claim/read `count`, ack them all, until nothing comes back."""
    r = redis.Redis(host="127.0.0.1", port=port, socket_timeout=120)
    r.ping()
    ready.release()
    go.wait()
    done = calls = 0
    try:
        if queue:
            claim = ("TOPIC.CLAIM", key, node, "MAX", str(count))
            while True:
                jobs = r.execute_command(*claim)
                calls += 1
                if not jobs:
                    break
                acked = _map(r.execute_command("TOPIC.ACK", key, node,
                                               *_seqs(jobs)))[b"acked"]
                if len(acked) != len(jobs):
                    raise RuntimeError(f"TOPIC.ACK acked {len(acked)} of {len(jobs)}")
                done += len(jobs)
        else:
            while True:
                got: Any = r.xreadgroup(GROUP, node, {key: ">"}, count=count)
                calls += 1
                if not got or not got[0][1]:
                    break
                ids = [entry_id for entry_id, _ in got[0][1]]
                if r.xack(key, GROUP, *ids) != len(ids):
                    raise RuntimeError("XACK acknowledged fewer entries than delivered")
                done += len(ids)
        out.put((done, calls, time.monotonic(), None))
    except Exception as exc:  # noqa: BLE001 - reported to the parent, which raises
        out.put((done, calls, time.monotonic(), f"{type(exc).__name__}: {exc}"))
    finally:
        r.close()


def drain(port: int, key: str, jobs: int, count: int, *, queue: bool, workers: int = 8,
          threads: bool = False) -> Measure:
    """Run `workers` draining processes (threads of this process with `threads`) against a
    pre-filled key; jobs/s and round trips/s."""
    ctx: Any = threading if threads else mp.get_context("fork")
    ready, go = ctx.Semaphore(0), ctx.Event()
    out: Any = std_queue.Queue() if threads else ctx.Queue()
    kind = ctx.Thread if threads else ctx.Process
    procs = [kind(target=_drain, args=(port, key, f"w{i}", count, queue, ready, go, out), daemon=True)
             for i in range(workers)]
    for p in procs:
        p.start()
    try:
        for _ in procs:
            if not ready.acquire(timeout=60):
                raise RuntimeError("a worker did not connect")
        t0 = time.monotonic()
        go.set()
        results = [out.get(timeout=600) for _ in procs]
    finally:
        go.set()
        for p in procs:
            p.join(10)
            if not threads and p.is_alive():
                p.kill()
                p.join()
    errors = [e for *_, e in results if e]
    if errors:
        raise RuntimeError(errors[0])
    elapsed = max(t for _, _, t, _ in results) - t0
    done = sum(d for d, *_ in results)
    calls = sum(c for _, c, _, _ in results)
    _check(port, key, jobs, done, queue)
    return Measure(2 * calls / elapsed, done / elapsed, elapsed, 2 * calls)


def _check(port: int, key: str, jobs: int, done: int, queue: bool) -> None:
    """Rule 2: every job delivered and acked exactly once in total, nothing left pending."""
    if done != jobs:
        raise RuntimeError(f"{done} jobs acked in total, expected {jobs}")
    r = client(port)
    if queue:
        stats = _map(_map(r.execute_command("TOPIC.INFO", key))[b"queue"])
        left = (r.xlen(key), stats[b"in_flight"], stats[b"ready"])
    else:
        left = (0, r.xpending(key, GROUP)["pending"], 0)
    r.close()
    if left != (0, 0, 0):
        raise RuntimeError(f"{key}: entries/in-flight/ready left after the run: {left}")


def workload(port: int, key: str, jobs: int, count: int, *, queue: bool, workers: int = 8,
             threads: bool = False, options: tuple[str, ...] = ()) -> Measure:
    """`options`: the queue's TOPIC.CREATE options (topicsrv only), e.g. a Pairing's."""
    prefill(port, key, jobs, queue=queue, options=options if queue else ())
    return drain(port, key, jobs, count, queue=queue, workers=workers, threads=threads)


def main(argv: list[str] | None = None) -> int:
    """`python -m bench.queuebench [--rounds 3] [--sizes quick] [--kinds memory,logged]
    [--against DIR]`: only the queue rows of `make bench`, `rounds` times (a fresh topicsrv
    per round and row, one redis-server per kind: Rule 3), then the median ratio of each row.
    `--against DIR` also runs the topicsrv package found in DIR (e.g. a `git archive` of an
    older commit) in every round, alternating (which tree runs first alternates too: a second
    topicsrv in a round measured slower), for A/B."""
    import argparse
    import statistics
    from pathlib import Path

    from bench import procs as procs_mod

    parser = argparse.ArgumentParser(prog="python -m bench.queuebench")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sizes", choices=sorted(SIZES), default="quick")
    parser.add_argument("--rows", default="1,100", help="claim sizes to run, e.g. 100")
    parser.add_argument("--kinds", default=",".join(PAIRINGS), help="pairings to run (Rule 3)")
    parser.add_argument("--against", type=Path, help="a second source tree to A/B against")
    args = parser.parse_args(argv)
    trees = {"this": procs_mod.ROOT}
    if args.against:
        trees = {"base": args.against.resolve(), **trees}
    counts = [int(c) for c in args.rows.split(",")]
    kinds = [k for k in args.kinds.split(",") if k]
    if unknown := set(kinds) - set(PAIRINGS):
        parser.error(f"unknown pairings {sorted(unknown)}; known: {', '.join(PAIRINGS)}")
    ratios: dict[tuple[str, str, int], list[float]] = {
        (t, k, c): [] for t in trees for k in kinds for c in counts}
    procs = procs_mod.Procs()
    procs_mod.install_signal_handlers()
    try:
        reds = {kind: procs.start_redis(extra=PAIRINGS[kind].redis_options) for kind in kinds}
        for rnd in range(args.rounds):
            for count in counts:
                for kind in kinds:
                    red, opts = reds[kind], PAIRINGS[kind].queue_options
                    n = SIZES[args.sizes][f"queue_{count}"]
                    key = f"jobs{count}{kind}r{rnd}"
                    ref = workload(red.resp_port or 0, key, n, count, queue=False)
                    order = list(trees.items())  # each tree goes first in every other round: the
                    for tree, root in order[::-1] if rnd % 2 else order:  # second run was slower
                        procs_mod.ROOT = root  # start_topicsrv runs `python -m topicsrv` from ROOT
                        top = procs.start_topicsrv()
                        try:
                            got = workload(top.resp_port or 0, key, n, count, queue=True, options=opts)
                        finally:
                            procs.stop(top)
                        ratio = got.records_per_s / ref.records_per_s
                        ratios[(tree, kind, count)].append(ratio)
                        print(f"round {rnd + 1} MAX {count} {kind} {tree}: redis {ref.records_per_s:,.0f} "
                              f"topicsrv {got.records_per_s:,.0f} jobs/s ratio {ratio:.2f}", flush=True)
    finally:
        procs.stop_all()
    for (tree, kind, count), rs in ratios.items():
        print(f"MAX {count} {kind} {tree}: median ratio {statistics.median(rs):.2f} "
              f"({', '.join(f'{r:.2f}' for r in rs)})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
