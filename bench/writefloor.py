"""What bounds the list, hash, set and sorted-set rows (issues 35 and 36): the same rows on compiled
floor servers beside topicsrv and redis-server, one run, so that the gap between
topicsrv and its targets can be split into what any durable Python server pays and what
topicsrv's own path adds.

    .venv/bin/python -m bench.writefloor [--rounds 3] [--quick] [--floors LIST] [--interpreted]

Rule 1 (the floors are not topicsrv): bench/writefloor_server.py, its Rules 1-4: one epoll
loop, hiredis parsing, each write journaled as its RESP and the journal written once a loop
turn, and a keyspace of Python's containers (`bare`) or of topicsrv's own compact value classes
(`packed`); `synced` (`bare-synced`) is `packed` (`bare`) whose journal is also on disk within
about 2 ms, as topicsrv's default `--keyspace-durability disk` promises (a forked child syncs
it every 2 ms; the replies never wait for it), and a synced floor must still have that child
before and after the rounds, or the run stops (`check_synced`); no expiry, ACL, WATCH,
blocking, memory check, stats, notification or transaction. The floor is compiled with mypyc
before the run into a cache directory (bench/results/.writefloor-build, ~1 minute the first
time), as topicsrv's hot path is, so a floor is never slower for being interpreted;
`--interpreted` skips that (and says so).
Rule 2 (the rows): `make bench`'s rows of bench/collbench.py (LPUSH, RPOP, HSET, HGET) and
bench/zsetbench.py (SADD, SISMEMBER, ZADD, ZRANGEBYSCORE LIMIT 0 10, ZPOPMIN), their
commands and key ranges (`-c 50 -r KEYS`), at P1 and P16, and PING at P1; every server is
loaded first with both modules' keys. Each round runs every row on every server back to
back, the order reversed every other round; a figure is the median over rounds, each ratio
is to redis-server in the same round, and each server's CPU per request (user + system,
/proc around the row) is printed with its share of a core (bench/respbench.py Rule 4): a
server near 100% busy is bound by its own CPU, so its rate is 1 / its cost a request.
Rule 3 (the floors answer right): before the rounds, a fixed sequence of the rows' commands
(CHECK) is sent to every server, and each floor's replies must be redis-server's, byte for
byte (tests/integration/test_bench_smoke.py checks the same without compiling).
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench import collbench, floorrounds, zsetbench
from bench.collbench import VALUE, hash_fields, load_keys
from bench.hotpath import frame
from bench.procs import Proc, Procs, children, install_signal_handlers, state

ROOT = Path(__file__).resolve().parent.parent
SOURCE = Path(__file__).resolve().parent / "writefloor_server.py"
CACHE = ROOT / "bench" / "results" / ".writefloor-build"
MODES = ("bare", "packed", "synced", "bare-synced")
KEYS = collbench.KEYS
ROWS: dict[str, list[str]] = {**collbench.ROWS, **zsetbench.ROWS}
CHECK: list[list[bytes]] = [  # Rule 3
    [b"RPUSH", b"l", b"a", b"b"], [b"LPUSH", b"l", b"c"], [b"RPOP", b"l"], [b"RPOP", b"none"],
    [b"HSET", b"h", b"f", b"1", b"g", b"2"], [b"HSET", b"h", b"f", b"3"], [b"HGET", b"h", b"f"],
    [b"HGET", b"h", b"x"], [b"SADD", b"s", b"m", b"n", b"m"], [b"SISMEMBER", b"s", b"n"],
    [b"SISMEMBER", b"s", b"x"], [b"ZADD", b"z", b"2", b"b", b"1", b"a", b"1.5", b"c"],
    [b"ZADD", b"z", b"3", b"a"], [b"ZRANGEBYSCORE", b"z", b"-inf", b"+inf", b"LIMIT", b"0", b"2"],
    [b"ZPOPMIN", b"z"], [b"ZPOPMIN", b"none"], [b"LPUSH", b"h", b"x"], [b"SADD", b"l", b"x"],
    [b"DBSIZE"], [b"PING"],
]


def build(interpreted: bool) -> Path | None:
    """Rule 1: the directory holding the compiled floor (built once per source), None to run
    it interpreted."""
    if interpreted:
        return None
    digest = hashlib.sha256(SOURCE.read_bytes() + sys.version.encode()).hexdigest()[:16]
    out = CACHE / digest
    if any(out.glob("writefloor_server*.so")):
        return out
    print("compiling the floor server with mypyc (once per source, ~1 minute) ...", flush=True)
    with tempfile.TemporaryDirectory(prefix="writefloor-build-") as tmp:
        work = Path(tmp)
        shutil.copy(SOURCE, work / SOURCE.name)
        done = subprocess.run([sys.executable, "-m", "mypyc", "--follow-imports=skip",
                               "--ignore-missing-imports", SOURCE.name], cwd=work,
                              capture_output=True, text=True)
        built = list(work.glob("*.so"))
        if done.returncode != 0 or not any(p.name.startswith("writefloor_server") for p in built):
            raise RuntimeError(f"mypyc could not compile the floor (use --interpreted):\n"
                               f"{(done.stdout + done.stderr)[-2000:]}")
        out.mkdir(parents=True, exist_ok=True)
        for p in built:
            shutil.copy(p, out / p.name)
    return out


def check_synced(servers: list[tuple[str, Proc]]) -> None:
    """Rule 1: a synced floor whose sync child is gone (or a zombie) measured no sync: its
    figures must not be reported (the child's error is in the floor's err.log)."""
    for name, proc in servers:
        if name.endswith("synced") and not any(state(k) != "Z" for k in children(proc.pid)):
            raise RuntimeError(f"{name}: its sync child is gone (see {proc.workdir}/err.log): "
                               f"the run measured no sync")


def start_floor(procs: Procs, mode: str, compiled: Path | None) -> Proc:
    path = [str(compiled)] if compiled is not None else []
    module = "writefloor_server" if compiled is not None else "bench.writefloor_server"
    return floorrounds.start(procs, f"floor-{mode}", lambda port, workdir: [
        "-c", f"import sys; sys.path[:0] = {path!r}; import {module} as w; "
              f"w.serve({port}, {mode!r}, {str(workdir / 'journal.aof')!r})"])


def replies(port: int, commands: list[list[bytes]]) -> list[bytes]:
    """The raw RESP2 reply to each command, sent one at a time on one connection."""
    import hiredis

    out = []
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        reader = hiredis.Reader()
        for cmd in commands:
            s.sendall(frame(*cmd))
            raw = b""
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    raise RuntimeError(f"port {port} closed the connection")
                raw += chunk
                reader.feed(chunk)
                if reader.gets() is not False:
                    break
            out.append(raw)
    return out


def check(port: int, reference: list[bytes]) -> None:
    """Rule 3 on a server loaded as the reference was (its keys `l h s z` untouched): the
    CHECK replies must be the reference server's."""
    got = replies(port, CHECK)
    for cmd, want, have in zip(CHECK, reference, got, strict=True):
        if want != have:
            raise RuntimeError(f"port {port}: {b' '.join(cmd)!r} answered {have!r}, "
                               f"redis-server {want!r}")


