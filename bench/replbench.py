"""The replication phase of `python -m bench` (issue 37): a primary with one replica against
redis-server with one redis-server replica, beside the same rows on one node.

Rule 1 (shapes): one round starts fresh servers twice: one redis-server and one topicsrv
alone (the single-node rows), and a redis-server primary followed by a redis-server replica
(`--replicaof 127.0.0.1 <port>`) beside a topicsrv primary followed by a topicsrv replica
(`--replicaof 127.0.0.1:<port>`; its full sync restarts it in place). A replica counts as
ready once INFO says `master_link_status:up` and its offset reached its primary's. Durability
is each server's default on every node: topicsrv `--keyspace-durability disk` (and `disk`
topics), redis-server `--appendonly no --save ""` (bench/procs.py Rule 3); the redis primary
also gets `--repl-diskless-sync-delay 0` so its replica's first sync does not wait 5 s.
Rule 2 (rows): XADD P16 and SET P16 (redis-benchmark -c 50; SET on `-r` random keys, none
loaded first) on each shape. A row is the median of its per-round ratios topicsrv / redis;
which server runs first and which shape goes first alternate between rounds. The target of a
replicated row is the single-node ratio of the same row in the same run (a replica must not
cost topicsrv a larger share than it costs redis-server).
Rule 3 (lag, during every replicated XADD P16 load): one thread reads the primary's
`master_repl_offset` and then the replica's `slave_repl_offset` (bytes behind: the primary's
figure first, so a sample is a floor); another SETs `repl:mark <n>` on the primary, notes
when the primary acknowledged it, then GETs the key on the replica until it reads `<n>`
(ms behind: from the primary's OK to the first reply on the replica holding it, so at most
one GET round trip and one 1 ms pause late), and starts over. Each thread takes at least one
sample however short the load (a mark written before the load ended is waited for).
Reported: median and max over every round's samples, no target. After each replicated load
the phase waits until the replica holds everything (the time it took in the note), so the
next row starts level.
Rule 4: every server is started in the caller's `Procs` and stopped by pid (a `finally`).
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import redis

from bench.procs import Proc, Procs
from bench.report import Row
from bench.respbench import Measure, client, redis_benchmark

KEYS = 100_000  # SET's -r range
MARK = "repl:mark"
SAMPLE_EVERY_S = 0.005  # Rule 3's pauses: the bench's own threads share the 2 cores
MARK_EVERY_S = 0.01
POLL_EVERY_S = 0.001
READY_TIMEOUT_S = 120.0
COMMANDS = {"xadd": ["XADD", "s", "*", "f", "v"],
            "set": ["SET", "key:__rand_int__", "v" * 100]}
LABELS = {"xadd": "XADD s * f v, P16", "set": "SET key:__rand_int__ <100 B>, P16"}
WHO = ("redis", "topicsrv")


def info(port: int) -> dict[str, Any]:
    r = client(port)
    try:
        return dict(r.info("replication"))
    finally:
        r.close()


def wait_level(primary: int, replica: int, timeout: float = READY_TIMEOUT_S) -> float:
    """Seconds until the replica's link is up and its offset reached the primary's offset of
    the moment this was called (Rule 1). A topicsrv replica restarts in place during its full
    sync: connection errors meanwhile are retried."""
    t0 = time.perf_counter()
    target: int | None = None
    last = ""
    while time.perf_counter() - t0 < timeout:
        try:
            if target is None:
                target = int(info(primary)["master_repl_offset"])
            r = info(replica)
            if r.get("master_link_status") == "up" and int(r["slave_repl_offset"]) >= target:
                return time.perf_counter() - t0
            last = f"link {r.get('master_link_status')}, offset {r.get('slave_repl_offset')}"
        except (redis.ConnectionError, redis.TimeoutError, OSError) as exc:
            last = str(exc)
        time.sleep(0.02)
    raise RuntimeError(f"replica on {replica} not level with {primary} in {timeout:.0f} s ({last})")


@dataclass
class Lag:
    """Rule 3's samples of one server kind, over every round."""

    bytes_behind: list[int] = field(default_factory=list)
    ms_behind: list[float] = field(default_factory=list)
    link_down: int = 0  # samples in which the replica said its link was down
    catch_up_s: list[float] = field(default_factory=list)


