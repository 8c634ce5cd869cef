"""Routing as data: a table of path patterns, each with its methods and handler names.

Rule 1: `ROUTES` is the whole HTTP surface; adding a route is adding a row.
Rule 2: a path that matches no pattern is 404 `not_found`; a path that matches with the wrong
method is 405 `method_not_allowed` with an `Allow` header listing the methods it has.
Rule 3: `{topic}` segments are percent-decoded and validated here (400 `invalid_topic_name`),
so a handler only ever sees a well-formed name. `{router}` segments are percent-decoded; the
engine checks a router name (400 `invalid_request`) before it looks it up. A `{channel}`
segment is percent-decoded to bytes (a pub/sub channel is any bytes), handed on as the latin-1
text of those bytes (topicsrv/http/channels.py).
Rule 4: a route of a feature this version does not ship may match on purpose with the handler
`UNAVAILABLE` and answer 404 `not_found` saying so, instead of a generic "no such route"
(none today: routers shipped in issue 13).
Rule 5: only canonical paths match. The path is the raw request target (not percent-decoded);
an empty segment (`//`, a trailing `/`), a dot segment (`.`, `..`, also percent-encoded) or a
literal segment spelled any other way (`%2F`, `%76`, other letter case) matches nothing and is
404. So no spelling of a path reaches a handler as an alias of another route, and what the
auth check saw is exactly what is routed.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import unquote, unquote_to_bytes

from topicsrv.engine.config import check_topic_name
from topicsrv.errors import TopicsError

UNAVAILABLE = "unavailable"


@dataclass(frozen=True, slots=True)
class Route:
    pattern: tuple[str, ...]  # path segments; "{name}" captures one segment
    methods: dict[str, str]  # method -> handler name

    def allow(self) -> str:
        return ", ".join(sorted(self.methods))


def _r(path: str, **methods: str) -> Route:
    return Route(tuple(part for part in path.strip("/").split("/") if part), methods)


ROUTES: tuple[Route, ...] = (
    _r("/", GET="status_page"),
    _r("/v0/status", GET="status"),
    _r("/v0/status/stream", GET="status_stream"),
    _r("/v0/health", GET="health"),
    _r("/v0/ready", GET="ready"),
    _r("/metrics", GET="metrics"),
    _r("/v0/openapi.json", GET="openapi"),
    _r("/v0/topics", GET="list_topics"),
    _r("/v0/topics/{topic}", GET="get_topic", PUT="put_topic", DELETE="delete_topic",
       POST="write"),
    _r("/v0/topics/{topic}/diff", POST="diff"),
    _r("/v0/topics/{topic}/delete", POST="delete_records"),
    _r("/v0/topics/{topic}/watch", GET="watch_topic"),
    _r("/v0/watch", GET="watch_many"),
    _r("/v0/topics/{topic}/claim", POST="claim"),
    _r("/v0/topics/{topic}/ack", POST="ack"),
    _r("/v0/topics/{topic}/nack", POST="nack"),
    _r("/v0/topics/{topic}/extend", POST="extend"),
    _r("/v0/work", GET="work"),
    _r("/v0/routers", GET="list_routers"),
    _r("/v0/routers/{router}", GET="get_router", PUT="put_router", DELETE="delete_router"),
    _r("/v0/channels/subscribe", GET="subscribe_patterns"),
    _r("/v0/channels/{channel}/publish", POST="publish"),
    _r("/v0/channels/{channel}/subscribe", GET="subscribe_channel"),
)


def route_labels(routes: tuple[Route, ...] = ROUTES) -> dict[str, str]:
    """handler name -> "METHOD /path/{pattern}", the `route` label of the latency histogram."""
    return {handler: f"{method} /{'/'.join(route.pattern)}"
            for route in routes for method, handler in route.methods.items()}


@dataclass(frozen=True, slots=True)
class Match:
    handler: str
    params: dict[str, str]


_DOTS = frozenset({".", ".."})


def segments(path: str) -> list[str] | None:
    """The raw segments of a canonical path ("/a/b" -> ["a", "b"]), None if not canonical."""
    if not path.startswith("/"):
        return None  # "*", absolute-form targets, garbage
    if path == "/":
        return []
    parts = path[1:].split("/")
    for part in parts:
        if not part or part in _DOTS or unquote(part) in _DOTS:
            return None
    return parts


def _bind(pattern: tuple[str, ...], parts: list[str]) -> dict[str, str] | None:
    if len(pattern) != len(parts):
        return None
    params: dict[str, str] = {}
    for want, got in zip(pattern, parts, strict=True):
        if want.startswith("{"):
            name = want[1:-1]  # a channel is any bytes: latin-1 text of its bytes (Rule 3)
            params[name] = unquote_to_bytes(got).decode("latin-1") if name == "channel" \
                else unquote(got)
        elif want != got:
            return None
    return params


def resolve(method: str, path: str, routes: tuple[Route, ...] = ROUTES) -> Match:
    """The handler for (method, raw path) or a TopicsError (404 / 405 / 400 bad name)."""
    parts = segments(path)
    if parts is None:
        raise TopicsError("not_found", f"no route for {method} {path} (not a canonical path)",
                          {"path": path})
    for route in routes:
        params = _bind(route.pattern, parts)
        if params is None:
            continue
        handler = route.methods.get(method)
        if handler is None:
            err = TopicsError(
                "method_not_allowed",
                f"method {method} is not allowed on {path} (allowed: {route.allow()})",
                {"allow": sorted(route.methods)},
            )
            raise err
        if handler == UNAVAILABLE:
            raise TopicsError(
                "not_found",
                f"{path}: this feature is not available in this version of topicsrv",
                {"path": path},
            )
        if "topic" in params:
            check_topic_name(params["topic"])
        return Match(handler, params)
    raise TopicsError("not_found", f"no route for {method} {path}", {"path": path})
