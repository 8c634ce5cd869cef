"""Redis glob patterns matched in linear time: KEYS, SCAN MATCH, CONFIG GET (and router
filters when routers arrive).

The language is redis-server's `stringmatchlen` (util.c), byte for byte: `*` any run of bytes,
`?` any one byte, `[abc]` `[^abc]` `[a-z]` a class, `\\x` the byte x (a lone trailing `\\`
is itself). Redis's quirks are kept: a range is compared on SIGNED chars (so bytes >= 0x80
sort below `\\x00`), `[a-]` is the range `a`..`]` and the class goes on past that `]`, an
unterminated class takes the rest of the pattern (`[^` alone matches any one byte, `[` alone
matches nothing), and an empty string matches only the empty pattern (KEYS and SCAN treat `*`
alone as "everything" before matching, as Redis does).

Rule 1: matching never backtracks exponentially. A pattern compiles once (cached) into
fixed-width segments separated by `*`: `H*M1*M2*...*T`. Every token of a segment matches
exactly one byte, so a name matches iff H matches its start, T its end, and each Mi occurs
in order in between; taking each Mi at its LEFTMOST occurrence is exact (an earlier
occurrence leaves at least as much room for the rest). Each segment is a quantifier-free
regex, so one `search` costs O(len(Mi) * len(name)) and a whole match
O(len(pattern) * len(name)) at worst: `*a*a*a*a*a*a*a*b` against 60 `a`s is microseconds
(the backtracking regex it replaces took 9 s).
Rule 2: compiling is linear too, but Python-speed: a pattern over MAX_PATTERN_BYTES (8 KiB;
a topic name is at most 255 bytes) raises PatternTooLong instead of stalling the caller.
Rule 3: beyond that limit, the only departure from redis-server is that Redis 7.2 gives up
(no match) past 1000 nested `*`s; a linear matcher has no reason to, so such a pattern matches.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

MAX_PATTERN_BYTES = 8 << 10  # compiling is linear but not free (<= ~50 ms at this size)

_STAR = None  # token: `*`; every other token is a 256-bit mask of the bytes it matches
_ANY = (1 << 256) - 1


def _signed(b: int) -> int:
    return b - 256 if b >= 128 else b


def _span(lo: int, hi: int) -> int:
    """Mask of the unsigned bytes lo..hi."""
    return ((1 << (hi + 1)) - 1) ^ ((1 << lo) - 1)


def _signed_range(x: int, y: int) -> int:
    """Mask of the bytes b with min <= signed(b) <= max of the signed values of x and y."""
    lo, hi = sorted((_signed(x), _signed(y)))
    if lo >= 0 or hi < 0:
        return _span(lo & 0xFF, hi & 0xFF)
    return _span(lo & 0xFF, 255) | _span(0, hi)


def _class(p: bytes, i: int) -> tuple[int, int]:
    """The class starting at p[i] == '[': (mask of the bytes it matches, index after it), a
    port of the `case '['` branch of stringmatchlen (which consumes the pattern the same way
    whatever the string holds, so a class can be computed once for all 256 bytes)."""
    n = len(p)
    i += 1
    neg = i < n and p[i] == 0x5E  # '^'
    if neg:
        i += 1
    members = 0
    while True:
        if i < n and p[i] == 0x5C and n - i >= 2:  # '\\' escapes the next byte
            i += 1
            members |= 1 << p[i]
        elif i < n and p[i] == 0x5D:  # ']'
            break
        elif i >= n:  # unterminated: the class ends with the pattern
            i -= 1
            break
        elif n - i >= 3 and p[i + 1] == 0x2D:  # 'x-y' (Redis compares signed chars)
            members |= _signed_range(p[i], p[i + 2])
            i += 2
        else:
            members |= 1 << p[i]
        i += 1
    return (_ANY ^ members if neg else members), i + 1


def tokens(pattern: bytes) -> list[int | None]:
    """The pattern as tokens: None for `*` (runs collapsed), else the mask of the one byte
    the token matches."""
    out: list[int | None] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == 0x2A:  # '*'
            if not out or out[-1] is not _STAR:
                out.append(_STAR)
            i += 1
        elif c == 0x3F:  # '?'
            out.append(_ANY)
            i += 1
        elif c == 0x5B:  # '['
            cls, i = _class(pattern, i)
            out.append(cls)
        else:
            if c == 0x5C and n - i >= 2:  # '\\x' is x; a trailing '\\' is itself
                i += 1
            out.append(1 << pattern[i])
            i += 1
    return out


@lru_cache(maxsize=4096)
def _mask_regex(mask: int) -> bytes:
    if mask == _ANY:
        return b"."
    if not mask:
        return b"(?!)"
    vals = [b for b in range(256) if mask >> b & 1]
    if len(vals) == 1:
        return re.escape(bytes(vals))
    parts: list[bytes] = []
    start = prev = vals[0]
    for v in [*vals[1:], -1]:
        if v == prev + 1:
            prev = v
            continue
        parts.append(b"\\x%02x" % start if start == prev else b"\\x%02x-\\x%02x" % (start, prev))
        start = prev = v
    return b"[" + b"".join(parts) + b"]"


def _segment(toks: list[int]) -> re.Pattern[bytes] | None:
    if not toks:
        return None
    return re.compile(b"".join([_mask_regex(t) for t in toks]), re.DOTALL)


@dataclass(frozen=True, slots=True)
class Glob:
    """A compiled pattern; `match(name)` is the whole test (see Rule 1)."""

    pattern: bytes
    star: bool  # the pattern has a `*`
    head: re.Pattern[bytes] | None
    middle: tuple[re.Pattern[bytes], ...]
    tail: re.Pattern[bytes] | None
    head_len: int
    tail_len: int

    def match(self, name: bytes) -> bool:
        n = len(name)
        if n == 0:
            return not self.pattern
        if not self.star:
            return n == self.head_len and (self.head is None or self.head.fullmatch(name) is not None)
        end = n - self.tail_len
        if end < self.head_len:
            return False
        if self.head is not None and self.head.match(name) is None:
            return False
        if self.tail is not None and self.tail.fullmatch(name, end) is None:
            return False
        pos = self.head_len
        for seg in self.middle:
            m = seg.search(name, pos, end)
            if m is None:
                return False
            pos = m.end()
        return True


class PatternTooLong(ValueError):
    pass


def compile_glob(pattern: bytes) -> Glob:
    """Compile once; short patterns (the usual ones) are cached. A pattern longer than
    MAX_PATTERN_BYTES raises PatternTooLong (its compile alone would stall the caller)."""
    if len(pattern) > MAX_PATTERN_BYTES:
        raise PatternTooLong(
            f"glob pattern too long ({len(pattern)} bytes; the limit is {MAX_PATTERN_BYTES})")
    return _cached(pattern) if len(pattern) <= 1024 else _compile(pattern)


@lru_cache(maxsize=512)
def _cached(pattern: bytes) -> Glob:
    return _compile(pattern)


def _compile(pattern: bytes) -> Glob:
    toks = tokens(pattern)
    segs: list[list[int]] = [[]]
    for t in toks:
        if t is _STAR:
            segs.append([])
        else:
            segs[-1].append(t)
    if len(segs) == 1:
        return Glob(pattern, False, _segment(segs[0]), (), None, len(segs[0]), 0)
    middle = tuple(r for r in (_segment(s) for s in segs[1:-1]) if r is not None)
    return Glob(pattern, True, _segment(segs[0]), middle, _segment(segs[-1]),
                len(segs[0]), len(segs[-1]))


def glob_match(pattern: bytes, name: bytes) -> bool:
    """Redis's stringmatchlen(pattern, name, nocase=0), in O(len(pattern) * len(name))."""
    return compile_glob(pattern).match(name)
