"""One error family for every layer.

Rule 1: an error knows its HTTP status, its stable `code` and its RESP prefix; the fronts
translate it at the edge and nowhere else.
Rule 2: raising an error never leaves half-applied state behind; the engine validates a whole
request before it mutates anything.
"""

from __future__ import annotations

from typing import Any

# code -> HTTP status. The table is the contract of API.md section 0.
STATUS_BY_CODE: dict[str, int] = {
    "invalid_request": 400,
    "invalid_topic_name": 400,
    "record_too_large": 400,
    "invalid_json": 400,
    "unauthorized": 401,
    "forbidden": 403,
    "denied": 403,
    "topic_not_found": 404,
    "router_not_found": 404,
    "not_found": 404,
    "method_not_allowed": 405,
    "topic_exists_incompatible": 409,
    "key_type_conflict": 409,
    "read_only_replica": 409,
    "router_cycle": 409,
    "router_dest_fan_in": 409,
    "not_a_queue": 409,
    "seq_exhausted": 409,
    "body_too_large": 413,
    "unsupported_media_type": 415,
    "topic_full": 422,
    "not_ready": 503,
    "shutting_down": 503,
    "too_many_clients": 503,
    "no_replicas": 503,
    "busy": 503,
    "insufficient_storage": 507,
    "insufficient_memory": 507,
    "internal": 500,
}


class TopicsError(Exception):
    """A client-visible failure with a stable code."""

    def __init__(
        self,
        code: str,
        message: str,
        detail: dict[str, Any] | None = None,
        *,
        resp_prefix: str = "ERR",
    ) -> None:
        super().__init__(message)
        if code not in STATUS_BY_CODE:
            raise ValueError(f"unknown error code {code!r}")
        self.code = code
        self.message = message
        self.detail = detail
        self.resp_prefix = resp_prefix

    @property
    def status(self) -> int:
        return STATUS_BY_CODE[self.code]

    def to_json(self) -> dict[str, Any]:
        err: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.detail is not None:
            err["detail"] = self.detail
        return {"error": err}

    def resp_line(self) -> str:
        """The text after '-' in a RESP error reply (no CRLF)."""
        text = self.message.replace("\r", " ").replace("\n", " ")
        return f"{self.resp_prefix} {text}"

    def __repr__(self) -> str:
        return f"TopicsError({self.code!r}, {self.message!r})"


def invalid(message: str, **detail: Any) -> TopicsError:
    return TopicsError("invalid_request", message, detail or None)


def not_found(topic: str) -> TopicsError:
    return TopicsError("topic_not_found", f"topic '{topic}' does not exist", {"topic": topic})


class StartupError(Exception):
    """The server cannot start (e.g. an unreadable data dir): the message tells the operator
    which file and what to do; the CLI prints it and exits non-zero, without a traceback."""