def load(port: int, keys: int) -> float:
    """Both modules' keys (collbench.load's and zsetbench.load's) on one server."""
    flat_hash = [x for pair in hash_fields(VALUE).items() for x in pair]
    flat_zset = [x for j in range(zsetbench.ZPRELOAD) for x in (b"%d" % j, b"z%09d" % j)]

    def queue(p: Any, i: int) -> None:
        p.execute_command("RPUSH", b"list:%012d" % i, *[VALUE] * collbench.PRELOAD)
        p.execute_command("HSET", b"hash:%012d" % i, *flat_hash)
        p.execute_command("SADD", b"set:%012d" % i, *zsetbench.set_members())
        p.execute_command("ZADD", b"zset:%012d" % i, *flat_zset)

    return load_keys(port, keys, queue, per=4)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3,
                    help="rounds of every row on every server, the order reversed every "
                         "other round (default 3; ~15 minutes on 2 cores with the three floors)")
    ap.add_argument("--quick", action="store_true",
                    help="a third of the requests a row and a tenth of the keys (~5 minutes "
                         "at 3 rounds)")
    ap.add_argument("--floors", default="bare,packed,synced",
                    help=f"the floors to run, comma-separated among {', '.join(MODES)} "
                         "(default bare,packed,synced)")
    ap.add_argument("--interpreted", action="store_true",
                    help="run the floors interpreted instead of compiling them with mypyc "
                         "(they are slower so: a floor is then no bound)")
    args = ap.parse_args(argv)
    floors = list(dict.fromkeys(m for m in args.floors.split(",") if m))  # each floor once
    if not floors or any(m not in MODES for m in floors):
        ap.error(f"--floors takes names among {', '.join(MODES)}")
    install_signal_handlers()
    compiled = build(args.interpreted)
    print(f"floor servers: {'compiled in ' + str(compiled) if compiled else 'INTERPRETED'}")
    scale = 1 if args.quick else 3
    keys = KEYS // 10 if args.quick else KEYS
    rows: dict[str, floorrounds.Row] = {"PING, P1": (["PING"], 1, 50_000 * scale)}
    for name, cmd in ROWS.items():
        rows[f"{name}, P1"] = (cmd, 1, 35_000 * scale)
        rows[f"{name}, P16"] = (cmd, 16, 100_000 * scale)
    procs = Procs()
    try:
        servers = [("redis-server", procs.start_redis())]
        servers += [(f"floor {m}", start_floor(procs, m, compiled)) for m in floors]
        servers.append(("topicsrv", procs.start_topicsrv()))
        ports = {name: p.resp_port for name, p in servers}
        assert all(ports.values())
        for name, port in ports.items():
            seconds = load(port, keys)  # type: ignore[arg-type]
            print(f"{name}: {keys:,} keys of each kind loaded in {seconds:.1f} s", flush=True)
        reference = replies(ports["redis-server"], CHECK)  # type: ignore[arg-type]
        for name, port in ports.items():
            if name != "redis-server":  # its replies are the reference
                check(port, reference)  # type: ignore[arg-type]
        print("Rule 3: every server's replies to CHECK are redis-server's", flush=True)
        check_synced(servers)
        rates, costs = floorrounds.run(servers, rows, args.rounds, keys)
        check_synced(servers)
        floorrounds.report([n for n, _ in servers], rows, rates, costs, args.rounds,
                           "" if compiled else " (floors INTERPRETED)")
        return 0
    finally:
        procs.stop_all()


if __name__ == "__main__":
    sys.exit(main())
