"""Request bodies and query strings into typed values, or a 400 naming the field.

Rule 1: a body is JSON (orjson); bytes that do not parse are 400 `invalid_json`; an empty body
is an empty object.
Rule 3: a user's numbers are never changed silently. orjson turns an integer outside
[-2^63, 2^64-1] into a float; a body holding one is refused (400 `invalid_request`, the field
named) instead. The scan for such integers runs at C speed (`translate` + `find`); only a body
with a run of 19+ digits is looked at more closely.
Rule 2: every accessor checks the type and range of one field and raises 400
`invalid_request` with `detail.field`; unknown body fields are refused, never ignored, so a
typo cannot silently change what a request does.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

from topicsrv.engine.core import U64_MAX
from topicsrv.engine.log.records import MAX_NODE_BYTES
from topicsrv.errors import TopicsError, invalid

I64_MIN = -(1 << 63)
_DIGITS = bytes(0x30 if 0x30 <= i <= 0x39 else 0x2E for i in range(256))  # digit -> "0", else "."
_LONG_RUN = b"0" * 19  # 2^63 has 19 digits: anything shorter fits
_TOKEN_BEFORE = frozenset(b"[:, \t\r\n-")
_TOKEN_AFTER = frozenset(b",]} \t\r\n")


def json_body(body: bytes) -> Any:
    if not body.strip():
        return {}
    try:
        value = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise TopicsError("invalid_json", f"request body is not valid JSON: {exc}") from None
    if may_hold_wide_int(body):
        refuse_wide_ints(body)
    return value


def may_hold_wide_int(body: bytes) -> bool:
    """True if a bare integer token outside the 64-bit range may occur in `body`. Digit runs
    inside strings or after '.'/'e' can make this say True; never False for a real one."""
    shape = body.translate(_DIGITS)
    start = shape.find(_LONG_RUN)
    while start >= 0:
        end = start + len(_LONG_RUN)
        while end < len(shape) and shape[end] == 0x30:
            end += 1
        before = body[start - 1] if start else 0x20
        after = body[end] if end < len(body) else 0x20
        if before in _TOKEN_BEFORE and after in _TOKEN_AFTER:
            sign = -1 if before == 0x2D else 1
            if end - start > 25 or not I64_MIN <= sign * int(body[start:end]) <= U64_MAX:
                return True
        start = shape.find(_LONG_RUN, end)
    return False


def refuse_wide_ints(body: bytes) -> None:
    """Find the integer outside the 64-bit range (exact, with the stdlib parser) and refuse."""
    try:
        value = json.loads(body)
    except (ValueError, RecursionError):  # e.g. more than 4300 digits
        raise invalid("the body holds an integer outside the 64-bit range "
                      f"({I64_MIN}..{U64_MAX}); send it as a string", field="body") from None
    stack: list[tuple[Any, str]] = [(value, "")]
    while stack:
        item, path = stack.pop()
        if isinstance(item, dict):
            stack.extend((v, f"{path}.{k}" if path else str(k)) for k, v in item.items())
        elif isinstance(item, list):
            stack.extend((v, f"{path}[{i}]") for i, v in enumerate(item))
        elif isinstance(item, int) and not isinstance(item, bool) and not I64_MIN <= item <= U64_MAX:
            field = path or "body"
            raise invalid(f"{field} is the integer {str(item)[:30]}{'...' if len(str(item)) > 30 else ''}, "
                          f"outside the 64-bit range ({I64_MIN}..{U64_MAX}) this server stores "
                          "exactly; send it as a string", field=field)


def json_object(body: bytes, allowed: frozenset[str] | None = None) -> dict[str, Any]:
    return object_fields(json_body(body), allowed)


def object_fields(obj: Any, allowed: frozenset[str] | None = None) -> dict[str, Any]:
    """A parsed body as an object holding only `allowed` fields, else 400."""
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
    value = digits(text)
    if value is None or not lo <= value <= hi:
        raise invalid(f"query parameter '{key}' must be an integer between {lo} and {hi}",
                      field=key)
    return value


def digits(text: str) -> int | None:
    """A u64 written in ASCII digits, else None. Not `str.isdigit` + `int`: isdigit takes "²"
    (which `int` refuses) and "٣", and `int` refuses more than 4300 digits."""
    if not (text.isascii() and text.isdigit()) or len(text) > 20:
        return None
    value = int(text)
    return value if value <= U64_MAX else None


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
