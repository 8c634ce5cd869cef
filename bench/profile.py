"""Profile a fresh topicsrv under one benchmark workload with py-spy (a sampling profiler).

    .venv/bin/pip install py-spy          # not a project dependency: install it ad hoc
    .venv/bin/python -m bench.profile xadd-p16 [--seconds 10] [--top 40] [--svg out.svg]
    .venv/bin/python -m bench.profile xadd-p16 --replica      # the primary, one replica following

Rule 1: the server is started fresh (bench.procs) and stopped by pid; py-spy attaches to its
pid for `--seconds` while the workload runs in this process (redis-benchmark / HTTP client).
Rule 2: the report is py-spy's collapsed stacks folded into self time and inclusive time per
function, so it prints as plain text; `--svg` also writes py-spy's flame graph.
Rule 3: `--replica` starts a second fresh topicsrv with `--replicaof` the profiled one and
waits until it is level (bench/replbench.py `wait_level`) before the workload; the profile
is still the primary's (`--profile-replica`: the replica's instead).
"""

from __future__ import annotations

import argparse
import collections
import shutil
import subprocess
import sys
import tempfile
import threading
from functools import partial
from pathlib import Path

from bench import collbench, httpbench, queuebench, replbench, respbench, zsetbench
from bench.procs import Proc, Procs


def _coll(proc: Proc, name: str, pipeline: int) -> object:
    return collbench.throughput(proc.resp_port or 0, name, 10**7, pipeline, collbench.KEYS)


def _zset(proc: Proc, name: str, pipeline: int) -> object:
    return zsetbench.throughput(proc.resp_port or 0, name, 10**7, pipeline, collbench.KEYS)


WORKLOADS = {
    "ping-p1": lambda p: respbench.redis_benchmark(p.resp_port, ["PING"], requests=10**8,
                                                   pipeline=1),
    "xadd-p1": lambda p: respbench.redis_benchmark(p.resp_port, ["XADD", "s", "*", "f", "v"],
                                                   requests=10**7, pipeline=1),
    "xadd-p16": lambda p: respbench.redis_benchmark(p.resp_port, ["XADD", "s", "*", "f", "v"],
                                                    requests=10**8, pipeline=16),
    "fsync-p1": lambda p: respbench.redis_benchmark(p.resp_port, ["XADD", "f", "*", "f", "v"],
                                                    requests=10**7, pipeline=1),
    "fsync-p16": lambda p: respbench.redis_benchmark(p.resp_port, ["XADD", "f", "*", "f", "v"],
                                                     requests=10**8, pipeline=16),
    "set-p16": lambda p: respbench.redis_benchmark(
        p.resp_port, ["SET", "key:__rand_int__", "v" * 100], requests=10**8, pipeline=16,
        extra=("-r", "100000")),
    "xrange-p16": lambda p: respbench.redis_benchmark(
        p.resp_port, ["XRANGE", "r", "-", "+", "COUNT", "100"], requests=10**7, pipeline=16),
    "xread-p16": lambda p: respbench.redis_benchmark(
        p.resp_port, ["XREAD", "COUNT", "100", "STREAMS", "r", "0"], requests=10**7, pipeline=16),
    # lists and hashes (issue 35, bench/collbench.py); rpop and hget on its preloaded keys
    **{f"{name.lower()}-p{p}": partial(_coll, name=name, pipeline=p)
       for name in collbench.ROWS for p in (1, 16)},
    # sets and sorted sets (issue 36, bench/zsetbench.py), on its preloaded keys
    **{f"{name.lower()}-p{p}": partial(_zset, name=name, pipeline=p)
       for name in zsetbench.ROWS for p in (1, 16)},
    "brpop": lambda p: collbench.brpop(p.resp_port, 10**7),
    "py-xadd": lambda p: respbench.py_xadd_pipelined(p.resp_port, "py", 10**7),
    "group": lambda p: respbench.py_group_loop(p.resp_port, "r", 100_000),
    "http-write": lambda p: httpbench.write_batches(p.http_port, "hw", 10**8),
    "claim1": lambda p: queuebench.drain(p.resp_port, "q", QUEUE_JOBS, 1, queue=True),
    "claim100": lambda p: queuebench.drain(p.resp_port, "q", QUEUE_JOBS, 100, queue=True),
}
QUEUE_JOBS = 300_000  # jobs pre-filled for the claim workloads (8 worker processes drain them)


