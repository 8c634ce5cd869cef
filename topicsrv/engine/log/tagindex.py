"""The per-topic tag index (seeds section 7.2): tag -> ascending seqs, on a SortedDict.

Rule 1: a `match` delete never scans the log: Eq is one point lookup, Glob one bounded
`irange` over the keys that carry the literal prefix.
Rule 2: entries are added on append and pruned on delete and front reclaim; seqs inside an
entry stay ascending because appends come in seq order.
Rule 3 (made on first use): the SortedDict is made by the first tag added; a topic that never
carries a tag (every stream written by XADD) holds none. A SortedDict is ~20 objects the
cyclic GC tracks (its SortedList keeps a dozen bound methods), 60% of an untagged stream's, so
a full collection over 100,000 streams walked 2M of them for nothing (docs/decisions.md, "The
keyspace's values outside the cyclic GC").
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator

from sortedcontainers import SortedDict

_NONE: dict[str, list[int]] = {}  # what an index without tags reads (Rule 3); never written


class TagIndex:
    __slots__ = ("_tags",)

    def __init__(self) -> None:
        self._tags: SortedDict | None = None  # Rule 3

    @property
    def _by_tag(self) -> SortedDict | dict[str, list[int]]:
        """The tags, for reading: an empty dict until the first tag (Rule 3)."""
        tags = self._tags
        return _NONE if tags is None else tags

    def _made(self) -> SortedDict:
        tags = self._tags
        if tags is None:
            tags = self._tags = SortedDict()
        return tags

    def __len__(self) -> int:
        return len(self._by_tag)

    def add(self, tag: str, seq: int) -> None:
        tags = self._made()
        seqs = tags.get(tag)
        if seqs is None:
            tags[tag] = [seq]
        else:
            seqs.append(seq)

    def eq(self, tag: str) -> list[int]:
        return self._by_tag.get(tag) or []

    def glob_keys(self, prefix: str) -> Iterator[str]:
        """Keys starting with `prefix`, in order: a bounded range scan."""
        if self._tags is None:
            return
        keys: Iterator[str] = self._tags.irange(minimum=prefix)
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
            self._made()[tag] = seqs
        elif self._tags is not None:
            self._tags.pop(tag, None)

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
        if not seqs and self._tags is not None:
            del self._tags[tag]

    def prune_below(self, tag: str, seq: int) -> None:
        """Drop every seq < `seq` of `tag` (front reclaim and before_seq deletes)."""
        seqs = self._by_tag.get(tag)
        if not seqs or seqs[0] >= seq:
            return
        k = bisect_left(seqs, seq)
        del seqs[:k]
        if not seqs and self._tags is not None:
            del self._tags[tag]
