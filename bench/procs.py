"""Server processes for the benchmarks: a fresh redis-server and a fresh topicsrv.

Rule 1: every process is started on 127.0.0.1 with ports picked free at runtime, and is
recorded in a `Procs` registry the moment it exists.
Rule 2: `Procs.stop_all()` stops each recorded process by its own pid (SIGTERM, then SIGKILL
after a grace period) and removes its temporary directory; `__main__` calls it in a
`finally`, and SIGTERM/SIGHUP are turned into KeyboardInterrupt so the `finally` runs.
Rule 3: redis-server runs with persistence off (`--save "" --appendonly no`), topicsrv with a
fresh empty data dir: both start from nothing.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

ROOT = Path(__file__).resolve().parent.parent
HERE = ROOT  # this tree, whose interpreter runs the bench (ROOT may be pointed elsewhere)
TICK = os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (/proc/<pid>/stat fields 14 and 15)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def rss_bytes(pid: int) -> int:
    """Resident set size of a process, from /proc/<pid>/status (VmRSS)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def children(pid: int) -> list[int]:
    """The pids of a process's children (zombies included), [] once it is gone
    (/proc/<pid>/task/<pid>/children: those of its main thread, which forks them)."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


def state(pid: int) -> str:
    """A process's state letter from /proc/<pid>/status (R, S, Z ...), "" once it is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("State:"):
                    return line.split()[1]
    except OSError:
        pass
    return ""


@dataclass
class Proc:
    name: str
    popen: subprocess.Popen[bytes]
    workdir: Path
    host: str = "127.0.0.1"
    resp_port: int | None = None
    http_port: int | None = None
    extra: dict[str, str] = field(default_factory=dict)

    @property
    def pid(self) -> int:
        return self.popen.pid

    def rss(self) -> int:
        return rss_bytes(self.pid)

    def cpu(self) -> float:
        return cpu_seconds(self.pid)

    def alive(self) -> bool:
        return self.popen.poll() is None


class Procs:
    """The registry of processes this run started; `stop_all` ends them by pid."""

    def __init__(self) -> None:
        self.items: list[Proc] = []
        self.started: list[tuple[str, int]] = []  # (name, pid) of every process ever started

    def _wait_port(self, proc: Proc, port: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not proc.alive():
                raise RuntimeError(f"{proc.name} exited with {proc.popen.returncode}")
            try:
                with socket.create_connection((proc.host, port), timeout=0.2):
                    return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"{proc.name} did not listen on {port} within {timeout}s")

    def start_redis(self, timeout: float = 15.0, extra: tuple[str, ...] = ()) -> Proc:
        """`extra`: more redis-server options, after (so overriding) the persistence-off ones."""
        exe = shutil.which("redis-server")
        if exe is None:
            raise RuntimeError("redis-server is not installed (run scripts/ensure-tools.sh)")
        port = free_port()
        workdir = Path(tempfile.mkdtemp(prefix="bench-redis-"))
        popen = subprocess.Popen(
            [exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", str(workdir), "--protected-mode", "yes", "--daemonize", "no", *extra],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
        )
        proc = Proc("redis-server", popen, workdir, resp_port=port)
        self.items.append(proc)
        self.started.append((proc.name, proc.pid))
        self._wait_port(proc, port, timeout)
        return proc

    def start_topicsrv(self, timeout: float = 60.0, extra: tuple[str, ...] = (),
                       env: dict[str, str] | None = None, cwd: Path | None = None) -> Proc:
        """`extra`: more `serve` options; `env`: more environment variables; `cwd`: the
        source tree to run (default ROOT), with that tree's own `.venv` if it has one (its
        own compiled build and dependencies, for A/B of two trees)."""
        workdir = Path(tempfile.mkdtemp(prefix="bench-topicsrv-"))
        log = open(workdir / "server.log", "wb")  # noqa: SIM115 - lives as long as the process
        tree = cwd or ROOT
        venv = tree / ".venv" / "bin" / "python"
        exe = str(venv) if tree.resolve() != HERE and venv.exists() else sys.executable
        popen = subprocess.Popen(
            [exe, "-m", "topicsrv", "serve", "--data-dir", str(workdir / "data"),
             "--bind", "127.0.0.1", "--http-port", "0", "--resp-port", "0",
             "--log-level", "WARNING", *extra],
            stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL, cwd=tree,
            env={**os.environ, **env} if env else None,
        )
        log.close()
        proc = Proc("topicsrv", popen, workdir)
        self.items.append(proc)
        self.started.append((proc.name, proc.pid))
        assert popen.stdout is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = popen.stdout.readline().decode(errors="replace")
            if not line:
                if not proc.alive():
                    tail = (workdir / "server.log").read_text(errors="replace")[-2000:]
                    raise RuntimeError(f"topicsrv exited: {tail}")
                continue
            if line.startswith("listening"):
                for part in line.split()[1:]:
                    name, _, addr = part.partition("=")
                    port = int(addr.rsplit(":", 1)[1])
                    if name == "http":
                        proc.http_port = port
                    elif name == "resp":
                        proc.resp_port = port
                return proc
        raise RuntimeError("topicsrv did not print its ports in time")

    def stop(self, proc: Proc, grace: float = 10.0) -> None:
        if proc.alive():
            try:
                os.kill(proc.pid, signal.SIGTERM)
                proc.popen.wait(grace)
            except subprocess.TimeoutExpired:
                os.kill(proc.pid, signal.SIGKILL)
                proc.popen.wait()
            except ProcessLookupError:
                pass
        if proc.popen.stdout is not None:
            proc.popen.stdout.close()
        shutil.rmtree(proc.workdir, ignore_errors=True)
        if proc in self.items:
            self.items.remove(proc)

    def stop_all(self) -> None:
        for proc in list(reversed(self.items)):
            try:
                self.stop(proc)
            except Exception as exc:  # noqa: BLE001 - keep stopping the others
                print(f"bench: could not stop {proc.name} pid {proc.pid}: {exc}", file=sys.stderr)


def _raise_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def install_signal_handlers() -> None:
    """Turn SIGTERM/SIGHUP into KeyboardInterrupt so `finally: stop_all()` always runs."""
    signal.signal(signal.SIGTERM, _raise_interrupt)
    signal.signal(signal.SIGHUP, _raise_interrupt)
