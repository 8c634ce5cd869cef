"""Who may connect: protected mode, the client limit, and the accept loop of both fronts.

Rule 1 (protected mode, as Redis's): while protected mode is on, a front that has no credential
configured (RESP: no `--requirepass`; HTTP: no `--token`) serves loopback clients only. Any
other client is answered once (RESP: Redis's `-DENIED ...` text; HTTP: 403 `denied`) and
closed before anything it sent is read. A front with a credential serves every address.
Rule 2 (maxclients): at most `maxclients` client connections over both fronts together. The
next one is answered (RESP `-ERR max number of clients reached`, HTTP 503 `too_many_clients`)
and closed, as Redis does: refused in words, never silently dropped.
Rule 3: `maxclients` is sized against RLIMIT_NOFILE at start, as Redis does: the soft limit is
raised to maxclients + RESERVED_FDS when the hard limit allows; otherwise maxclients is lowered
to fit, with a warning.
Rule 4: accept failures (out of file descriptors, buffers or memory) never end a listener and
never log a traceback: the loop waits ACCEPT_BACKOFF_S and logs one line per LOG_EVERY_S with
how many accepts failed.
Rule 5: counting is exact: a connection counts from its accept until its front forgets it
(the fronts register a live-count callable; accepted-but-not-yet-started handlers are counted
here, and a handler registers its connection before its first checkpoint).
Rule 6: a port that cannot be bound (in use, not permitted) stops the start with one line that
names the address and the flag that chose it (`open_listeners`), never a traceback.
"""

from __future__ import annotations

import errno
import ipaddress
import logging
import resource
from collections.abc import Awaitable, Callable, Sequence
from functools import partial

import trio

from topicsrv.errors import StartupError

log = logging.getLogger("topicsrv.admission")

RESERVED_FDS = 128  # WAL shards, segment files, listeners, checkpoint files
ACCEPT_BACKOFF_S = 0.1
LOG_EVERY_S = 10.0
REFUSAL_LINGER_S = 1.0
CAPACITY_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS})

DENIED_TEXT = (
    "DENIED Redis is running in protected mode because protected mode is enabled and no "
    "password is set for the default user. In this mode connections are only accepted from "
    "the loopback interface. If you want to connect from external computers to topicsrv you "
    "may adopt one of the following solutions: 1) Set a password: restart topicsrv with "
    "--requirepass PASSWORD (RESP) and --token TOKEN (HTTP). 2) If the network is trusted, "
    "restart topicsrv with '--protected-mode no', but MAKE SURE the server is not publicly "
    "accessible from the internet if you do so. NOTE: You only need to do one of the above "
    "things in order for the server to start accepting connections from the outside."
)
MAXCLIENTS_TEXT = "ERR max number of clients reached"

Refuse = Callable[[str], bytes]  # reason ("denied" | "maxclients") -> bytes to send
# a TLS listener's handshake: the secured stream, or None when it failed (topicsrv/tls.py)
Secure = Callable[[trio.SocketStream], Awaitable["trio.abc.Stream | None"]]


async def open_listeners(port: int, host: str, flag: str) -> list[trio.SocketListener]:
    """Rule 6: trio's listeners on host:port, or a StartupError naming the port and `flag`."""
    try:
        return await trio.open_tcp_listeners(port, host=host)
    except OSError as exc:
        why = {errno.EADDRINUSE: "is already in use (another server?); pick a free port",
               errno.EACCES: "is not permitted for this user; pick a port above 1023",
               errno.EADDRNOTAVAIL: "is not an address of this machine; check --bind"}.get(
                   exc.errno or 0, f"cannot be bound: {exc.strerror}")
        raise StartupError(f"{flag} {port}: {host}:{port} {why}") from None


def is_loopback(host: str, trusted: Sequence[str] | None = None) -> bool:
    """Whether a peer address counts as local. `trusted` (networks) replaces the loopback
    ranges; tests use it to make a 127.0.0.x peer count as remote."""
    try:
        addr = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return True  # not an IP peer (AF_UNIX has no host address): a local client
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        addr = addr.ipv4_mapped
    if trusted is not None:
        return any(addr in ipaddress.ip_network(net, strict=False) for net in trusted)
    return addr.is_loopback


def size_maxclients(wanted: int) -> int:
    """Raise RLIMIT_NOFILE for `wanted` clients if allowed, else lower `wanted` (Rule 3)."""
    need = wanted + RESERVED_FDS
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < need:
        target = need if hard == resource.RLIM_INFINITY else min(need, hard)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass
    if soft != resource.RLIM_INFINITY and soft < need:
        fitted = max(1, soft - RESERVED_FDS)
        log.warning("maxclients %d needs %d file descriptors but the limit is %d "
                    "(ulimit -n): serving at most %d clients", wanted, need, soft, fitted)
        return fitted
    return wanted


