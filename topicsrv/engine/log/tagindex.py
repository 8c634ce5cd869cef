"""The per-topic tag index (seeds section 7.2): tag -> ascending seqs, on a SortedDict.

Rule 1: a `match` delete never scans the log: Eq is one point lookup, Glob one bounded
`irange` over the keys that carry the literal prefix.
Rule 2: entries are added on append and pruned on delete and front reclaim; seqs inside an
entry stay ascending because appends come in seq order.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator

from sortedcontainers import SortedDict


class TagIndex:
    __slots__ = ("_by_tag",)

    def __init__(self) -> None:
        self._by_tag: SortedDict = SortedDict()

    def __len__(self) -> int:
        return len(self._by_tag)

    def add(self, tag: str, seq: int) -> None:
        seqs = self._by_tag.get(tag)
        if seqs is None:
            self._by_tag[tag] = [seq]
        else:
            seqs.append(seq)

    def eq(self, tag: str) -> list[int]:
        return self._by_tag.get(tag) or []

    def glob_keys(self, prefix: str) -> Iterator[str]:
        """Keys starting with `prefix`, in order: a bounded range scan."""
        keys: Iterator[str] = self._by_tag.irange(minimum=prefix)
        for key in keys:
            if not key.startswith(prefix):
                return
            yield key

    def matching(self, kind: str, pattern: str) -> list[tuple[str, list[int]]]:
        if kind == "Eq":
            seqs = self._by_tag.get(pattern)
            return [(pattern, seqs)] if seqs else []
        return [(k, self._by_tag[k]) for k in self.glob_keys(pattern)]

    def set_seqs(self, tag: str, seqs: list[int]) -> None:
        if seqs:
            self._by_tag[tag] = seqs
        else:
            self._by_tag.pop(tag, None)

    def discard(self, tag: str, seq: int) -> None:
        """Remove one (tag, seq); used when a tagged record leaves by front reclaim."""
        seqs = self._by_tag.get(tag)
        if not seqs:
            return
        if seqs[0] == seq:
            del seqs[0]
        else:
            try:
                seqs.remove(seq)
            except ValueError:
                return
        if not seqs:
            del self._by_tag[tag]

    def prune_below(self, tag: str, seq: int) -> None:
        """Drop every seq < `seq` of `tag` (front reclaim and before_seq deletes)."""
        seqs = self._by_tag.get(tag)
        if not seqs or seqs[0] >= seq:
            return
        k = bisect_left(seqs, seq)
        del seqs[:k]
        if not seqs:
            del self._by_tag[tag]
