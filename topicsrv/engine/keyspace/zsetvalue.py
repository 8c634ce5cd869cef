"""A sorted-set value: a packed run of member/score pairs in order while small (Redis's
listpack), a dict (member -> score) plus an ordered structure once past
`zset-max-listpack-entries` members or a member longer than `zset-max-listpack-value` bytes
(Redis's skiplist); it never goes back, as in Redis. Sans-IO.

Rule 1 (order): members in (score, member bytes) order, as Redis: equal scores order by
member, bytewise. Scores are doubles, never NaN (the commands refuse NaN); -0.0 equals 0.0.
Rule 2 (cost): the packed form holds at most `max_entries` pairs and is walked whole (as a
listpack); the big form answers a member's score in one dict lookup and a rank, a position,
a score or lex bound in O(log n): `Order` is a list of chunks (parallel arrays of scores and
members, at most 2 * LOAD each), the chunks' last (score, member) for bisecting, and a Fenwick
tree over the chunks' lengths for positions.
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
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Iterator
from operator import itemgetter
from typing import Final

from sortedcontainers import SortedKeyList

from topicsrv.engine.keyspace import packed
from topicsrv.engine.keyspace.scanorder import field_hash

LISTPACK: Final = "listpack"
SKIPLIST: Final = "skiplist"
DEFAULT_LIMITS: Final = (128, 64)
LOAD: Final = 512
_D: Final = struct.Struct("<d")
_SCORE: Final = itemgetter(0)  # of Order.maxes' (score, member)
_MEMBER: Final = itemgetter(1)
Pair = tuple[bytes, float]


class Order:
    """Rule 2: members in (score, member) order, chunked, with positions in O(log n)."""

    __slots__ = ("scores", "members", "maxes", "tree")

    def __init__(self) -> None:
        self.scores: list[array[float]] = []
        self.members: list[list[bytes]] = []
        self.maxes: list[tuple[float, bytes]] = []
        self.tree: list[int] = [0]

    def _rebuild(self) -> None:
        self.maxes = [(s[-1], m[-1]) for s, m in zip(self.scores, self.members, strict=True)]
        tree = [0] + [len(m) for m in self.members]
        n = len(tree) - 1
        for i in range(1, n + 1):
            j = i + (i & -i)
            if j <= n:
                tree[j] += tree[i]
        self.tree = tree

    def _add(self, i: int, delta: int) -> None:
        tree = self.tree
        i += 1
        while i < len(tree):
            tree[i] += delta
            i += i & -i

    def prefix(self, i: int) -> int:
        """The members in chunks before chunk i."""
        tree = self.tree
        out = 0
        while i > 0:
            out += tree[i]
            i -= i & -i
        return out

    def find(self, pos: int) -> tuple[int, int]:
        """(chunk, offset) of position `pos` (0 <= pos < size)."""
        tree = self.tree
        n = len(tree) - 1
        i = 0
        step = 1 << (n.bit_length() - 1) if n else 0
        while step:
            k = i + step
            if k <= n and tree[k] <= pos:
                i = k
                pos -= tree[k]
            step >>= 1
        return i, pos

    def _spot(self, i: int, score: float, member: bytes) -> int:
        sc = self.scores[i]
        lo = bisect_left(sc, score)
        hi = bisect_right(sc, score, lo)
        return bisect_left(self.members[i], member, lo, hi)

    def insert(self, score: float, member: bytes) -> None:
        if not self.members:
            self.scores.append(array("d", [score]))
            self.members.append([member])
            self._rebuild()
            return
        i = bisect_left(self.maxes, (score, member))
        if i == len(self.maxes):
            i -= 1
        j = self._spot(i, score, member)
        sc, ms = self.scores[i], self.members[i]
        sc.insert(j, score)
        ms.insert(j, member)
        if j == len(ms) - 1:
            self.maxes[i] = (score, member)
        if len(ms) > 2 * LOAD:
            self.scores[i:i + 1] = [sc[:LOAD], sc[LOAD:]]
            self.members[i:i + 1] = [ms[:LOAD], ms[LOAD:]]
            self._rebuild()
        else:
            self._add(i, 1)

    def remove(self, score: float, member: bytes) -> None:
        i = bisect_left(self.maxes, (score, member))
        j = self._spot(i, score, member)
        sc, ms = self.scores[i], self.members[i]
        del sc[j]
        del ms[j]
        if not ms:
            del self.scores[i], self.members[i]
            self._rebuild()
            return
        if j == len(ms):
            self.maxes[i] = (sc[-1], ms[-1])
        self._add(i, -1)

    def rank(self, score: float, member: bytes) -> int:
        i = bisect_left(self.maxes, (score, member))
        return self.prefix(i) + self._spot(i, score, member)

    def bound(self, value: float | bytes, right: bool, lex: bool) -> int:
        """The first position whose score (lex: member) is >= value (right: > value)."""
        key = _MEMBER if lex else _SCORE
        maxes = self.maxes
        i = bisect_right(maxes, value, key=key) if right else bisect_left(maxes, value, key=key)
        if i == len(maxes):
            return self.prefix(i)
        seq: list[bytes] | array[float] = self.members[i] if lex else self.scores[i]
        j = bisect_right(seq, value) if right else bisect_left(seq, value)
        return self.prefix(i) + j

    def walk(self, pos: int, forward: bool = True) -> Iterator[Pair]:
        """The members from position `pos` on (backward: down to 0), with their scores."""
        if not self.members:
            return
        i, j = self.find(pos)
        scores, members = self.scores, self.members
        if forward:
            while i < len(members):
                sc, ms = scores[i], members[i]
                for k in range(j, len(ms)):
                    yield ms[k], sc[k]
                i, j = i + 1, 0
        else:
            while i >= 0:
                sc, ms = scores[i], members[i]
                for k in range(j, -1, -1):
                    yield ms[k], sc[k]
                i -= 1
                if i >= 0:
                    j = len(members[i]) - 1


class Table(dict[bytes, float]):
    """A big set's members (Rules 2, 4, 5)."""

    __slots__ = ("order", "nbytes", "index")

    def __init__(self) -> None:
        super().__init__()
        self.order = Order()
        self.nbytes = 0
        self.index: SortedKeyList | None = None


