"""TLS for both fronts: the server's SSLContext from the command line, and the handshake of a
trio stream (HTTPS connections, refusals on a TLS port). The RESP front's own TLS adapter is
topicsrv/resp/tlsio.py.

Rule 1: TLS is on when `--tls-cert` and `--tls-key` are given (one without the other, or
`--tls-ca`/`--tls-port` without both, is a startup error naming the flag). Then the HTTP port
speaks HTTPS only, and `--tls-port` (if given) serves RESP over TLS beside the plain
`--resp-port` (which `--resp-port off` disables).
Rule 2: with `--tls-ca`, a client must present a certificate signed by that CA (as
redis-server's `tls-auth-clients yes`); the handshake of a client without one fails.
Rule 3: TLS 1.2 or later; renegotiation is refused (a client cannot restart a handshake
mid-connection).
Rule 4: a handshake that fails (plain text on a TLS port, a wrong or missing certificate,
garbage) or does not finish within HANDSHAKE_TIMEOUT_S ends that connection only: it is
logged at debug level and counted in `Handshakes`, never raised into a listener.
Rule 5: files are read once, at startup; an unreadable or mismatched file is a StartupError
(one line, no traceback).
"""

from __future__ import annotations

import logging
import ssl
from dataclasses import dataclass
from pathlib import Path

import trio

from topicsrv.errors import StartupError

log = logging.getLogger("topicsrv.tls")

HANDSHAKE_TIMEOUT_S = 10.0


@dataclass(slots=True)
class Handshakes:
    """TLS handshakes of both fronts (module-wide: one server per process)."""

    ok: int = 0
    failed: int = 0
    timed_out: int = 0


STATS = Handshakes()


def server_context(cert: Path | None, key: Path | None, ca: Path | None = None,
                   port: int | None = None) -> ssl.SSLContext | None:
    """The server-side SSLContext of `--tls-cert/--tls-key/--tls-ca` (Rule 1), or None when
    TLS is off; `port` (`--tls-port`) is checked only for needing the others."""
    if cert is None and key is None:
        for flag, value in (("--tls-ca", ca), ("--tls-port", port)):
            if value is not None:
                raise StartupError(f"{flag} needs --tls-cert and --tls-key")
        return None
    if cert is None or key is None:
        raise StartupError("--tls-cert and --tls-key go together: give both (PEM files)")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.options |= ssl.OP_NO_RENEGOTIATION
    try:
        context.load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as exc:
        raise StartupError(f"cannot load --tls-cert {cert} with --tls-key {key}: {exc}") from None
    if ca is not None:
        try:
            context.load_verify_locations(cafile=ca)
        except (OSError, ssl.SSLError) as exc:
            raise StartupError(f"cannot load --tls-ca {ca}: {exc}") from None
        context.verify_mode = ssl.CERT_REQUIRED
    return context


def failed(peer: str, reason: object) -> None:
    STATS.failed += 1
    log.debug("TLS handshake with %s failed: %s", peer, reason)


async def accept(stream: trio.SocketStream, context: ssl.SSLContext) -> trio.SSLStream[
        trio.SocketStream] | None:
    """The TLS stream over `stream` once its handshake is done, or None (Rule 4)."""
    tls = trio.SSLStream(stream, context, server_side=True, https_compatible=True)
    with trio.move_on_after(HANDSHAKE_TIMEOUT_S):
        try:
            await tls.do_handshake()
        except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            failed(_peer(stream), exc.__cause__ or exc)
            return None
        STATS.ok += 1
        return tls
    STATS.timed_out += 1
    log.debug("TLS handshake with %s timed out", _peer(stream))
    return None


def _peer(stream: trio.SocketStream) -> str:
    try:
        return str(stream.socket.getpeername()[:2])
    except (OSError, TypeError):
        return "?"
