"""Request bodies and query strings into typed values, or a 400 naming the field.

Rule 1: a body is JSON (orjson); bytes that do not parse are 400 `invalid_json`; an empty body
is an empty object.
Rule 2: every accessor checks the type and range of one field and raises 400
`invalid_request` with `detail.field`; unknown body fields are refused, never ignored, so a
typo cannot silently change what a request does.
"""

from __future__ import annotations

from typing import Any

import orjson

from topicsrv.engine.core import U64_MAX
from topicsrv.engine.records import MAX_NODE_BYTES
from topicsrv.errors import TopicsError, invalid


def json_body(body: bytes) -> Any:
    if not body.strip():
        return {}
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise TopicsError("invalid_json", f"request body is not valid JSON: {exc}") from None


def json_object(body: bytes, allowed: frozenset[str] | None = None) -> dict[str, Any]:
    obj = json_body(body)
    if not isinstance(obj, dict):
        raise invalid("request body must be a JSON object", field="body")
    if allowed is not None:
        extra = sorted(obj.keys() - allowed)
        if extra:
            raise invalid(
                f"unknown field '{extra[0]}' (allowed: {', '.join(sorted(allowed))})",
                field=extra[0],
            )
    return obj


def opt_int(obj: dict[str, Any], key: str, lo: int = 0, hi: int = U64_MAX) -> int | None:
    value = obj.get(key)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
        raise invalid(f"'{key}' must be an integer between {lo} and {hi}", field=key)
    return value


def opt_bool(obj: dict[str, Any], key: str) -> bool | None:
    value = obj.get(key)
    if value is None:
        return None
    if not isinstance(value, bool):
        raise invalid(f"'{key}' must be true or false", field=key)
    return value


def opt_str(obj: dict[str, Any], key: str, max_len: int = 1024) -> str | None:
    value = obj.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not 0 < len(value) <= max_len:
        raise invalid(f"'{key}' must be a non-empty string of at most {max_len} characters",
                      field=key)
    return value


def nodes(value: Any, key: str = "node") -> list[str] | None:
    """A reader node filter: a string or a list of strings."""
    if value is None:
        return None
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(x, str) for x in items):
        raise invalid(f"'{key}' must be a string or a list of strings", field=key)
    for x in items:
        if len(x.encode("utf-8", "surrogatepass")) > MAX_NODE_BYTES:
            raise invalid(f"'{key}' values are at most {MAX_NODE_BYTES} bytes", field=key)
    return items or None


def query_int(query: dict[str, str], key: str, lo: int = 0, hi: int = U64_MAX) -> int | None:
    text = query.get(key)
    if text is None or text == "":
        return None
    if not text.isdigit() or not lo <= int(text) <= hi:
        raise invalid(f"query parameter '{key}' must be an integer between {lo} and {hi}",
                      field=key)
    return int(text)


def query_bool(query: dict[str, str], key: str, default: bool) -> bool:
    text = query.get(key)
    if text is None or text == "":
        return default
    lowered = text.lower()
    if lowered in ("true", "1", "yes"):
        return True
    if lowered in ("false", "0", "no"):
        return False
    raise invalid(f"query parameter '{key}' must be true or false", field=key)