def _unpack(run: bytes) -> list[Pair]:
    it = packed.values(run)
    return [(m, _D.unpack(next(it))[0]) for m in it]


def _pack(pairs: Iterable[Pair]) -> bytes:
    """A packed run; -0.0 becomes 0.0 (a listpack keeps an integral score as an integer)."""
    return b"".join([packed.encode(m) + packed.encode(_D.pack(s + 0.0)) for m, s in pairs])


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
        run = data  # a walk of the packed run: only the match's score is decoded
        pos, end = 0, len(run)
        while pos < end:
            m, pos = packed.read(run, pos)
            if m == member:
                raw, _ = packed.read(run, pos)
                score: float = _D.unpack(raw)[0]
                return score
            pos = packed.skip(run, pos)
        return None

    def set(self, member: bytes, score: float, limits: tuple[int, int] = DEFAULT_LIMITS) -> bool:
        """Put `member` at `score`; True when it is new (Rule 3)."""
        data = self.data
        if type(data) is not Table:
            pairs = self.pairs()
            old = next((k for k, (m, _) in enumerate(pairs) if m == member), -1)
            if old < 0 and (self.count + 1 > limits[0] or len(member) > limits[1]):
                data = self._convert(pairs)
            else:
                if old >= 0:
                    del pairs[old]
                k = bisect_left(pairs, (score, member), key=lambda p: (p[1], p[0]))
                pairs.insert(k, (member, score))
                self.data, self.count = _pack(pairs), len(pairs)
                return old < 0
        prev = data.get(member)
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
        pairs = self.pairs()
        for k, (m, _) in enumerate(pairs):
            if m == member:
                del pairs[k]
                self.data, self.count = _pack(pairs), len(pairs)
                return True
        return False

    def rank(self, member: bytes) -> int | None:
        """The member's position in order (0-based), None if absent."""
        data = self.data
        if type(data) is Table:
            score = data.get(member)
            return None if score is None else data.order.rank(score, member)
        for k, (m, _) in enumerate(self.pairs()):
            if m == member:
                return k
        return None

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
        pairs = self.pairs()[lo:hi]
        return pairs[::-1] if reverse else pairs

    def bound(self, value: float | bytes, right: bool, lex: bool) -> int:
        """The first position whose score (lex: member) is >= value (right: > value)."""
        data = self.data
        if type(data) is Table:
            return data.order.bound(value, right, lex) if data else 0
        pairs = self.pairs()
        seq: list[bytes] | list[float] = [m for m, _ in pairs] if lex else [s for _, s in pairs]
        return bisect_right(seq, value) if right else bisect_left(seq, value)

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
