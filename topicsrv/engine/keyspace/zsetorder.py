"""A big sorted set (zsetvalue.py Rules 2, 4, 5): the dict of member -> score, and `Order`,
its members in (score, member) order in chunks, with positions in O(log n). Sans-IO, typed for
the compiled build.

Rule 1: `Order` is a list of chunks (parallel arrays of scores and members, at most 2 * LOAD
each), the chunks' last (score, member) for bisecting, and a Fenwick tree over the chunks'
lengths for positions: a rank, a position, a score or lex bound in O(log n).
"""

from __future__ import annotations

from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Iterator
from operator import itemgetter
from typing import Final

from sortedcontainers import SortedKeyList

LOAD: Final = 512
_SCORE: Final = itemgetter(0)  # of Order.maxes' (score, member)
_MEMBER: Final = itemgetter(1)
Pair = tuple[bytes, float]


class Order:
    """Rule 1: members in (score, member) order, chunked, with positions in O(log n)."""

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
