"""SORT and SORT_RO over lists, sets and sorted sets, with redis-server's rules (its sort.c).
Sans-IO; the RESP command parses the options (resp/commands/sort.py).

Rule 1 (the source): a list, a set or a sorted set, else WRONGTYPE; a missing key sorts as an
empty list. A sorted set's elements are its members (sorted by their own value, not their
scores, unless nothing is sorted: Rule 2).
Rule 2 (what is sorted by): each element itself, or with `BY pattern` the value the pattern
finds for it (Rule 5; a missing one weighs 0, or sorts first with ALPHA). A BY pattern with no
`*` sorts nothing: a list or a sorted set keeps its own order (DESC reverses it, LIMIT takes a
range of it); a set keeps its order, except with STORE or inside a script, where it is sorted
ALPHA so that the result does not depend on the set's layout (as Redis).
Rule 3 (numbers): a weight is read as C's strtod reads it: leading white space, a decimal or
hexadecimal number, `inf`/`infinity`; NaN, an overflow, an underflow or any byte after the
number is `One or more scores can't be converted into double` (the empty string is 0, as
strtod leaves it). Equal numbers order by the elements' bytes, so the result is one order.
Rule 4 (ALPHA): bytes are compared (Redis compares with the locale's collation when it does
not STORE; under the C locale, the default of its tests and packages, the two agree).
Rule 5 (patterns): `#` is the element; otherwise the first `*` takes the element, and a `->`
after it followed by a field name reads that field of a hash; a key of another kind, a
missing key or field reads as nil. A GET or BY pattern without `*` reads nil.
Rule 6 (LIMIT offset count): the start is clamped to [0, n], a negative count runs to the end.
Rule 7 (STORE): the rows (GET values, nil stored as an empty string) replace the destination
as one list (one "c" change; a topic there is deleted first, as SET does); no row deletes it.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from topicsrv.engine.journal import CommitToken, Group, all_of
from topicsrv.engine.keyspace import colls
from topicsrv.engine.keyspace import strings as kstrings
from topicsrv.engine.keyspace.space import Keyspace, wrongtype
from topicsrv.errors import TopicsError

NOT_A_DOUBLE = "One or more scores can't be converted into double"
_SPACE = b" \t\n\v\f\r"
_NUMBER = re.compile(
    rb"[+-]?(?:0[xX](?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)(?:[pP][+-]?[0-9]+)?"
    rb"|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?"
    rb"|[iI][nN][fF](?:[iI][nN][iI][tT][yY])?|[nN][aA][nN])")
_SORTABLE = (colls.LIST, "set", "zset")
_MIN_NORMAL = 2.2250738585072014e-308


@dataclass
class SortSpec:
    by: bytes | None = None
    gets: list[bytes] = field(default_factory=list)
    desc: bool = False
    alpha: bool = False
    offset: int = 0
    count: int = -1
    store: str | None = None
    in_script: bool = False


def strtod(raw: bytes) -> float | None:
    """Rule 3: the number C's strtod reads from the whole of `raw`, None when it would fail."""
    text = raw.lstrip(_SPACE)
    if not text:
        return 0.0 if not raw else None
    m = _NUMBER.match(text)
    if m is None or m.end() != len(text):
        return None
    s = m.group().decode("ascii")
    body = s.lstrip("+-").lower()
    if body.startswith("nan"):
        return None
    if body.startswith("inf"):
        return -math.inf if s.startswith("-") else math.inf
    if body.startswith("0x"):
        value = float.fromhex(s)
    else:
        value = float(s)
    if math.isinf(value):
        return None  # ERANGE: an overflow
    if value == 0.0 and _nonzero(body):
        return None  # ERANGE: an underflow to zero
    if 0.0 < abs(value) < _MIN_NORMAL:
        return None  # ERANGE: a denormal
    return value


def _nonzero(body: str) -> bool:
    """Whether a number's digits (before its exponent) are not all zeros."""
    mantissa = body[2:].split("p")[0] if body.startswith("0x") else body.split("e")[0]
    return any(c not in "0." for c in mantissa)