class Sampler:
    """Rule 3's two threads, around one load."""

    def __init__(self, primary: int, replica: int, lag: Lag) -> None:
        self.primary, self.replica, self.lag = primary, replica, lag
        self.stop = threading.Event()
        self.errors: list[str] = []
        self.threads = [threading.Thread(target=self._guard, args=(f,), daemon=True)
                        for f in (self._bytes, self._marks)]

    def __enter__(self) -> Sampler:
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(30)

    def _guard(self, fn: Callable[[], None]) -> None:
        try:
            fn()
        except Exception as exc:  # noqa: BLE001 - reported in the row's note
            self.errors.append(f"{fn.__name__}: {exc}")

    def _bytes(self) -> None:
        p, r = client(self.primary), client(self.replica)
        try:
            while True:  # at least one sample, however short the load
                off = int(p.info("replication")["master_repl_offset"])
                rep = r.info("replication")
                if rep.get("master_link_status") != "up":
                    self.lag.link_down += 1
                self.lag.bytes_behind.append(max(0, off - int(rep["slave_repl_offset"])))
                if self.stop.wait(SAMPLE_EVERY_S):
                    return
        finally:
            p.close()
            r.close()

    def _marks(self) -> None:
        """A mark the load's end overtakes is still waited for (at least one sample, however
        short the load): it was written while the load ran."""
        p, r = client(self.primary), client(self.replica)
        n = 0
        try:
            while True:
                n += 1
                want = str(n).encode()
                p.set(MARK, want)
                acked = time.perf_counter()
                while r.get(MARK) != want:
                    if time.perf_counter() - acked > READY_TIMEOUT_S:
                        raise RuntimeError(f"mark {n} not on the replica after {READY_TIMEOUT_S} s")
                    time.sleep(POLL_EVERY_S)
                self.lag.ms_behind.append((time.perf_counter() - acked) * 1e3)
                if self.stop.wait(MARK_EVERY_S):
                    return
        finally:
            p.close()
            r.close()


@dataclass
class Shape:
    """Per row and server kind: ops/s per round; each server's CPU shares in the last round."""

    ops: dict[str, dict[str, list[float]]]
    busy: dict[str, str] = field(default_factory=dict)

    def ratios(self, row: str) -> list[float]:
        return [t / r for r, t in zip(self.ops[row]["redis"], self.ops[row]["topicsrv"],
                                      strict=True)]

    def cells(self, row: str) -> tuple[float, float]:
        """The median redis figure and the topicsrv figure that gives the median ratio."""
        red = statistics.median(self.ops[row]["redis"])
        return red, red * statistics.median(self.ratios(row))


def _empty() -> Shape:
    return Shape({row: {w: [] for w in WHO} for row in COMMANDS})


