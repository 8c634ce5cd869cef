"""The glob matcher (topicsrv/engine/glob.py): redis-server's stringmatchlen semantics, checked
against a table and, differentially, against a line-by-line port of Redis 7.2's recursive
implementation; its worst case stays linear. And tag Glob deletes, which are literal prefixes
by the spec, stay prefix range scans."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from topicsrv.clock import FakeClock
from topicsrv.engine import Engine
from topicsrv.engine.glob import glob_match
from topicsrv.engine.log.deletes import parse_match
from topicsrv.engine.log.records import prepare_json


def redis_stringmatchlen(p: bytes, s: bytes) -> bool:
    """util.c stringmatchlen_impl (Redis 7.2, nocase=0) ported literally: `pi`/`si` are the
    pattern/string pointers; reading p[pi] at pi == len(p) is C's NUL terminator (0)."""
    skip = [False]

    def at(b: bytes, i: int) -> int:
        return b[i] if i < len(b) else 0

    def signed(c: int) -> int:
        return c - 256 if c >= 128 else c

    def impl(pi: int, si: int, nesting: int) -> bool:
        if nesting > 1000:
            return False
        plen, slen = len(p) - pi, len(s) - si
        while plen and slen:
            c = p[pi]
            if c == ord("*"):
                while plen and at(p, pi + 1) == ord("*"):
                    pi += 1
                    plen -= 1
                if plen == 1:
                    return True
                while slen:
                    if impl(pi + 1, si, nesting + 1):
                        return True
                    if skip[0]:
                        return False
                    si += 1
                    slen -= 1
                skip[0] = True
                return False
            elif c == ord("?"):
                si += 1
                slen -= 1
            elif c == ord("["):
                pi += 1
                plen -= 1
                neg = at(p, pi) == ord("^")
                if neg:
                    pi += 1
                    plen -= 1
                match = False
                while True:
                    if at(p, pi) == ord("\\") and plen >= 2:
                        pi += 1
                        plen -= 1
                        if p[pi] == s[si]:
                            match = True
                    elif at(p, pi) == ord("]"):
                        break
                    elif plen == 0:
                        pi -= 1
                        plen += 1
                        break
                    elif plen >= 3 and p[pi + 1] == ord("-"):
                        lo, hi = signed(p[pi]), signed(p[pi + 2])
                        if lo > hi:
                            lo, hi = hi, lo
                        pi += 2
                        plen -= 2
                        if lo <= signed(s[si]) <= hi:
                            match = True
                    elif p[pi] == s[si]:
                        match = True
                    pi += 1
                    plen -= 1
                if neg:
                    match = not match
                if not match:
                    return False
                si += 1
                slen -= 1
            else:
                if c == ord("\\") and plen >= 2:
                    pi += 1
                    plen -= 1
                if p[pi] != s[si]:
                    return False
                si += 1
                slen -= 1
            pi += 1
            plen -= 1
            if slen == 0:
                while at(p, pi) == ord("*"):
                    pi += 1
                    plen -= 1
                break
        return plen == 0 and slen == 0

    return impl(0, 0, 0)


TABLE = [
    # (pattern, name, redis-server's answer)
    (b"*", b"anything", True),
    (b"*", b"", False),  # stringmatchlen; KEYS/SCAN special-case "*" before matching
    (b"", b"", True),
    (b"foo*", b"foo_a", True),
    (b"foo*", b"fo", False),
    (b"*_b", b"foo_b", True),
    (b"f?o_?", b"foo_a", True),
    (b"f?o", b"fo", False),
    (b"h[ae]llo", b"hallo", True),
    (b"h[ae]llo", b"hillo", False),
    (b"h[^e]llo", b"hallo", True),
    (b"h[^e]llo", b"hello", False),
    (b"h[a-b]llo", b"hbllo", True),
    (b"h[b-a]llo", b"hbllo", True),  # reversed ranges are swapped
    (b"h\\*llo", b"h*llo", True),
    (b"h\\*llo", b"hello", False),
    (b"a\\", b"a\\", True),  # a trailing backslash is itself
    (b"[\\]]", b"]", True),
    (b"[]", b"]", False),  # `]` right after `[` closes an empty class
    (b"[^]", b"x", True),
    (b"[", b"[", False),  # an unterminated class takes the rest (here: nothing)
    (b"[^", b"q", True),
    (b"[abc", b"b", True),
    (b"[a-]x", b"]", True),  # `a-]` is the range a..] and the class goes on...
    (b"[a-]x", b"x", True),  # ...so the `x` is a member too (one class, one byte)
    (b"[a-]x", b"]x", False),
    (b"[a-]x]y", b"`y", True),
    (b"[\x80-a]", b"\x00", True),  # signed chars: 0x80 (-128) .. 'a'
    (b"[\x80-a]", b"\xff", True),
    (b"[\x80-a]", b"b", False),
    (b"*a*a*a*a*a*a*a*b", b"a" * 60, False),
    (b"*a*a*a*a*a*a*a*b", b"a" * 60 + b"b", True),
    (b"a*b*c", b"abc", True),
    (b"a*b*c", b"aXbYbZc", True),
    (b"a*b*c", b"acb", False),
    (b"**a", b"ba", True),
    (b"a*", b"a", True),
    (b"?*?", b"a", False),
    (b"*?*?*", b"ab", True),
]


