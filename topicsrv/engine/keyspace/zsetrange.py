"""Scores and ranges of sorted sets as Redis 7.0 reads them (t_zset.c), and the positions a
range covers in a value. Sans-IO.

Rule 1 (a score argument: ZADD, ZINCRBY, WEIGHTS): Redis's getDoubleFromObject: the whole
argument read by C's strtod, no leading space, not NaN, not out of range (an overflow, or a
nonzero number that rounds to zero); `inf`, `+inf`, `-inf`, `infinity` and hex floats pass.
Rule 2 (a score bound: ZRANGEBYSCORE, ZCOUNT, ...): zslParseRange: an optional `(` (exclusive),
then strtod of the rest, which must be consumed whole and not be NaN; strtod skips leading
space, an empty rest is 0 and an overflow is an infinity.
Rule 3 (a lex bound: ZRANGEBYLEX, ZLEXCOUNT, ...): `-` (before every member), `+` (after
every member), or `[member` / `(member` (inclusive / exclusive); anything else is refused.
Rule 4: a range answers positions [lo, hi) of the value's order (zsetvalue.py Rule 1), found
by bisection; an empty or inverted range is lo >= hi. A lex range is meaningful when every
member has the same score, as in Redis.
"""

from __future__ import annotations

import math
import re
from typing import Final

from topicsrv.engine.keyspace.zsetvalue import ZsetValue

_SPACE: Final = b" \t\n\v\f\r"
_DEC: Final = re.compile(rb"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_HEX: Final = re.compile(rb"[+-]?0[xX](?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)"
                         rb"(?:[pP][+-]?\d+)?")
_INF: Final = re.compile(rb"[+-]?inf(?:inity)?", re.IGNORECASE)
_NAN: Final = re.compile(rb"[+-]?nan(?:\([0-9A-Za-z_]*\))?", re.IGNORECASE)
MINUS_INF: Final = -math.inf
PLUS_INF: Final = math.inf


def strtod(raw: bytes) -> tuple[float, bool] | None:
    """The double C's strtod reads from the whole of `raw` (after leading space) and whether
    it was out of range (ERANGE); None when strtod would stop before the end."""
    if not raw:
        return 0.0, False  # nothing to read: strtod answers 0 and stops at the end
    text = raw.lstrip(_SPACE)
    if _DEC.fullmatch(text):
        value = float(text)
        if math.isinf(value):
            return value, True
        if value == 0.0 and any(48 < c <= 57 for c in text.split(b"e")[0].split(b"E")[0]):
            return value, True  # a nonzero number that rounds to zero
        return value, False
    if _HEX.fullmatch(text):
        sign = -1.0 if text[:1] == b"-" else 1.0
        try:
            value = float.fromhex(text.lstrip(b"+-").decode("ascii"))
        except OverflowError:
            return sign * math.inf, True
        return sign * value, False
    if _INF.fullmatch(text):
        return (-math.inf if text[:1] == b"-" else math.inf), False
    if _NAN.fullmatch(text):
        return math.nan, False
    return None


def _plain(raw: bytes) -> float | None:
    """The value of `raw` when it is a plain decimal integer of at most 15 digits (a double
    holds it exactly, as strtod reads it) or `-inf`/`+inf`: the common arguments, read
    without the regular expressions; None for anything else."""
    minus = raw[:1] == b"-"
    body = raw[1:] if minus else raw
    if 0 < len(body) <= 15 and body.isdigit() and body.isascii():
        value = float(int(body))
        return -value if minus else value  # `-0` is -0.0, as strtod reads it
    if raw == b"-inf":
        return MINUS_INF
    if raw == b"+inf" or raw == b"inf":
        return PLUS_INF
    return None


def parse_score(raw: bytes) -> float | None:
    """Rule 1; None when Redis answers "value is not a valid float"."""
    fast = _plain(raw)
    if fast is not None:
        return fast
    if not raw or raw[:1] in (b" ", b"\t", b"\n", b"\v", b"\f", b"\r"):
        return None
    got = strtod(raw)
    if got is None or got[1] or math.isnan(got[0]):
        return None
    return got[0]


def parse_bound(raw: bytes) -> tuple[float, bool] | None:
    """Rule 2: (value, exclusive), None when it is not a valid bound."""
    exclusive = raw[:1] == b"("
    fast = _plain(raw[1:] if exclusive else raw)
    if fast is not None:
        return fast, exclusive
    got = strtod(raw[1:] if exclusive else raw)
    if got is None or math.isnan(got[0]):
        return None
    return got[0], exclusive


def parse_lex(raw: bytes) -> tuple[int, bytes, bool] | None:
    """Rule 3: (kind: -1 for `-`, 1 for `+`, 0 for a member, member, exclusive)."""
    if raw == b"-":
        return -1, b"", False
    if raw == b"+":
        return 1, b"", False
    if raw[:1] == b"[":
        return 0, raw[1:], False
    if raw[:1] == b"(":
        return 0, raw[1:], True
    return None


def score_span(zv: ZsetValue, lo: tuple[float, bool], hi: tuple[float, bool]) -> tuple[int, int]:
    """Rule 4: the positions of the members with lo <= score <= hi (each end exclusive when
    its flag says so)."""
    start = zv.bound(lo[0], lo[1], False)
    stop = zv.bound(hi[0], not hi[1], False)
    return start, max(start, stop)


def lex_span(zv: ZsetValue, lo: tuple[int, bytes, bool],
             hi: tuple[int, bytes, bool]) -> tuple[int, int]:
    """Rule 4 for a lex range."""
    n = len(zv)
    start = 0 if lo[0] < 0 else n if lo[0] > 0 else zv.bound(lo[1], lo[2], True)
    stop = n if hi[0] > 0 else 0 if hi[0] < 0 else zv.bound(hi[1], not hi[2], True)
    return start, max(start, stop)


def rank_span(start: int, stop: int, n: int) -> tuple[int, int]:
    """ZRANGE's and ZREMRANGEBYRANK's index rules: negative from the end, clamped; positions
    [lo, hi), empty when start > stop or past the end."""
    if start < 0:
        start += n
    if stop < 0:
        stop += n
    start = max(start, 0)
    if start > stop or start >= n:
        return 0, 0
    return start, min(stop, n - 1) + 1