class Phase:
    def __init__(self, procs: Procs, sizes: dict[str, int], log: Callable[[str], None],
                 rounds: int) -> None:
        self.procs = procs
        self.sizes = sizes
        self.log = log
        self.rounds = rounds
        self.single = _empty()
        self.repl = _empty()
        self.lag = {w: Lag() for w in WHO}
        self.sync: list[float] = []  # topicsrv SET P16 ops/s with --min-replicas-to-ack 1

    def run(self) -> tuple[list[Row], dict[str, Any]]:
        error = ""
        for rnd in range(self.rounds):
            order = WHO if rnd % 2 == 0 else WHO[::-1]
            steps = (self._single, self._replicated)
            for step in steps if rnd % 2 == 0 else steps[::-1]:
                try:
                    step(rnd, order)
                except Exception as exc:  # noqa: BLE001 - the rows say so, the run goes on
                    error = f"error: {exc}".replace("\n", " ")
                    self.log(f"repl round {rnd + 1}: {error}")
                finally:
                    self.procs.stop_all()
            if error:
                break
        return self._rows(error), self._extra()

    def _measure(self, proc: Proc, row: str, busy: list[Proc]) -> tuple[Measure, str]:
        """One redis-benchmark run of `row` on `proc`; also the share of a core each of
        `busy` (primary, replica) and the client kept busy (bench/respbench.py Rule 4), and
        each server's CPU per request."""
        assert proc.resp_port is not None
        cpu0 = [p.cpu() for p in busy]
        m = redis_benchmark(proc.resp_port, COMMANDS[row], requests=self.sizes["repl_p16"],
                            pipeline=16, extra=("-r", str(KEYS)) if row == "set" else ())
        spent = [p.cpu() - c for p, c in zip(busy, cpu0, strict=True)]
        names = ("primary", "replica") if len(busy) > 1 else ("server",)
        text = ", ".join(f"{name} {m.busy(cpu):.0%} ({cpu / m.ops * 1e6:.1f} us/op)"
                         for name, cpu in zip(names, spent, strict=True))
        if m.client_cpu_s is not None:
            text += f", client {m.busy(m.client_cpu_s):.0%}"
        return m, text

    def _single(self, rnd: int, order: tuple[str, ...]) -> None:
        servers = {"redis": self.procs.start_redis(), "topicsrv": self.procs.start_topicsrv()}
        for row in COMMANDS:
            for who in order:
                self.log(f"repl round {rnd + 1}: {row} P16 on {who}, single node")
                m, busy = self._measure(servers[who], row, [servers[who]])
                self.single.ops[row][who].append(m.ops_per_s)
                self.single.busy[f"{row} {who}"] = busy

    def _replicated(self, rnd: int, order: tuple[str, ...]) -> None:
        rp = self.procs.start_redis(extra=("--repl-diskless-sync-delay", "0"))
        tp = self.procs.start_topicsrv()
        assert rp.resp_port is not None and tp.resp_port is not None
        rr = self.procs.start_redis(extra=("--replicaof", "127.0.0.1", str(rp.resp_port)))
        tr = self.procs.start_topicsrv(extra=("--replicaof", f"127.0.0.1:{tp.resp_port}"))
        pairs = {"redis": (rp, rr), "topicsrv": (tp, tr)}
        for who, (p, r) in pairs.items():
            assert r.resp_port is not None
            took = wait_level(p.resp_port or 0, r.resp_port)
            self.log(f"repl round {rnd + 1}: {who} replica level after {took:.1f} s")
        for row in COMMANDS:
            for who in order:
                p, r = pairs[who]
                assert p.resp_port is not None and r.resp_port is not None
                self.log(f"repl round {rnd + 1}: {row} P16 on {who}, primary + 1 replica")
                if row == "xadd":
                    with Sampler(p.resp_port, r.resp_port, self.lag[who]) as sampler:
                        m, busy = self._measure(p, row, [p, r])
                    if sampler.errors:
                        raise RuntimeError(f"lag sampler on {who}: {sampler.errors[0]}")
                else:
                    m, busy = self._measure(p, row, [p, r])
                self.repl.ops[row][who].append(m.ops_per_s)
                self.repl.busy[f"{row} {who}"] = busy
                took = wait_level(p.resp_port, r.resp_port)
                if row == "xadd":
                    self.lag[who].catch_up_s.append(took)
        # synchronous replication (topicsrv only: redis-server has WAIT, no such mode)
        assert tp.resp_port is not None
        admin = redis.Redis(port=tp.resp_port)
        admin.config_set("min-replicas-to-ack", 1)
        try:
            self.log(f"repl round {rnd + 1}: set P16 on topicsrv, --min-replicas-to-ack 1")
            m, _ = self._measure(tp, "set", [tp, tr])
            self.sync.append(m.ops_per_s)
        finally:
            admin.config_set("min-replicas-to-ack", 0)

    def _rows(self, error: str) -> list[Row]:
        n = self.rounds
        sec = (f"replication, -c 50, median of {n} alternating rounds (every node: topicsrv "
               "--keyspace-durability disk, redis-server --appendonly no)")
        rows: list[Row] = []
        for row in COMMANDS:
            label = LABELS[row]
            single, repl = self.single.ops[row], self.repl.ops[row]
            if error or len(single["topicsrv"]) < n or len(repl["topicsrv"]) < n:
                msg = error or "error: rounds missing"
                rows += [Row(sec, f"{label}, single node", "ops/s", msg, msg),
                         Row(sec, f"{label}, primary + 1 replica", "ops/s", msg, msg)]
                continue
            red, top = self.single.cells(row)
            base = Row(sec, f"{label}, single node", "ops/s", red, top, ref_note=(
                "rounds: " + ", ".join(f"{x:.2f}" for x in self.single.ratios(row))
                + f"; busy (last round): redis {self.single.busy[f'{row} redis']}; "
                f"topicsrv {self.single.busy[f'{row} topicsrv']}"))
            red_r, top_r = self.repl.cells(row)
            cost = "; ".join(
                f"{who} keeps {statistics.median(repl[who]) / statistics.median(single[who]):.0%}"
                f" of its single-node rate" for who in WHO)
            rows += [base, Row(
                sec, f"{label}, primary + 1 replica", "ops/s", red_r, top_r, target=base.ratio,
                ref_note=("target = the single-node ratio; rounds: "
                          + ", ".join(f"{x:.2f}" for x in self.repl.ratios(row))
                          + f"; {cost}; busy (last round): redis {self.repl.busy[f'{row} redis']};"
                          f" topicsrv {self.repl.busy[f'{row} topicsrv']}"))]
        if not error and len(self.sync) >= n:
            red_r, _ = self.repl.cells("set")
            rows.append(Row(
                sec, "SET P16, primary + 1 replica, topicsrv --min-replicas-to-ack 1 (each "
                "reply after the replica's ACK) vs redis-server asynchronous", "ops/s", red_r,
                statistics.median(self.sync), ref_note="reported (redis-server has no "
                "synchronous mode); rounds: " + ", ".join(f"{x:.0f}" for x in self.sync)))
        rows += self._lag_rows(sec, error)
        return rows

    def _lag_rows(self, sec: str, error: str) -> list[Row]:
        lag_sec = ("replication lag during XADD P16, primary + 1 replica (topicsrv "
                   "--keyspace-durability disk, redis-server --appendonly no)")
        out = []
        for unit, what, attr in (("B", "bytes behind (primary offset - replica offset)",
                                  "bytes_behind"),
                                 ("ms", "ms behind (marker key, primary OK -> replica GET)",
                                  "ms_behind")):
            samples = {w: getattr(self.lag[w], attr) for w in WHO}
            note = "; ".join(f"{w}: {len(samples[w])} samples" for w in WHO)
            for stat, fn in (("median", statistics.median), ("max", max)):
                cells = [float(fn(samples[w])) if samples[w] else (error or "error: no samples")
                         for w in WHO]
                out.append(Row(lag_sec, f"{what}, {stat}", unit, cells[0], cells[1],
                               ref_note=note if stat == "median" else ""))
        catch = "; ".join(
            f"{w}: " + ", ".join(f"{s:.2f}" for s in self.lag[w].catch_up_s) + " s"
            + (f", link down in {self.lag[w].link_down} samples" if self.lag[w].link_down else "")
            for w in WHO)
        if out:
            out[-1].ref_note = f"catch-up after each load ended: {catch}"
        return out

    def _extra(self) -> dict[str, Any]:
        return {"repl": {
            "single": self.single.ops, "replicated": self.repl.ops,
            "lag": {w: {"bytes_behind": lag.bytes_behind, "ms_behind": lag.ms_behind,
                        "link_down": lag.link_down, "catch_up_s": lag.catch_up_s}
                    for w, lag in self.lag.items()}}}

