"""HTTP/1.1 framing on h11, sans-IO: bytes in, `Request`s out, response bytes back.

Rule 1: nothing here touches a socket. The adapter feeds `receive_data`, pulls events with
`next_event`, and writes whatever `data_to_send` returns, in order.
Rule 2: a body larger than `max_body` is refused from its Content-Length before any of it is
buffered, and a chunked body is refused the moment its running total crosses the limit. A
refusal (`Refusal`) always closes the connection, because the rest of the body is unread.
Rule 3: requests are surfaced strictly one at a time; the next one (pipelined bytes already
buffered included) is parsed only after the current response was completed, so answers go
out in request order.
Rule 4: a malformed request is a `Refusal` (400), never an exception out of this module.
Rule 5: a large response body is never copied whole: `respond_pieces` yields the head and then
the body as it is (bytes) or, for a `Joined` body, in pieces of about PIECE_BYTES joined on the
fly, so a response costs at most one piece beyond the records it references.
Rule 6: `next_event` handles at most EVENTS_PER_CALL h11 events per call and then answers
YIELD (call again after a checkpoint), so a body of many tiny chunks cannot hold the loop; the
body is gathered in one bytearray, not one object per chunk.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from urllib.parse import parse_qsl

import h11
import orjson

from topicsrv.errors import TopicsError

MAX_HEADER_BYTES = 64 * 1024
JSON_TYPE = b"application/json"
PIECE_BYTES = 256 * 1024  # a body larger than this goes out in pieces, not one buffer
EVENTS_PER_CALL = 256


@dataclass(frozen=True, slots=True)
class Joined:
    """A body equal to `prefix + sep.join(items) + suffix`, never built whole (Rule 5)."""

    prefix: bytes
    items: Sequence[bytes]
    sep: bytes
    suffix: bytes

    def __len__(self) -> int:
        seps = len(self.sep) * max(0, len(self.items) - 1)
        return len(self.prefix) + sum(map(len, self.items)) + seps + len(self.suffix)

    def pieces(self, size: int = PIECE_BYTES) -> Iterator[bytes]:
        """The body in order, each piece about `size` bytes (one item may be larger)."""
        items, sep = self.items, self.sep
        out: list[bytes] = [self.prefix]
        buffered = len(self.prefix)
        for i, item in enumerate(items):
            if i:
                out.append(sep)
            out.append(item)
            buffered += len(item) + len(sep)
            if buffered >= size:
                yield b"".join(out)
                out, buffered = [], 0
        out.append(self.suffix)
        yield b"".join(out)

    def to_bytes(self) -> bytes:
        return b"".join((self.prefix, self.sep.join(self.items), self.suffix))


@dataclass(slots=True)
class Request:
    method: str
    target: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]  # lower-cased names; repeated headers joined with ", "
    body: bytes = b""
    local_host: str | None = None  # the address the connection arrived on (Host check)
    repeated: str | None = None  # a query parameter given more than once (refused: app.py)


@dataclass(slots=True)
class Response:
    status: int
    body: bytes | Joined = b""
    content_type: bytes = JSON_TYPE
    headers: list[tuple[bytes, bytes]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Refusal:
    """The request cannot be served; send `data` and close the connection."""

    status: int
    data: bytes


class NeedData:
    pass


class Closed:
    pass


class Yield:
    pass


NEED_DATA = NeedData()
CLOSED = Closed()
YIELD = Yield()

Event = Request | Refusal | NeedData | Closed | Yield

REASONS = {
    200: b"OK", 201: b"Created", 400: b"Bad Request", 401: b"Unauthorized", 403: b"Forbidden",
    404: b"Not Found", 405: b"Method Not Allowed", 409: b"Conflict", 413: b"Content Too Large",
    415: b"Unsupported Media Type", 422: b"Unprocessable Content", 500: b"Internal Server Error", 503: b"Service Unavailable",
    507: b"Insufficient Storage",
}


def error_response(err: TopicsError, headers: list[tuple[bytes, bytes]] | None = None) -> Response:
    return Response(err.status, orjson.dumps(err.to_json()), headers=headers or [])


def refusal(err: TopicsError) -> Refusal:
    """A complete, hand-framed error response that ends the connection."""
    body = orjson.dumps(err.to_json())
    head = b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\ncontent-length: %d\r\n" \
        b"connection: close\r\n\r\n" % (err.status, REASONS.get(err.status, b"Error"), len(body))
    return Refusal(err.status, head + body)


def split_target(target: str) -> tuple[str, dict[str, str], str | None]:
    """(raw path, decoded query, the first query parameter given twice or None). The path
    stays percent-encoded: the router decodes only the segments it captures, so `%2F` can
    never become a path separator (router Rule 5)."""
    path, _, qs = target.partition("?")
    query: dict[str, str] = {}
    repeated = None
    for key, value in parse_qsl(qs, keep_blank_values=True):
        if key in query and repeated is None:
            repeated = key
        query.setdefault(key, value)
    return path, query, repeated


class ServerProtocol:
    """One server-side HTTP/1.1 connection (keep-alive, pipelining), no I/O."""

    def __init__(self, max_body: int, local_host: str | None = None) -> None:
        self.max_body = max_body
        self.local_host = local_host
        self.conn = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEADER_BYTES)
        self._out: list[bytes] = []
        self._head: h11.Request | None = None
        self._body = bytearray()
        self.closed = False
        self._method = b""  # of the request being answered (b"" between requests)
        self._answering = False  # the first byte of the current answer was handed out

    # ---- input -------------------------------------------------------------------------

    def receive_data(self, data: bytes | bytearray) -> None:
        """Feed bytes from the peer; b"" means the peer closed its side."""
        try:
            self.conn.receive_data(data)  # type: ignore[arg-type]  # h11 takes any bytes-like
        except RuntimeError:  # data after close: nothing more will be parsed
            pass

    def next_event(self) -> Event:
        """The next complete request, a refusal, NEED_DATA, CLOSED, or YIELD (Rule 6)."""
        for _ in range(EVENTS_PER_CALL):
            try:
                event = self.conn.next_event()
            except h11.RemoteProtocolError as exc:
                return self._refuse(TopicsError("invalid_request", f"malformed HTTP request: {exc}"))
            if event is h11.NEED_DATA or event is h11.PAUSED:
                if self._head is not None and self.conn.client_is_waiting_for_100_continue:
                    self._out.append(self.conn.send(h11.InformationalResponse(status_code=100, headers=[])))
                return NEED_DATA
            if isinstance(event, h11.ConnectionClosed):
                return CLOSED
            if isinstance(event, h11.Request):
                self._head = event
                self._method = event.method
                self._body = bytearray()
                length = _content_length(event)
                if length is not None and length > self.max_body:
                    return self._refuse(_too_large(length, self.max_body))
            elif isinstance(event, h11.Data):
                if len(self._body) + len(event.data) > self.max_body:
                    return self._refuse(_too_large(len(self._body) + len(event.data),
                                                   self.max_body))
                self._body += event.data
            elif isinstance(event, h11.EndOfMessage):
                head = self._head
                assert head is not None
                self._head = None
                body = bytes(self._body)
                self._body = bytearray()
                return _request(head, body, self.local_host)
        return YIELD

    def _refuse(self, err: TopicsError) -> Refusal:
        self.closed = True
        return refusal(err)

    # ---- output ------------------------------------------------------------------------

    def data_to_send(self) -> bytes:
        out = b"".join(self._out)
        self._out.clear()
        return out

    def respond(self, resp: Response) -> bytes:
        """Bytes of a complete response; afterwards the next request may be read."""
        return b"".join(self.respond_pieces(resp))

    def respond_pieces(self, resp: Response) -> Iterator[bytes]:
        """A complete response as pieces to write in order (Rule 5); consume all of them."""
        body = resp.body
        headers = [(b"content-type", resp.content_type),
                   (b"content-length", b"%d" % len(body)), *resp.headers]
        head = self.conn.send(h11.Response(status_code=resp.status, headers=headers,
                                           reason=REASONS.get(resp.status, b"")))
        self._answering = True
        if self._method == b"HEAD":  # the headers of the answer, never its body
            body = b""
        if isinstance(body, bytes) and len(body) <= PIECE_BYTES:
            out = head + self.conn.send(h11.Data(data=body)) if body else head
            out += self.conn.send(h11.EndOfMessage())
            self._next_cycle()
            yield out
            return
        yield head
        for piece in (body.pieces() if isinstance(body, Joined) else (body,)):
            yield from self.conn.send_with_data_passthrough(h11.Data(data=piece)) or ()
        end = self.conn.send(h11.EndOfMessage())  # b"" under content-length framing
        self._next_cycle()
        if end:
            yield end

    def internal_error(self) -> bytes | None:
        """A hand-framed 500 `internal` for a request whose answer has not started (the
        connection is then closed), or None when part of an answer may already be out."""
        if self._answering or not self._method:
            return None
        self.closed = True
        self._method = b""
        return refusal(TopicsError("internal", "internal server error (logged)")).data

    def start_stream(self, status: int, headers: list[tuple[bytes, bytes]]) -> bytes:
        """Headers of a streamed (chunked) response such as SSE."""
        self._answering = True
        return self.conn.send(h11.Response(status_code=status, headers=headers,
                                           reason=REASONS.get(status, b"")))

    def stream_data(self, data: bytes) -> bytes:
        return self.conn.send(h11.Data(data=data))

    def end_stream(self) -> bytes:
        out = self.conn.send(h11.EndOfMessage())
        self._next_cycle()
        return out

    def _next_cycle(self) -> None:
        self._method = b""
        self._answering = False
        if self.conn.our_state is h11.DONE and self.conn.their_state is h11.DONE:
            self.conn.start_next_cycle()
        elif self.conn.our_state in (h11.MUST_CLOSE, h11.CLOSED):
            self.closed = True

    @property
    def wants_close(self) -> bool:
        return self.closed or self.conn.our_state in (h11.MUST_CLOSE, h11.CLOSED)


def _content_length(head: h11.Request) -> int | None:
    for name, value in head.headers:
        if name == b"content-length":
            return int(value)  # h11 has validated it
    return None


def _too_large(size: int, limit: int) -> TopicsError:
    return TopicsError(
        "body_too_large",
        f"request body of {size} bytes is over the limit of {limit} bytes",
        {"limit": limit},
    )


def _request(head: h11.Request, body: bytes, local_host: str | None) -> Request:
    headers: dict[str, str] = {}
    for name, value in head.headers:
        key = name.decode("latin-1")
        text = value.decode("latin-1")
        headers[key] = f"{headers[key]}, {text}" if key in headers else text
    target = head.target.decode("latin-1")
    path, query, repeated = split_target(target)
    return Request(head.method.decode("ascii", "replace"), target, path, query, headers, body,
                   local_host, repeated)