def lookup(ks: Keyspace, pattern: bytes, elem: bytes) -> bytes | None:
    """Rule 5."""
    if pattern == b"#":
        return elem
    star = pattern.find(b"*")
    if star < 0:
        return None
    arrow = pattern.find(b"->", star + 1)
    fld: bytes | None = None
    end = len(pattern)
    if arrow >= 0 and arrow + 2 < len(pattern):
        fld, end = pattern[arrow + 2:], arrow
    name = (pattern[:star] + elem + pattern[star + 1:end]).decode("latin-1")
    kind = ks.kind(name)
    if fld is None:
        return ks.get(name) if kind == "string" else None
    if kind != colls.HASH:
        return None
    got: bytes | None = ks.colls[name].get(fld)
    return got


def _source(ks: Keyspace, name: str) -> tuple[str, list[bytes]]:
    """Rule 1: (the kind, the elements in their own order)."""
    kind = ks.kind(name)
    if kind is None:
        return colls.LIST, []
    if kind not in _SORTABLE:
        raise wrongtype(name)
    value = ks.colls[name]
    if kind == colls.LIST:
        return kind, list(value)
    items = list(colls.elements(value, 0))
    if kind == "zset":  # (member, score) pairs: rank order
        items.sort(key=lambda p: (p[1], p[0]))
        return kind, [m for m, _ in items]
    return kind, items


def sort(ks: Keyspace, name: str, spec: SortSpec) -> list[bytes | None]:
    """The rows SORT answers (each element, or its GET values in order)."""
    kind, elems = _source(ks, name)
    by, alpha = spec.by, spec.alpha
    dontsort = by is not None and b"*" not in by
    if dontsort and kind == "set" and (spec.store is not None or spec.in_script):
        dontsort, alpha, by = False, True, None  # Rule 2
    n = len(elems)
    start = min(max(spec.offset, 0), n)  # Rule 6
    count = min(max(spec.count, -1), n)
    end = n - 1 if count < 0 else start + count - 1
    if start >= n:
        start, end = n - 1, n - 2
    end = min(end, n - 1)
    if dontsort:
        if spec.desc and kind != "set":
            elems.reverse()
    elif alpha:
        if by is None:
            elems.sort(reverse=spec.desc)
        else:
            weights = {e: lookup(ks, by, e) for e in set(elems)}
            elems.sort(key=lambda e: (weights[e] is not None, weights[e] or b""), reverse=spec.desc)
    else:
        scores: dict[bytes, float] = {}
        for e in set(elems):
            raw = e if by is None else lookup(ks, by, e)
            score = 0.0 if raw is None else strtod(raw)
            if score is None:
                raise TopicsError("invalid_request", NOT_A_DOUBLE)
            scores[e] = score
        elems.sort(key=lambda e: (scores[e], e), reverse=spec.desc)
    picked = elems[start:end + 1] if end >= start else []
    if not spec.gets:
        return list(picked)
    return [lookup(ks, pat, e) for e in picked for pat in spec.gets]


def store(ks: Keyspace, dst: str, rows: list[bytes | None]) -> tuple[int, CommitToken | None]:
    """Rule 7: the number of rows stored at `dst`."""
    items = [b"" if r is None else r for r in rows]
    if not items:
        if ks.kind(dst) is None and dst not in ks.host.topics:
            return 0, None
        return 0, kstrings.delete(ks, [dst])[1]
    with Group(ks.host.journal):
        tokens = kstrings.replace_topics(ks, [dst])
        tokens.append(ks.commit([("c", dst, colls.LIST, items, 0, (ks.list_fill, 0))], True))
    return len(items), all_of(tokens)


def result(ks: Keyspace, name: str, spec: SortSpec) -> Any:
    """SORT's whole work: the rows, or (with STORE) the count stored and its commit."""
    rows = sort(ks, name, spec)
    if spec.store is None:
        return rows, None
    return store(ks, spec.store, rows)
