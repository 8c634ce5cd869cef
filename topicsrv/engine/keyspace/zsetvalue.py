"""A sorted-set value: a packed run of member/score pairs in order while small (Redis's
listpack), a dict (member -> score) plus an ordered structure once past
`zset-max-listpack-entries` members or a member longer than `zset-max-listpack-value` bytes
(Redis's skiplist); it never goes back, as in Redis. Sans-IO.

Rule 1 (order): members in (score, member bytes) order, as Redis: equal scores order by
member, bytewise. Scores are doubles, never NaN (the commands refuse NaN); -0.0 equals 0.0.
Rule 2 (cost): the packed form holds at most `max_entries` pairs, each the member as a
packed.py element then its score as 8 raw bytes (a double, little-endian), and is walked in
place (as a listpack): a look-up compares members where they lie, a change cuts and splices
the run (one new bytes object, no Python object per pair). The big form answers a member's
score in one dict lookup and a rank, a position, a score or lex bound in O(log n) (its
`Order`: zsetorder.py Rule 1).
Rule 3 (conversion, as Redis 7.0's zsetAdd): an insert of a new member converts the packed
form when the set then holds more than `max_entries` members or the member is longer than
`max_value`; an update never converts. The limits are the server's at each change, carried by
the change (ops.py "Z"), so a replay converts at the same change. A whole-value build (`of`:
the stores, COPY, RENAME, the checkpoint) is packed when it fits both limits.
Rule 4 (memory: a 1M-member set within 2x redis-server's): a member costs its bytes object,
its dict entry and float, and 16 bytes in the chunks (a raw double in an array, a reference);
no tuple per member.
Rule 5 (ZSCAN): a big set that has been scanned keeps its members in SCAN order (`index`, by
scanorder.field_hash), in step with every set and delete (as hashvalue.py Rule 4).
"""

from __future__ import annotations

import struct
from array import array
from collections.abc import Iterable
from typing import Final

from mypy_extensions import mypyc_attr
from sortedcontainers import SortedKeyList

from topicsrv.engine.keyspace import packed
from topicsrv.engine.keyspace.scanorder import field_hash
from topicsrv.engine.keyspace.zsetorder import LOAD, Pair, Table

LISTPACK: Final = "listpack"
SKIPLIST: Final = "skiplist"
DEFAULT_LIMITS: Final = (128, 64)
_D: Final = struct.Struct("<d")
_INF: Final = float("inf")
_MINUS_INF: Final = -_INF


def _pair_end(run: bytes, pos: int) -> int:
    """The offset past the pair starting at `pos` (Rule 2's layout)."""
    return packed.skip(run, pos) + 8


def _offset(run: bytes, k: int) -> int:
    """The offset of pair `k` (a walk of the k pairs before it)."""
    pos = 0
    for _ in range(k):
        pos = packed.skip(run, pos) + 8
    return pos


def _member_at(run: bytes, pos: int) -> bytes:
    return packed.read(run, pos)[0]


def _score_before(run: bytes, end: int) -> float:
    """The score of the pair ending at `end`."""
    score: float = _D.unpack_from(run, end - 8)[0]
    return score


def _find(run: bytes, member: bytes) -> tuple[int, int]:
    """(start, end) of `member`'s pair in a packed run, (-1, -1) if absent: the member's
    packed bytes searched for at C speed (absent there: not a member), a hit accepted once a
    walk of the pairs lands on it (a match may straddle elements or lie in a score)."""
    needle = packed.encode(member)
    at = run.find(needle)
    pos = 0
    while at >= 0:
        while pos < at:
            pos = packed.skip(run, pos) + 8
        if pos == at:
            return at, at + len(needle) + 8
        at = run.find(needle, at + 1)
    return -1, -1


def _key_hi(run: bytes, at: int) -> int:
    """The high half of the order key of the score stored at `at` (a double, 8 bytes little
    endian): integers that order as the scores do (Rule 1; a run never holds -0.0), read
    byte by byte instead of decoding the double (no call, no float, no tuple)."""
    top = run[at + 7]
    hi = (top << 24) | (run[at + 6] << 16) | (run[at + 5] << 8) | run[at + 4]
    return hi ^ 0xFFFFFFFF if top & 0x80 else hi | 0x80000000


def _key_lo(run: bytes, at: int) -> int:
    """The low half of `_key_hi`'s key (compared only when the high halves are equal)."""
    lo = (run[at + 3] << 24) | (run[at + 2] << 16) | (run[at + 1] << 8) | run[at]
    return lo ^ 0xFFFFFFFF if run[at + 7] & 0x80 else lo


