"""SCAN's order: every key name by a stable 64-bit hash, so a cursor is a Redis cursor (u64).

Rule 1: `scan_hash(name)` is XXH3-64 of the name's bytes: the same in every process and after
a restart, so a cursor outlives the connection and the server, and always fits an unsigned
64-bit integer (clients in other languages parse it so). (Until 2026-11 it was BLAKE2b's
first 8 bytes: a scan begun before that upgrade and resumed after it may miss keys, as a
Redis scan resumed on another server would.) A hash's fields (HSCAN, SSCAN, ZSCAN) keep
`field_hash`, BLAKE2b: their indices store each hash once, so its cost does not recur.
Rule 2: a page returns the names whose hashes lie in [cursor, next): it takes names in hash
order until it has `count` and the next name's hash differs from the last one taken (names
sharing a hash are never split between pages), and the next cursor is that next name's hash
(0 once none is left). The pages of one scan cover [0, 2^64) without overlap, so a key present
for the whole scan is returned, whatever comes and goes meanwhile (Redis's guarantee).
Rule 3 (memory: no int per key): a `ScanOrder` keeps the names in buckets, each holding the
names whose hashes lie in one range [lows[i], lows[i + 1]) (lows[0] = 0), unsorted inside;
the ranges cover [0, 2^64). A name's hash is computed when it is added, removed, or met by an
ordered walk (which sorts the one bucket it is in: the last bucket sorted is kept while it
holds the same names), never stored. A bucket past `MAX` names splits at its median hash (names
sharing a hash stay together); a bucket emptied, or two neighbours that fit in `MAX // 2`,
merge. The cursor being a hash, not a bucket index, splits and merges between two pages
move nothing a scan relies on (the role of Redis's reverse-binary cursor across resizes).
Rule 4: the strings keep their names in hash order themselves (keyspace `order`); the topics
in `TopicMap.scan`, which the SortedDict's own add/remove/clear keep in step: every way the
map changes its key set goes through those cached methods, so no caller needs to know.
Rule 5 (outside the cyclic GC): a bucket is a dict of names (to None), not a list: CPython
never tracks a plain dict holding no container, and always tracks a list, so a full collection
walked every key's name (~1M type checks, 100+ ms at 1M keys) and now walks none; a name is
added and removed in O(1); the i-th name of a bucket is reached in at most `MAX` steps
(RANDOMKEY). docs/decisions.md, "The keyspace's values outside the cyclic GC".
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable, Iterator
from hashlib import blake2b
from heapq import merge
from itertools import accumulate, islice
from operator import itemgetter
from random import Random
from typing import Any

import xxhash
from sortedcontainers import SortedDict

U64 = (1 << 64) - 1
MAX = 128  # names per bucket before it splits (Rule 3)

_xxh3 = xxhash.xxh3_64_intdigest
_first = itemgetter(0)


def scan_hash(name: str) -> int:
    """Rule 1."""
    return _xxh3(name.encode("latin-1"))


def field_hash(raw: bytes) -> int:
    """A hash field's place in HSCAN's order (hashvalue.py), SSCAN's, ZSCAN's (Rule 1)."""
    return int.from_bytes(blake2b(raw, digest_size=8).digest(), "big")


class ScanOrder:
    """Names in the order of `key` (scan_hash by default), with no per-name int (Rule 3). As a
    SortedKeyList to its callers: add, remove, clear, update, len, iteration and `irange_key`
    in hash order; `pairs_from` also yields each name's hash; an int index reads the i-th
    name of a fixed order (bucket by bucket: hash order between buckets, not inside one),
    which is all RANDOMKEY asks."""

    __slots__ = ("key", "cap", "lows", "buckets", "size", "version", "overfull", "_sorted",
                 "_starts")

    def __init__(self, names: Iterable[Any] = (), key: Callable[[Any], int] = scan_hash,
                 cap: int = MAX) -> None:
        self.key = key
        self.cap = cap  # Rule 3's MAX (tests make it small)
        self.lows: list[int] = [0]
        self.buckets: list[dict[Any, None]] = [{}]  # Rule 5: dicts, not lists
        self.size = 0
        self.version = 0  # bumped by every change (`_starts` is of one version)
        self.overfull = False  # a bucket may hold more than `cap` names (one hash: `_split`)
        self._sorted: tuple[dict[Any, None], list[tuple[int, Any]]] | None = None  # (names, pairs)
        self._starts: tuple[int, list[int]] | None = None  # (version, first index per bucket)
        self.update(names)

    def __len__(self) -> int:
        return self.size

    def __bool__(self) -> bool:
        return self.size > 0

    def add(self, name: Any) -> None:
        i = bisect_right(self.lows, self.key(name)) - 1
        bucket = self.buckets[i]
        n = len(bucket)
        bucket[name] = None
        if len(bucket) == n:
            return  # already here
        self.size += 1
        self.version += 1
        if len(bucket) > self.cap:
            self._split(i)

    def remove(self, name: Any) -> None:
        """ValueError when `name` is not here (as SortedKeyList.remove)."""
        i = bisect_right(self.lows, self.key(name)) - 1
        bucket = self.buckets[i]
        try:
            del bucket[name]
        except KeyError:
            raise ValueError(f"{name!r} is not in the order") from None
        self.size -= 1
        self.version += 1
        if len(bucket) < self.cap // 8:
            self._merge(i)

    def clear(self) -> None:
        self.lows, self.buckets = [0], [{}]
        self.size = 0
        self.version += 1
        self.overfull = False
        self._sorted = None

    def update(self, names: Iterable[Any]) -> None:
        for name in names:
            self.add(name)

    # ---- Rule 3's buckets ------------------------------------------------------------------

    def _split(self, i: int) -> None:
        pairs = self._pairs_of(i)
        mid = len(pairs) // 2
        cut = pairs[mid][0]
        lo = mid
        while lo > 0 and pairs[lo - 1][0] == cut:  # names sharing a hash stay together
            lo -= 1
        if lo == 0:
            hi = mid
            while hi < len(pairs) and pairs[hi][0] == cut:
                hi += 1
            if hi == len(pairs):
                self.overfull = True
                return  # every name shares one hash: nothing to split on
            lo, cut = hi, pairs[hi][0]
        self.buckets[i:i + 1] = [dict.fromkeys(n for _, n in pairs[:lo]),
                                 dict.fromkeys(n for _, n in pairs[lo:])]
        self.lows.insert(i + 1, cut)

    def _merge(self, i: int) -> None:
        buckets = self.buckets
        if len(buckets) == 1:
            return
        j = i if i + 1 < len(buckets) else i - 1  # merge bucket j + 1 into bucket j
        if buckets[i] and len(buckets[j]) + len(buckets[j + 1]) > self.cap // 2:
            return
        buckets[j].update(buckets[j + 1])
        del buckets[j + 1]
        del self.lows[j + 1]

    def _pairs_of(self, i: int) -> list[tuple[int, Any]]:
        """Bucket i's (hash, name) pairs in hash order. The last bucket sorted is kept with a
        copy of its names: while a bucket holds the same names, its order is the same, so a
        scan's pages and a checkpoint's parts that start in it hash nothing again, whatever
        changed elsewhere (comparing the names is a look-up each, by their cached hashes)."""
        bucket = self.buckets[i]
        cached = self._sorted
        if cached is not None and cached[0] == bucket:
            return cached[1]
        pairs = sorted(zip(map(self.key, bucket), bucket, strict=True), key=_first)
        self._sorted = (dict(bucket), pairs)
        return pairs

    # ---- ordered reads ---------------------------------------------------------------------

    def pairs_from(self, cursor: int = 0) -> Iterator[tuple[int, Any]]:
        """(hash, name) of every name whose hash is >= cursor, in hash order. Lazy one bucket
        at a time: the caller takes what it needs before changing the order."""
        i = max(0, bisect_right(self.lows, cursor) - 1)
        first = True
        while i < len(self.buckets):
            pairs = self._pairs_of(i)
            if first and pairs and pairs[0][0] < cursor:
                pairs = pairs[bisect_left(pairs, cursor, key=_first):]
            first = False
            yield from pairs
            i += 1

    def irange_key(self, min_key: int | None = None) -> Iterator[Any]:
        return (n for _, n in self.pairs_from(min_key or 0))

    def __iter__(self) -> Iterator[Any]:
        return self.irange_key()

    def __getitem__(self, index: int) -> Any:
        """The index-th name of the bucket-by-bucket order (see the class)."""
        if index < 0:
            index += self.size
        if not 0 <= index < self.size:
            raise IndexError("ScanOrder index out of range")
        cached = self._starts
        if cached is None or cached[0] != self.version:
            starts = list(accumulate((len(b) for b in self.buckets), initial=0))
            cached = self._starts = (self.version, starts)
        i = bisect_right(cached[1], index) - 1
        return _at(self.buckets[i], index - cached[1][i])

    def choice(self, rnd: Random) -> Any:
        """One name, uniformly at random (RANDOMKEY), in O(1) expected: a random slot of a
        random bucket, drawn again when past the bucket's names (every name has the same
        chance per draw; buckets hold at least `cap // 8` names unless merging could not
        help, so a draw succeeds with odds of about 1/8 at worst). Not empty."""
        buckets = self.buckets
        # every draw's slot range must cover the fullest bucket
        top = max(len(b) for b in buckets) if self.overfull else self.cap
        for _ in range(64):
            bucket = buckets[rnd.randrange(len(buckets))]
            slot = rnd.randrange(top)
            if slot < len(bucket):
                return _at(bucket, slot)
        return self[rnd.randrange(self.size)]  # a sparse order: by position, still uniform

    def check(self) -> None:
        """Every name in the bucket its hash falls in; the ranges ascend (tests call it)."""
        lows, key = self.lows, self.key
        assert lows[0] == 0 and all(a < b for a, b in zip(lows, lows[1:], strict=False))
        assert len(lows) == len(self.buckets)
        assert sum(len(b) for b in self.buckets) == self.size
        assert self.overfull or all(len(b) <= self.cap for b in self.buckets)
        for i, bucket in enumerate(self.buckets):
            top = lows[i + 1] if i + 1 < len(lows) else U64 + 1
            assert all(lows[i] <= key(n) < top for n in bucket), "a name out of its bucket"


def _at(bucket: dict[Any, None], k: int) -> Any:
    """The k-th name of a bucket (0 <= k < len): at most `MAX` steps."""
    return next(islice(bucket, k, None))


def scan_list() -> ScanOrder:
    """Names kept in SCAN order (Rules 1 and 3)."""
    return ScanOrder()


def _pairs(lst: Any, cursor: int) -> Iterator[tuple[int, Any]]:
    if type(lst) is ScanOrder:
        return lst.pairs_from(cursor)
    key = lst.key
    return ((key(n), n) for n in lst.irange_key(min_key=cursor))


def page(lists: Iterable[Any], cursor: int, count: int) -> tuple[int, list[Any]]:
    """Rule 2: (the next cursor, the names of this page) over the union of `lists` (each a
    ScanOrder or a SortedKeyList kept in the same hash order; names are str, or bytes for a
    hash's fields)."""
    its = [_pairs(lst, cursor) for lst in lists]
    pairs = its[0] if len(its) == 1 else merge(*its, key=_first)
    out: list[Any] = []
    last = -1
    for h, name in pairs:
        if len(out) >= count and h != last:
            return h, out
        out.append(name)
        last = h
    return 0, out


class TopicMap(SortedDict):
    """The engine's topics by name (a SortedDict) that also keeps their names in SCAN order in
    `scan` (Rule 4). The values are the engine's Topic objects."""

    def __init__(self) -> None:
        super().__init__()
        self.scan = scan_list()
        lst = self._list
        add, remove, pop, clear, update = lst.add, lst.remove, lst.pop, lst.clear, lst.update
        scan = self.scan

        def add_(key: str) -> None:
            add(key)
            scan.add(key)

        def remove_(key: str) -> None:
            remove(key)
            scan.remove(key)

        def pop_(index: int = -1) -> str:
            key: str = pop(index)
            scan.remove(key)
            return key

        def clear_() -> None:
            clear()
            scan.clear()

        def update_(keys: Iterable[str]) -> None:  # SortedDict.update re-adds every key
            keys = list(keys)
            update(keys)
            scan.clear()
            scan.update(self)

        # SortedDict caches its list's methods as these attributes and calls only them
        for attr, fn in (("_list_add", add_), ("_list_remove", remove_), ("_list_pop", pop_),
                         ("_list_clear", clear_), ("_list_update", update_)):
            setattr(self, attr, fn)

    def check(self) -> None:
        """The two orders hold the same names (tests call it after mutations)."""
        self.scan.check()
        assert [scan_hash(n) for n in self.scan] == sorted(map(scan_hash, self)), \
            "scan order out of step"
        assert sorted(self.scan) == list(self), "scan order out of step"
