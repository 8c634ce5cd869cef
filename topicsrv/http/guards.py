"""Checks every request passes before it is routed: Host, bearer token, body media type.

Rule 1: the Host check comes first (403 `forbidden`, `detail.reason` "host_not_allowed"). A
Host is allowed when its name (port ignored, case-insensitive) is localhost, 127.0.0.1 or
[::1], the bound address, the local address the connection arrived on, or a name given with
`--allowed-hosts` (`*` allows any). A browser page can only send another name through DNS
rebinding, which this refuses. A request without Host (HTTP/1.0 only) is not from a browser
and passes.
Rule 1b (cross-site requests): after the Host check, a request a browser sent for a page of
another origin is 403 `forbidden` (`detail.reason` "cross_site"), whatever its route and
method: one whose `Origin` is not this server's own (`<scheme>://<Host>`, default ports
dropped; `Origin: null` included), or whose `Sec-Fetch-Site` is `cross-site` or `same-site`
(`same-site` is another port or subdomain: another origin). A browser sends at least one of
the two on every request a page makes (fetch in any mode, EventSource, forms, images); a
state-changing GET (`/v0/work` claims jobs) needs no preflight, so this check, not CORS, is
what keeps a page from changing state. `GET /` (the static status page, no data) is exempt,
so a link to it works. Same-origin requests (the status page's own fetches and stream) and
clients that send neither header (curl, SDKs, workers) pass.
Rule 2: with a token configured, EVERY request needs `Authorization: Bearer <token>` (401
`unauthorized`, compared in constant time; the read-only token counts, Rule 5), before
routing: an unknown or non-canonical path is 401 to a caller without a token, and 404 only to
one with it. The one exception is `GET /`, the static status page (no data; a browser cannot
attach the header to a navigation): the page then asks for the token itself
(topicsrv/http/status.py Rule 1).
Rule 3: a request that carries a body on a method other than GET/HEAD must declare
`Content-Type: application/json` (parameters such as charset allowed), else 415
`unsupported_media_type`. An HTML form or a `no-cors` fetch can only send form or text/plain
bodies, so cross-site pages cannot write; a request without a body needs no Content-Type.
Rule 4: pure functions of (config, request); no I/O.
Rule 5 (roles): with `--read-token R` besides `--token T`, a request bearing R has the READER
role: it may use only the routes whose handler is in READER_HANDLERS (health, ready, metrics,
list/get topics and routers, diff, watch, the status page and its snapshot and stream); any other route (write, delete, PUT topic or
router, claim/ack/nack/extend, the work stream) is 403 `forbidden` with `detail.reason`
"read_only_token", after routing (an unknown path is still 404) and before the body is read
by a handler. The list is an allow-list: a new route is refused to readers until added.
Rule 6 (a replica, topicsrv/repl/): every route a reader may not use but `publish` (pub/sub is
not data: it works on replicas, as Redis's PUBLISH) answers 409 `read_only_replica` naming the
primary's RESP address in `detail.primary`, right after the role check.
"""

from __future__ import annotations

import hmac
import re
from typing import TYPE_CHECKING

from topicsrv.errors import TopicsError
from topicsrv.http.protocol import Request

if TYPE_CHECKING:
    from topicsrv.context import ServerConfig

FULL = "full"
READER = "reader"
READER_HANDLERS = frozenset({
    "health", "ready", "metrics", "list_topics", "get_topic", "diff", "watch_topic",
    "watch_many", "list_routers", "get_router", "status_page", "status", "status_stream",
    "openapi", "subscribe_channel", "subscribe_patterns",
})
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "[::1]"})
WILDCARD_BINDS = frozenset({"", "0.0.0.0", "::"})
_HOST = re.compile(r"(\[[0-9A-Fa-f:.]+\]|[^\s:\[\]/@,]+)(?::[0-9]{0,5})?")


def host_name(value: str) -> str | None:
    """The name part of a Host header value, lower-cased ("[::1]:7070" -> "[::1]")."""
    m = _HOST.fullmatch(value.strip())
    return m.group(1).lower() if m else None


def address_name(addr: str) -> str:
    """An address as it appears in a Host header ("::1" -> "[::1]")."""
    addr = addr.lower()
    if addr.startswith("::ffff:") and "." in addr:  # IPv4-mapped: clients say 10.0.0.5
        addr = addr[len("::ffff:"):]
    if ":" in addr and not addr.startswith("["):
        return f"[{addr}]"
    return addr


def parse_allowed_hosts(text: str) -> tuple[str, ...]:
    """`--allowed-hosts a.example,10.0.0.5,*` as normalised names."""
    return tuple(address_name(part.strip()) for part in text.split(",") if part.strip())


