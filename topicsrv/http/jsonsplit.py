"""Decoding a large write body in slices, so other clients are served in between.

One `orjson.loads` of a 64 MiB body holds the event loop for about a second (it cannot be
interrupted, and it holds the GIL, so a thread does not help). A write body is almost all one
array, `"records"`, so it is parsed a slice of records at a time with a checkpoint in between.

Rule 1: the result is exactly `params.json_body(body)` (or the same 400): every byte is parsed
by orjson, and at the slightest doubt the whole body is parsed in one piece instead.
Rule 2: a slice ends at a guessed boundary between two records (`},{"data":`, or another record
key); the guess is accepted only if `[` + slice + `]` parses. A guess inside a record leaves a
bracket unclosed and cannot parse (and inside a string the guess's unescaped quote cannot
occur), so a wrong guess costs a retry, never a wrong value.
Rule 3: what was sliced off is checked to be the front of the "records" value orjson keeps: the
rest of the body is parsed with a marker string as the array's first element, and the marker
must come back as `records[0]` (this also catches duplicate "records" keys).
Rule 4: at most MAX_MISSES wrong guesses, plus one per SLICE_BYTES of body; then the rest is
parsed in one piece. A hostile body costs at most about twice one parse, never quadratic.
"""

from __future__ import annotations

import re
from typing import Any

import orjson
import trio

from topicsrv.http import params as p

SPLIT_MIN_BYTES = 2 << 20  # smaller bodies are parsed in one piece (a few ms)
SLICE_BYTES = 1 << 20
MAX_MISSES = 8
_MARKER_TEXT = b'"\\u0000topicsrv:sliced-records\\u0000"'
_MARKER = orjson.loads(_MARKER_TEXT)
_RECORDS = re.compile(rb'"records"\s*:\s*\[')
_BOUNDARY = re.compile(rb'\}\s*,\s*\{\s*"(?:data|tag|node|meta)"\s*:')


async def loads_write_body(body: bytes) -> Any:
    """`params.json_body(body)`, with checkpoints between slices of a large records array."""
    start = _records_start(body)
    if start is None:
        return p.json_body(body)
    items: list[Any] = []
    wide = False  # an integer outside 64 bits may be in the body (params Rule 3)
    pos = start  # first byte of the next record not yet parsed
    search = pos + SLICE_BYTES
    misses = 0
    allowed = MAX_MISSES + len(body) // SLICE_BYTES
    while misses <= allowed:
        guess = _BOUNDARY.search(body, search)
        if guess is None:
            break
        piece = body[pos:guess.start() + 1]  # up to the '}' that may end a record
        try:
            items.extend(orjson.loads(b"[" + piece + b"]"))
        except orjson.JSONDecodeError:
            misses += 1
            search = guess.end()
            continue
        wide = wide or p.may_hold_wide_int(piece)
        pos = body.index(b"{", guess.start() + 1)  # the '{' of the next record
        search = pos + SLICE_BYTES
        await trio.lowlevel.checkpoint()
    if not items:
        return p.json_body(body)
    rest = body[:start] + _MARKER_TEXT + b"," + body[pos:]
    try:
        top = orjson.loads(rest)
    except orjson.JSONDecodeError:
        return p.json_body(body)  # the exact error for the exact body
    records = top.get("records") if isinstance(top, dict) else None
    if not isinstance(records, list) or not records or records[0] != _MARKER:
        return p.json_body(body)
    if wide or p.may_hold_wide_int(rest):
        p.refuse_wide_ints(body)
    items.extend(records[1:])
    top["records"] = items
    return top


def _records_start(body: bytes) -> int | None:
    """Where the first record of the "records" array starts, for a large body."""
    if len(body) < SPLIT_MIN_BYTES:
        return None
    head = _RECORDS.search(body)
    if head is None or body[head.start() - 1:head.start()] == b"\\":
        return None
    return head.end()