def fold(raw: str, top: int) -> str:
    self_t: collections.Counter[str] = collections.Counter()
    incl: collections.Counter[str] = collections.Counter()
    total = 0
    for line in raw.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        total += n
        frames = stack.split(";")
        self_t[frames[-1]] += n
        for f in set(frames):
            incl[f] += n
    out = [f"{total} samples", "-- self time"]
    out += [f"{100 * n / total:5.1f}%  {f}" for f, n in self_t.most_common(top)]
    out.append("-- inclusive time")
    out += [f"{100 * n / total:5.1f}%  {f}" for f, n in incl.most_common(top)]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.profile", description=__doc__.splitlines()[0])
    parser.add_argument("workload", choices=sorted(WORKLOADS))
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--native", action="store_true",
                        help="also sample C frames (the compiled hot path, CPython, libc)")
    parser.add_argument("--svg", type=Path, help="also write a flame graph here")
    parser.add_argument("--replica", action="store_true",
                        help="one replica follows the server (Rule 3); the primary is profiled")
    parser.add_argument("--profile-replica", action="store_true",
                        help="with --replica: profile the replica instead")
    args = parser.parse_args(argv)
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not Path(spy).exists():
        print("py-spy is not installed: .venv/bin/pip install py-spy", file=sys.stderr)
        return 2
    procs = Procs()
    try:
        top: Proc = procs.start_topicsrv()
        sampled = top
        if args.replica or args.profile_replica:
            replica = procs.start_topicsrv(extra=("--replicaof", f"127.0.0.1:{top.resp_port}"))
            replbench.wait_level(top.resp_port or 0, replica.resp_port or 0)
            sampled = replica if args.profile_replica else top
        if args.workload in ("xrange-p16", "xread-p16", "group"):
            respbench.load_stream(top.resp_port or 0, "r", 100_000)
        if args.workload.startswith("fsync"):  # a `DURABILITY fsync` topic (ack once on disk)
            respbench.client(top.resp_port or 0).execute_command(
                "TOPIC.CREATE", "f", "DURABILITY", "fsync")
        if args.workload.startswith(("rpop", "hget", "lpush", "hset")):
            collbench.load(top.resp_port or 0, collbench.KEYS)
        if args.workload.startswith(("sadd", "sismember", "zadd", "zrangebyscore", "zpopmin")):
            zsetbench.load(top.resp_port or 0, collbench.KEYS)
        if args.workload.startswith("claim"):
            queuebench.prefill(top.resp_port or 0, "q", QUEUE_JOBS, queue=True)
        worker = threading.Thread(target=lambda: _quiet(WORKLOADS[args.workload], top), daemon=True)
        worker.start()
        with tempfile.TemporaryDirectory() as tmp:
            raw = Path(tmp) / "raw.txt"
            subprocess.run([spy, "record", "--pid", str(sampled.pid), "--duration", str(args.seconds),
                            "--format", "raw", "--output", str(raw),
                            *(["--native"] if args.native else ["--nonblocking"])],
                           check=True, capture_output=True)
            print(fold(raw.read_text(), args.top))
            if args.svg:
                subprocess.run([spy, "record", "--pid", str(sampled.pid), "--duration",
                                str(args.seconds), "--output", str(args.svg), "--nonblocking"],
                               check=True, capture_output=True)
    finally:
        procs.stop_all()
    return 0


def _quiet(fn: object, proc: Proc) -> None:
    try:
        fn(proc)  # type: ignore[operator]
    except Exception:  # noqa: BLE001, S110 - the server is stopped under the workload
        pass


if __name__ == "__main__":
    sys.exit(main())
