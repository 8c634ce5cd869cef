"""The replica's side: one task that holds the link to the primary and applies its frames.

Rule 1 (handshake): connect to the primary's RESP port, AUTH (`--masteruser`/`--masterauth`),
`REPLCONF listening-port <our RESP port>` (Sentinel finds replicas by it), `REPLCONF capa
topicsrv`, then `PSYNC <replid> <offset>`: the (replid, offset) this process applied up to,
or the one replication.json says its disk holds after a clean stop (state.py Rule 3), or
`? -1` for nothing.
Rule 2 (full sync): `+FULLRESYNC <replid> <offset>` is followed by `$<n>` and n bytes of files
(repl/wire.py); they replace the replica's own (storage/replsync.py), replication.json
records (replid, offset) as clean, and the process restarts in place (`os.execv`: same pid,
same arguments): recovery loads the primary's checkpoint exactly as it loads its own, and the
restarted link resumes from that offset. Clients of the replica reconnect, as after a restart.
Rule 3 (stream): after `+CONTINUE` (or once restarted) the link reads whole frames and
applies each batch it read in one step (storage/replapply.py), then acknowledges the offset
(`REPLCONF ACK`): at once when the batch held the primary's request for one (a T_REPL_PING:
WAIT, `--min-replicas-to-ack`), else at most every 5 ms (under a write load an acknowledgement
per batch cost both sides a command each), and every second while idle (primary.py Rule 4). The received bytes are
kept in this server's own backlog, so that once promoted it can resume its former peers.
Rule 4 (loss of the link): any error closes the link; it is retried every second, with
`master_link_status:down` and `master_link_down_since_seconds` meanwhile, and resumes with
`PSYNC <replid> <the offset applied>` (a partial resync when the primary's backlog still holds
it). A frame that cannot be applied (this replica's disk refuses writes) closes the link too:
nothing after it is applied until it can be, and the resume starts from the last applied
offset. A replica whose state no longer matches its primary's (`Diverged`: a router's step
that does not land where the primary's did), or that failed applying a frame in a way it did
not expect (a bug: logged with its traceback), asks for a full sync instead.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from typing import TYPE_CHECKING, Any, Protocol

import trio

from topicsrv.engine.routing.routerrepl import Diverged
from topicsrv.errors import TopicsError
from topicsrv.repl import wire
from topicsrv.storage import frames, replsync
from topicsrv.storage.replapply import Applier

if TYPE_CHECKING:
    from topicsrv.engine import Engine
    from topicsrv.repl.primary import Primary
    from topicsrv.repl.state import ReplState
    from topicsrv.storage.store import Storage


class Host(Protocol):
    """What the link needs of the server (topicsrv/context.py's ServerContext, which imports
    this package: named by shape, not by import)."""

    engine: Engine
    storage: Storage | None
    repl: ReplState
    primary: Primary
    addresses: dict[str, tuple[str, int]]

log = logging.getLogger("topicsrv.repl")

RETRY_S = 1.0
ACK_EVERY_S = 1.0  # Rule 3: an acknowledgement at least this often, idle or not
ACK_GAP_S = 0.005  # Rule 3: and at most this often, unless the primary asked (T_REPL_PING)


class LinkError(Exception):
    pass


def _command(*parts: Any) -> bytes:
    out = [b"*%d\r\n" % len(parts)]
    for p in parts:
        b = p if isinstance(p, bytes) else str(p).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(b), b))
    return b"".join(out)


class Reader:
    """Bytes from the primary: lines, counted bytes, then whole frames."""

    def __init__(self, stream: trio.abc.Stream) -> None:
        self.stream = stream
        self.buf = bytearray()

    async def _more(self) -> None:
        data = await self.stream.receive_some(1 << 16)
        if not data:
            raise LinkError("the primary closed the link")
        self.buf += data

    async def line(self) -> bytes:
        while True:
            i = self.buf.find(b"\r\n")
            if i >= 0:
                line = bytes(self.buf[:i])
                del self.buf[:i + 2]
                return line
            if len(self.buf) > 1 << 16:
                raise LinkError("the primary sent a line too long")
            await self._more()

    async def exactly(self, n: int) -> bytes:
        while len(self.buf) < n:
            await self._more()
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out

    def frames(self) -> tuple[list[frames.Frame], int]:
        """Every whole frame buffered, and their bytes (a frame cut by the read waits)."""
        view = memoryview(self.buf)
        out: list[frames.Frame] = []
        pos = 0
        n = len(view)
        while pos + 4 <= n:
            length = int.from_bytes(view[pos:pos + 4], "little")
            if pos + 4 + length > n:
                break
            got = frames.read_at(view, pos)
            if isinstance(got, frames.Damage):
                view.release()
                raise LinkError(f"a damaged frame from the primary: {got.reason}")
            out.append(frames.Frame(got.offset, got.ftype, got.flag, memoryview(bytes(got.body))))
            pos = got.end
        view.release()
        return out, pos


async def _reply(stream: trio.abc.Stream, reader: Reader, *cmd: Any) -> bytes:
    await stream.send_all(_command(*cmd))
    line = await reader.line()
    if line.startswith(b"-"):
        raise LinkError(f"the primary answered {' '.join(str(c) for c in cmd[:2])}: "
                        f"{line[1:].decode('utf-8', 'replace')}")
    return line


class Link:
    def __init__(self, ctx: Host) -> None:
        self.ctx = ctx
        self.applier = Applier(ctx.engine, ctx.storage)  # server.py gives it on_functions
        self.last_why = ""  # the last failure logged, and when (`_down`)
        self.last_logged = 0.0

    async def run(self) -> None:
        """Rule 4: as long as this server is a replica, keep a link to its primary. A role
        change cancels the link's scope (resp/commands/replication.py `changed`)."""
        state = self.ctx.repl
        while True:
            master = state.master
            if master is None:
                await state.changed.wait()
                continue
            with trio.CancelScope() as scope:
                state.link_scope = scope
                try:
                    await self._session(master)
                except Diverged as exc:  # Rule 4: only a full sync makes it whole again
                    log.error("replication from %s:%d diverged (%s): taking a full sync", *master, exc)
                    state.resume = None
                    self._down(f"{exc}")
                except (LinkError, OSError, trio.BrokenResourceError, trio.ClosedResourceError,
                        ValueError, KeyError, TopicsError) as exc:
                    self._down(f"{exc}")
                except Exception:  # Rule 4: this replica's state is in doubt: a full sync
                    log.exception("replication link to %s:%d failed; taking a full sync", *master)
                    state.resume = None
                    self._down("internal error (logged)")
                await trio.sleep(RETRY_S)
            state.link_scope = None
            if scope.cancelled_caught:
                self._down("the primary changed")

    def _down(self, why: str) -> None:
        """Rule 4: a link that goes down is a WARNING; a retry that fails the same way is
        logged once a minute, not every second."""
        state = self.ctx.repl
        now = time.monotonic()
        if state.link_up:
            state.link_down_since = now
            log.warning("replication link to %s down: %s", state.master, why)
        elif why != self.last_why or now - self.last_logged >= 60:
            log.warning("replication link to %s: %s (retrying every %gs)", state.master, why,
                        RETRY_S)
            self.last_logged = now
        self.last_why = why
        state.link_up = False
        state.state = "connect"

    async def _session(self, master: tuple[str, int]) -> None:
        ctx = self.ctx
        state = ctx.repl
        state.state = "connecting"
        stream = await trio.open_tcp_stream(*master)
        async with stream:
            reader = Reader(stream)
            if state.masterauth is not None:
                args = [state.masteruser] if state.masteruser else []
                await _reply(stream, reader, "AUTH", *args, state.masterauth)
            port = ctx.addresses.get("resp", ("", 0))[1]
            await _reply(stream, reader, "REPLCONF", "listening-port", port)
            await _reply(stream, reader, "REPLCONF", "capa", "topicsrv")
            state.state = "sync"
            if state.resume is not None:
                replid, off = state.resume
            else:
                replid, off = "?", -1
            line = await _reply(stream, reader, "PSYNC", replid, off)
            words = line[1:].decode().split()
            if words[0] == "FULLRESYNC":
                await self._full(reader, words[1], int(words[2]))
                return
            if words[0] != "CONTINUE":
                raise LinkError(f"unexpected PSYNC reply {line!r}")
            if replid != "?" and words[1] != replid:
                # our history goes on under the primary's new replid (it was promoted)
                state.replid2, state.second_offset = replid, off
            state.replid = words[1]
            await self._stream(stream, reader, off)

    async def _full(self, reader: Reader, replid: str, cut: int) -> None:
        """Rule 2."""
        ctx = self.ctx
        state = ctx.repl
        head = await reader.line()
        if not head.startswith(b"$"):
            raise LinkError(f"unexpected full sync payload {head[:20]!r}")
        payload = await reader.exactly(int(head[1:]))
        files = wire.unpack_files(payload)
        log.info("full sync from %s:%d: %d files, %d bytes, offset %d; restarting on them",
                 *state.master, len(files), len(payload), cut)  # type: ignore[misc]
        storage = ctx.storage
        if storage is None:
            raise LinkError("a replica started with --no-storage cannot take a full sync")
        with trio.CancelScope(shield=True):
            await storage.stop_for_resync()
            await trio.to_thread.run_sync(replsync.install, storage.data_dir, files)
            state.resume = (replid, cut)
            state.save(clean=True)
            restart(ctx.addresses)

    async def _stream(self, stream: trio.abc.Stream, reader: Reader, off: int) -> None:
        """Rule 3."""
        ctx = self.ctx
        state = ctx.repl
        master = state.master
        state.offset = off
        state.link_up = True
        state.state = "connected"
        state.sync_in_progress = False
        state.last_io = time.monotonic()
        primary = ctx.primary
        primary.shadow(off)
        if state.resume is not None:  # from now on the disk is ahead of what the file says
            state.resume = None
            state.save()
        log.info("replicating from %s:%d at offset %d", *state.master, off)  # type: ignore[misc]
        try:
            await self._follow(stream, reader)
        finally:  # Rule 4: a link lost resumes from what was applied (not after a role change)
            if state.master == master:
                state.resume = (state.replid, state.offset)

    async def _follow(self, stream: trio.abc.Stream, reader: Reader) -> None:
        state = self.ctx.repl
        primary = self.ctx.primary
        last_ack = 0.0
        acked = state.offset
        while True:
            got, used = reader.frames()
            if got:
                raw = bytes(reader.buf[:used])
                del reader.buf[:used]
                self.applier.apply(got)
                state.offset += used
                primary.shadow_feed(raw)
                if any(fr.ftype == frames.T_REPL_PING for fr in got) or \
                        time.monotonic() - last_ack >= ACK_GAP_S:
                    last_ack, acked = await _ack(stream, state.offset)
                continue
            wait = ACK_EVERY_S if acked == state.offset else max(0.0, last_ack + ACK_GAP_S - time.monotonic())
            with trio.move_on_after(wait) as scope:
                await reader._more()
            state.last_io = time.monotonic() if not scope.cancelled_caught else state.last_io
            if acked != state.offset or time.monotonic() - last_ack >= ACK_EVERY_S:
                last_ack, acked = await _ack(stream, state.offset)


async def _ack(stream: trio.abc.Stream, offset: int) -> tuple[float, int]:
    """Rule 3: `REPLCONF ACK offset`; returns when it was sent and the offset it acknowledged."""
    await stream.send_all(_command("REPLCONF", "ACK", offset))
    return time.monotonic(), offset


def restart(addresses: dict[str, tuple[str, int]]) -> None:
    """Rule 2: this process again, same pid, same arguments, on the ports it has now (a port
    given as 0 stays the one it got; argparse keeps an option's last value). File descriptors
    are closed on exec: Python opens them non-inheritable."""
    pinned: list[str] = []
    for name, flag in (("http", "--http-port"), ("resp", "--resp-port"), ("resp-tls", "--tls-port")):
        if name in addresses:
            pinned += [flag, str(addresses[name][1])]
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(sys.executable, [sys.executable, *sys.orig_argv[1:], *pinned])