def _place(run: bytes, score: float, member: bytes) -> int:
    """The offset where (score, member) goes in a packed run (Rule 1: the first pair after
    it); members are sliced only on a tie of scores, scores compared by their order keys. A
    pair that goes after the last one (rising scores: due times, timestamps) is placed
    without a walk."""
    pos, end = 0, len(run)
    if end:
        last = _score_before(run, end)
        if last < score or (last == score and
                            _member_at(run, packed.skip_back(run, end - 8)) < member):
            return end
    key = _D.pack(score + 0.0)
    khi, klo = _key_hi(key, 0), _key_lo(key, 0)
    while pos < end:
        nxt = _pair_end(run, pos)
        hi = _key_hi(run, nxt - 8)
        if hi > khi:
            return pos
        if hi == khi:
            lo = _key_lo(run, nxt - 8)
            if lo > klo or (lo == klo and _member_at(run, pos) > member):
                return pos
        pos = nxt
    return end


def _encode(member: bytes, score: float) -> bytes:
    """One pair; -0.0 becomes 0.0 (a listpack keeps an integral score as an integer)."""
    return packed.encode(member) + _D.pack(score + 0.0)


def _unpack(run: bytes, pos: int = 0, count: int = -1) -> list[Pair]:
    """`count` pairs (-1: all) from offset `pos` on."""
    out: list[Pair] = []
    end = len(run)
    while pos < end and count != 0:
        member, at = packed.read(run, pos)
        score: float = _D.unpack_from(run, at)[0]
        out.append((member, score))
        pos = at + 8
        count -= 1
    return out


def _members(run: bytes, pos: int, count: int) -> list[bytes]:
    """`count` members from offset `pos` on, their scores not decoded."""
    out: list[bytes] = []
    end = len(run)
    while pos < end and count > 0:
        n = run[pos]
        if n + 1 < packed.SMALL:  # the common short member: read in place
            out.append(run[pos + 1:pos + 1 + n])
            pos += n + 10
        else:
            member, at = packed.read(run, pos)
            out.append(member)
            pos = at + 8
        count -= 1
    return out


def _pack(pairs: Iterable[Pair]) -> bytes:
    return b"".join([_encode(m, s) for m, s in pairs])


