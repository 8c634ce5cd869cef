"""SCAN's order: every key name by a stable 64-bit hash, so a cursor is a Redis cursor (u64).

Rule 1: `scan_hash(name)` is the first 8 bytes of BLAKE2b over the name's bytes: the same in
every process and after a restart, so a cursor outlives the connection and the server, and
always fits an unsigned 64-bit integer (clients in other languages parse it so).
Rule 2: a page returns the names whose hashes lie in [cursor, next): it takes names in hash
order until it has `count` and the next name's hash differs from the last one taken (names
sharing a hash are never split between pages), and the next cursor is that next name's hash
(0 once none is left). The pages of one scan cover [0, 2^64) without overlap, so a key present
for the whole scan is returned, whatever comes and goes meanwhile (Redis's guarantee).
Rule 3: the strings keep their names in hash order themselves (keyspace `order`); the topics
in `TopicMap.scan`, which the SortedDict's own add/remove/clear keep in step: every way the
map changes its key set goes through those cached methods, so no caller needs to know.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from hashlib import blake2b
from heapq import merge
from typing import Any

from sortedcontainers import SortedDict, SortedKeyList

U64 = (1 << 64) - 1


def scan_hash(name: str) -> int:
    """Rule 1."""
    return field_hash(name.encode("latin-1"))


def field_hash(raw: bytes) -> int:
    """Rule 1 over bytes: a key name's, or a hash field's (HSCAN's order, hashvalue.py)."""
    return int.from_bytes(blake2b(raw, digest_size=8).digest(), "big")


def scan_list() -> SortedKeyList:
    """Names kept in SCAN order (Rule 1)."""
    return SortedKeyList(key=scan_hash)


def page(lists: Iterable[SortedKeyList], cursor: int, count: int) -> tuple[int, list[Any]]:
    """Rule 2: (the next cursor, the names of this page) over the union of `lists` (each kept
    in the same hash order; names are str, or bytes for a hash's fields)."""
    lists = list(lists)
    key: Callable[[Any], int] = lists[0].key if lists else scan_hash
    out: list[Any] = []
    last = -1
    names: Iterator[Any] = merge(*(lst.irange_key(min_key=cursor) for lst in lists), key=key)
    for name in names:
        h = key(name)
        if len(out) >= count and h != last:
            return h, out
        out.append(name)
        last = h
    return 0, out


class TopicMap(SortedDict):
    """The engine's topics by name (a SortedDict) that also keeps their names in SCAN order in
    `scan` (Rule 3). The values are the engine's Topic objects."""

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
        assert list(self.scan) == sorted(self, key=scan_hash), "scan order out of step"