def check_host(config: ServerConfig, req: Request) -> None:
    allowed = config.allowed_hosts
    if "*" in allowed:
        return
    value = req.headers.get("host")
    if value is None:
        return
    name = host_name(value)
    if name is not None and (
        name in LOOPBACK_NAMES
        or name in allowed
        or (config.bind not in WILDCARD_BINDS and name == address_name(config.bind))
        or (req.local_host is not None and name == address_name(req.local_host))
    ):
        return
    hint = name if name is not None else "NAME"
    raise TopicsError(
        "forbidden",
        f"Host {value!r} is not a name of this server (DNS rebinding protection): use "
        f"127.0.0.1, localhost or the bound address, or start the server with "
        f"--allowed-hosts {hint}",
        {"reason": "host_not_allowed", "host": value},
    )


CROSS_SITE_FETCH = frozenset({"cross-site", "same-site"})
_DEFAULT_PORT = {"http": ":80", "https": ":443"}


def _authority(scheme: str, host: str) -> str:
    """`host[:port]` lower-cased, the scheme's default port dropped."""
    host = host.strip().lower()
    default = _DEFAULT_PORT.get(scheme)
    return host[: -len(default)] if default and host.endswith(default) else host


def check_origin(req: Request, scheme: str = "http") -> None:
    """Rule 1b: 403 `forbidden` ("cross_site") for a request sent by another origin's page."""
    if req.path == "/" and req.method == "GET":
        return
    origin = req.headers.get("origin")
    fetch_site = req.headers.get("sec-fetch-site", "").strip().lower()
    foreign = fetch_site in CROSS_SITE_FETCH
    if origin is not None and not foreign:
        o_scheme, sep, o_host = origin.strip().partition("://")
        host = req.headers.get("host")
        foreign = (not sep or host is None or o_scheme.lower() != scheme
                   or _authority(scheme, o_host) != _authority(scheme, host))
    if foreign:
        raise TopicsError(
            "forbidden",
            f"cross-site request refused: a page of another origin ({origin or fetch_site}) "
            f"may not use this server (CSRF protection); a browser page must be served by "
            f"this server, other clients send no Origin header",
            {"reason": "cross_site", "origin": origin, "sec_fetch_site": fetch_site or None},
        )


def check_auth(config: ServerConfig, req: Request) -> str:
    """The request's role (Rule 2): FULL (the token, or no token configured) or READER (the
    read-only token); 401 `unauthorized` for anything else."""
    token = config.token
    if not token or (req.path == "/" and req.method == "GET"):
        return FULL  # `GET /` is the static page (Rule 2): it holds no data
    given = req.headers.get("authorization", "")
    scheme, _, value = given.partition(" ")
    presented = value.strip().encode()
    full = hmac.compare_digest(presented, token.encode())
    reader = bool(config.read_token) and hmac.compare_digest(
        presented, (config.read_token or "").encode())
    if scheme.lower() == "bearer" and (full or reader):
        return FULL if full else READER
    raise TopicsError(
        "unauthorized",
        "missing or wrong bearer token (send 'Authorization: Bearer <token>')",
    )


def check_role(role: str, handler: str, req: Request) -> None:
    """403 `forbidden` (`detail.reason` "read_only_token") for a route the read-only token may
    not use (Rule 5)."""
    if role == READER and handler not in READER_HANDLERS:
        raise TopicsError(
            "forbidden",
            f"the read-only token (--read-token) may read, watch and diff topics and routers "
            f"but not {req.method} {req.path}: use the full token (--token) to write, delete, "
            f"claim, ack or configure",
            {"reason": "read_only_token", "method": req.method, "path": req.path},
        )


def check_replica(primary: tuple[str, int] | None, handler: str, req: Request) -> None:
    """Rule 6: 409 `read_only_replica` for a route that changes data, on a replica."""
    if primary is not None and handler not in READER_HANDLERS and handler != "publish":
        raise TopicsError(
            "read_only_replica",
            f"this server is a read-only replica: send {req.method} {req.path} to its primary "
            f"(RESP {primary[0]}:{primary[1]}; its HTTP port is the primary's own)",
            {"primary": f"{primary[0]}:{primary[1]}", "method": req.method, "path": req.path},
        )


def check_content_type(req: Request, raw_ok: bool = False) -> None:
    """415 unless a body is JSON; `raw_ok` (pub/sub publish) also takes
    `application/octet-stream`, which, unlike text/plain, no browser sends cross-site
    without a CORS preflight this server never answers."""
    if not req.body or req.method in ("GET", "HEAD"):
        return
    given = req.headers.get("content-type")
    mime = given.split(";", 1)[0].strip().lower() if given else ""
    if mime != "application/json" and not (raw_ok and mime == "application/octet-stream"):
        raise TopicsError(
            "unsupported_media_type",
            f"a request body must be JSON sent with 'Content-Type: application/json' "
            f"(got {given!r})" if given else
            "a request body must be JSON sent with 'Content-Type: application/json' "
            "(the request has no Content-Type)",
            {"content_type": given},
        )