@mypyc_attr(acyclic=True)  # data only, never in a cycle: outside the cyclic GC (docs/decisions.md)
class ZsetValue:
    __slots__ = ("data", "count", "second")
    KIND: Final = "zset"

    def __init__(self) -> None:
        self.data: bytes | Table = b""  # the packed run, or the dict (Rule 4)
        self.count = 0  # pairs in the packed run
        self.second = 0  # the last access in whole seconds (OBJECT IDLETIME; space.py Entry)

    @property
    def table(self) -> Table | None:
        data = self.data
        return data if type(data) is Table else None

    @property
    def encoding(self) -> str:
        return SKIPLIST if type(self.data) is Table else LISTPACK

    @property
    def nbytes(self) -> int:
        data = self.data
        if type(data) is Table:
            return data.nbytes
        return len(data)

    def __len__(self) -> int:
        data = self.data
        return len(data) if type(data) is Table else self.count

    def pairs(self) -> list[Pair]:
        """Every (member, score), in order (Rule 1)."""
        data = self.data
        if type(data) is Table:
            return list(data.order.walk(0)) if data else []
        assert type(data) is bytes
        return _unpack(data)

    def score(self, member: bytes) -> float | None:
        data = self.data
        if type(data) is Table:
            return data.get(member)
        assert type(data) is bytes
        _, end = _find(data, member)
        return None if end < 0 else _score_before(data, end)

    def set(self, member: bytes, score: float, limits: tuple[int, int] = DEFAULT_LIMITS,
            new: bool = False) -> bool:
        """Put `member` at `score`; True when it is new (Rule 3). A packed run is edited in
        place: the old pair cut out, the new one put at its place (Rule 2). `new`: the caller
        knows `member` is absent (runs.zadd looked it up): no second look-up."""
        data = self.data
        if type(data) is not Table:
            assert type(data) is bytes
            start, end = (-1, -1) if new else _find(data, member)
            if start >= 0:
                if _score_before(data, end) == score:
                    return False
                data = data[:start] + data[end:]
            elif self.count + 1 > limits[0] or len(member) > limits[1]:
                data = self._convert(self.pairs())
            if type(data) is bytes:
                at = _place(data, score, member)
                self.data = data[:at] + _encode(member, score) + data[at:]
                if start < 0:
                    self.count += 1
                return start < 0
        assert type(data) is Table
        prev = None if new else data.get(member)
        if prev is not None:
            if prev == score:
                return False
            data.order.remove(prev, member)
        data[member] = score
        data.order.insert(score, member)
        if prev is None:
            data.nbytes += len(member) + 8
            if data.index is not None:
                data.index.add(member)
            return True
        return False

    def end(self, top: bool) -> Pair:
        """The lowest pair (top: the highest) of a non-empty set; a packed run reads it where
        it lies (ZPOPMIN / ZPOPMAX of one: no walk, no search)."""
        data = self.data
        if type(data) is Table:
            n = len(data)
            return self.span(n - 1, n, True)[0] if top else self.span(0, 1)[0]
        assert type(data) is bytes
        if top:
            return _member_at(data, packed.skip_back(data, len(data) - 8)), _score_before(data, len(data))
        return _member_at(data, 0), _score_before(data, _pair_end(data, 0))

    def drop_end(self, top: bool, member: bytes) -> None:
        """Remove `end(top)`, whose member is `member`: a packed run is cut at its end."""
        data = self.data
        if type(data) is Table:
            self.delete(member)
            return
        assert type(data) is bytes
        self.data = data[:packed.skip_back(data, len(data) - 8)] if top else data[_pair_end(data, 0):]
        self.count -= 1

    def delete(self, member: bytes) -> bool:
        data = self.data
        if type(data) is Table:
            score = data.pop(member, None)
            if score is None:
                return False
            data.order.remove(score, member)
            data.nbytes -= len(member) + 8
            if data.index is not None:
                data.index.remove(member)
            return True
        assert type(data) is bytes
        start, end = _find(data, member)
        if start < 0:
            return False
        self.data = data[:start] + data[end:]
        self.count -= 1
        return True

    def rank(self, member: bytes) -> int | None:
        """The member's position in order (0-based), None if absent."""
        data = self.data
        if type(data) is Table:
            score = data.get(member)
            return None if score is None else data.order.rank(score, member)
        assert type(data) is bytes
        start, _ = _find(data, member)
        if start < 0:
            return None
        k, pos = 0, 0
        while pos < start:
            pos = _pair_end(data, pos)
            k += 1
        return k

    def span(self, lo: int, hi: int, reverse: bool = False) -> list[Pair]:
        """The pairs at positions [lo, hi) in order; reversed: hi - 1 down to lo."""
        if lo >= hi:
            return []
        data = self.data
        if type(data) is Table:
            out: list[Pair] = []
            walk = data.order.walk(hi - 1 if reverse else lo, not reverse)
            for _ in range(hi - lo):
                out.append(next(walk))
            return out
        assert type(data) is bytes
        pairs = _unpack(data, _offset(data, lo), hi - lo)
        return pairs[::-1] if reverse else pairs

    def bound(self, value: float | bytes, right: bool, lex: bool) -> int:
        """The first position whose score (lex: member) is >= value (right: > value)."""
        if not lex and right and value == _INF:  # `... +inf`: past every member, no walk
            return len(self)
        if not lex and not right and value == _MINUS_INF:  # `-inf ...`: from the first
            return 0
        data = self.data
        if type(data) is Table:
            return data.order.bound(value, right, lex) if data else 0
        assert type(data) is bytes
        k, pos, end = 0, 0, len(data)
        if isinstance(value, bytes):
            while pos < end:
                m = _member_at(data, pos)
                if m > value or (not right and m == value):
                    return k
                k += 1
                pos = _pair_end(data, pos)
            return k
        while pos < end:
            nxt = _pair_end(data, pos)
            s = _score_before(data, nxt)
            if s > value or (not right and s == value):
                return k
            k += 1
            pos = nxt
        return k

    def members_at(self, lo: int, hi: int, reverse: bool = False) -> list[bytes]:
        """`span`'s members without their scores."""
        data = self.data
        if type(data) is Table or lo >= hi:
            return [m for m, _ in self.span(lo, hi, reverse)]
        assert type(data) is bytes
        members = _members(data, _offset(data, lo), hi - lo)
        return members[::-1] if reverse else members

    def scan_index(self) -> SortedKeyList:
        """The members of a big set in SCAN order, built on first use (Rule 5)."""
        table = self.data
        assert type(table) is Table
        if table.index is None:
            table.index = SortedKeyList(table, key=field_hash)
        return table.index

    def _convert(self, pairs: list[Pair]) -> Table:
        table = Table()
        for m, s in pairs:
            table[m] = s
            table.order.insert(s, m)
            table.nbytes += len(m) + 8
        self.data, self.count = table, 0
        return table

    @classmethod
    def of(cls, pairs: list[Pair], limits: tuple[int, int] = DEFAULT_LIMITS) -> ZsetValue:
        """A whole value from distinct (member, score) pairs in any order (Rule 3)."""
        zv = cls()
        if len(pairs) <= limits[0] and all(len(m) <= limits[1] for m, _ in pairs):
            ordered = sorted(pairs, key=lambda p: (p[1], p[0]))
            zv.data, zv.count = _pack(ordered), len(ordered)
            return zv
        table = zv._convert([])
        ordered = sorted(pairs, key=lambda p: (p[1], p[0]))
        order = table.order
        for m, s in ordered:
            table[m] = s
            table.nbytes += len(m) + 8
        for k in range(0, len(ordered), LOAD):
            chunk = ordered[k:k + LOAD]
            order.scores.append(array("d", [s for _, s in chunk]))
            order.members.append([m for m, _ in chunk])
        order._rebuild()
        return zv
