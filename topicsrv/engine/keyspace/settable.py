"""A big set's members (setvalue.py Rule 1's `Table`): a Python set that also carries what only
a big set needs (byte count, SSCAN index, random pool, access stamp: setvalue.py Rules 4-6). Sans-IO.

Rule 1: this module stays plain Python while setvalue.py is compiled: mypyc cannot compile a
subclass of `set`, and the compiled module only tests `type(data) is Table` and reads these
attributes.
"""

from __future__ import annotations

from collections.abc import Iterable

from sortedcontainers import SortedKeyList


class Table(set[bytes]):
    """A big set's members, with what only a big set needs (setvalue.py Rules 4-6)."""

    __slots__ = ("nbytes", "index", "pool", "gone", "order", "second")

    def __init__(self, members: Iterable[bytes] = ()) -> None:
        super().__init__(members)
        self.nbytes = sum(len(m) for m in self)
        self.index: SortedKeyList | None = None
        self.pool: list[bytes] | None = None  # setvalue.py Rule 5
        self.gone: set[bytes] = set()
        self.order: tuple[bytes, ...] | None = None  # a copy's members in its source's order
        self.second = 0  # the last access, whole seconds (the set's, setvalue.py Rule 4)