class Admission:
    """The connection gate shared by both fronts."""

    def __init__(self, maxclients: int, *, protected_mode: bool = True,
                 trusted_nets: Sequence[str] | None = None) -> None:
        self.maxclients = maxclients
        self.protected_mode = protected_mode
        self.trusted_nets = trusted_nets
        self._live: list[Callable[[], int]] = []
        self._starting = 0
        self.rejected_maxclients = 0
        self.rejected_denied = 0
        self.accept_errors = 0
        self._accepting: list[trio.CancelScope] = []  # one per listener (stop_accepting)
        self.stopped = False

    def register(self, live: Callable[[], int]) -> None:
        """A front's count of the connections it serves (Rule 5)."""
        self._live.append(live)

    def connected(self) -> int:
        return self._starting + sum(f() for f in self._live)

    def verdict(self, peer_host: str, has_credential: bool) -> str | None:
        """None to serve the client, or the reason it is refused."""
        if (self.protected_mode and not has_credential
                and not is_loopback(peer_host, self.trusted_nets)):
            self.rejected_denied += 1
            return "denied"
        if self.connected() >= self.maxclients:
            self.rejected_maxclients += 1
            return "maxclients"
        return None

    def stop_accepting(self) -> None:
        """Close every listener of both fronts; connections already open are not touched."""
        self.stopped = True
        for scope in self._accepting:
            scope.cancel()

    async def serve(
        self,
        listeners: Sequence[trio.SocketListener],
        handler: Callable[[trio.SocketStream], Awaitable[None]],
        *,
        name: str,
        has_credential: Callable[[], bool],
        refuse: Refuse,
        secure: Secure | None = None,
    ) -> None:
        """Accept forever on `listeners`, gating every connection (replaces
        trio.serve_listeners for both fronts). On a TLS listener (`secure`) a refusal is sent
        after the handshake, so the client can read it."""
        async with trio.open_nursery() as nursery:
            for listener in listeners:
                nursery.start_soon(self._accept_loop, listener, handler, nursery, name,
                                   has_credential, refuse, secure)

    async def _accept_loop(self, listener: trio.SocketListener,
                           handler: Callable[[trio.SocketStream], Awaitable[None]],
                           nursery: trio.Nursery, name: str,
                           has_credential: Callable[[], bool], refuse: Refuse,
                           secure: Secure | None) -> None:
        scope = trio.CancelScope()  # stop_accepting cancels it; the listener closes
        self._accepting.append(scope)
        if self.stopped:
            scope.cancel()
        with scope:
            await self._accept_forever(listener, handler, nursery, name, has_credential, refuse,
                                       secure)

    async def _accept_forever(self, listener: trio.SocketListener,
                              handler: Callable[[trio.SocketStream], Awaitable[None]],
                              nursery: trio.Nursery, name: str,
                              has_credential: Callable[[], bool], refuse: Refuse,
                              secure: Secure | None) -> None:
        failures, logged_at = 0, float("-inf")
        async with listener:
            while True:
                try:
                    stream = await listener.accept()
                except OSError as exc:
                    if exc.errno not in CAPACITY_ERRNOS:
                        raise
                    self.accept_errors += 1
                    failures += 1
                    now = trio.current_time()
                    if now - logged_at >= LOG_EVERY_S:
                        log.error("%s: accept failed %d time(s): %s (%s); retrying every %.1fs",
                                  name, failures, errno.errorcode.get(exc.errno or 0, "?"),
                                  exc.strerror, ACCEPT_BACKOFF_S)
                        failures, logged_at = 0, now
                    await trio.sleep(ACCEPT_BACKOFF_S)
                    continue
                peer = _peer_host(stream)
                reason = self.verdict(peer, has_credential())
                if reason is not None:
                    log.warning("%s: refused client %s (%s)", name, peer,
                                "protected mode" if reason == "denied" else "maxclients reached")
                    nursery.start_soon(_answer_and_close, stream, refuse(reason), secure)
                    continue
                self._starting += 1
                nursery.start_soon(partial(self._run, handler, stream))

    async def _run(self, handler: Callable[[trio.SocketStream], Awaitable[None]],
                   stream: trio.SocketStream) -> None:
        self._starting -= 1  # the handler registers its connection before its first await
        try:
            await handler(stream)
        finally:
            await trio.aclose_forcefully(stream)


def _peer_host(stream: trio.SocketStream) -> str:
    try:
        return str(stream.socket.getpeername()[0])
    except (OSError, IndexError, TypeError):
        return ""


async def _answer_and_close(stream: trio.SocketStream, data: bytes,
                            secure: Secure | None = None) -> None:
    """Send the refusal, then drain briefly so the peer reads it rather than a reset."""
    with trio.move_on_after(REFUSAL_LINGER_S):
        try:
            out: trio.abc.Stream | None = stream if secure is None else await secure(stream)
            if out is not None:
                await out.send_all(data)
                if isinstance(out, trio.abc.HalfCloseableStream):
                    await out.send_eof()
                while await out.receive_some(65536):
                    pass
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            pass
    await trio.aclose_forcefully(stream)