@pytest.mark.parametrize(("pattern", "name", "want"), TABLE)
def test_table_of_redis_answers(pattern: bytes, name: bytes, want: bool) -> None:
    assert redis_stringmatchlen(pattern, name) is want  # the table is Redis's own behaviour
    assert glob_match(pattern, name) is want


_pat = st.lists(st.sampled_from([b"a", b"b", b"*", b"?", b"[", b"]", b"^", b"-", b"\\", b"\x80",
                                 b"\xff", b"\x00"]), max_size=10).map(b"".join)
_name = st.lists(st.sampled_from([b"a", b"b", b"]", b"-", b"\\", b"*", b"[", b"\x80", b"\xff",
                                  b"\x00"]), max_size=10).map(b"".join)


@settings(max_examples=1000, deadline=None)
@given(_pat, _name)
def test_same_answer_as_redis_stringmatchlen(pattern: bytes, name: bytes) -> None:
    assert glob_match(pattern, name) is redis_stringmatchlen(pattern, name)


def _worst(pattern: bytes, name: bytes) -> float:
    best = 1e9
    for _ in range(3):
        glob_match(pattern, b"")  # compile (cached) outside the timing
        t = time.perf_counter()
        assert glob_match(pattern, name) is False
        best = min(best, time.perf_counter() - t)
    return best


def test_pathological_patterns_take_linear_time() -> None:
    # The reproducer: 9.2 s with the backtracking regex, each extra `*a` x6.
    assert _worst(b"*a*a*a*a*a*a*a*b", b"a" * 60) < 0.05
    assert _worst(b"*a" * 30 + b"*b", b"a" * 255) < 0.05
    assert _worst(b"*a" * 50 + b"*b*", b"a" * 100_000) < 0.05  # long names (tags, filters)
    assert _worst(b"*" + b"a" * 30 + b"b*", b"a" * 100_000) < 0.05
    assert _worst(b"*?" * 40 + b"*[b-c]*", b"a" * 10_000) < 0.05


def test_tag_glob_deletes_stay_literal_prefix_range_scans() -> None:
    """Tag `Glob` deletes are NOT globs (seeds: "trailing-prefix only ... never a regex"): the
    pattern minus its trailing `*` is a literal prefix, found by an `irange` over the tag
    index, so the issue's pathological pattern costs a prefix scan, and its `*`s match only
    themselves."""
    eng = Engine(clock=FakeClock())
    evil = "*a*a*a*a*a*a*a*b"
    tags = ["a" * 60 + "b", evil + "-1", evil, "a" * 200, *(f"a{i:05d}" for i in range(2000))]
    eng.write("t", [prepare_json({"data": i, "tag": t}) for i, t in enumerate(tags)])
    t = time.perf_counter()
    res, _ = eng.delete_records("t", None, parse_match(["tag", "Glob", evil + "*"]))
    assert time.perf_counter() - t < 0.05
    assert res["deleted"] == 2  # `evil-1` and `evil` itself: its literal prefix, nothing else
    res, _ = eng.delete_records("t", None, parse_match("a*"))
    assert res["deleted"] == len(tags) - 2
