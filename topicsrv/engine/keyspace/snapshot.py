"""The keyspace at one instant, read in parts while the server goes on changing it (the
checkpoint's keyspace: storage/keyspacesave.py). Sans-IO and synchronous.

Rule 1 (the instant): a Snapshot stands for the keyspace as it was in the step that made it
(the checkpoint's cut, storage/checkpoint.py Rule 1), yet copies nothing then: it walks the
keys in SCAN order (`Keyspace.order`, scanorder.py), `cursor` marking how far it has read
(every key whose hash is below it has been read whole), and notes the TTLs of the topics.
Rule 2 (keep before change): `Keyspace.apply` calls `before(change)` before it changes a key
while a snapshot runs. A key the walk has not read yet, and whose image is not kept yet, keeps
its image of now: a string's value, deadline and encoding (its bytes are immutable), a list or
hash (the object itself when the change drops or replaces it, a copy when the change edits it
in place: "L", "H", "h", "x"), or None when the key does not exist. A key already read, or
already kept, costs nothing; so a key reads as it was at the instant: its kept image if any,
else the live key, which no change has touched since.
Rule 3 (parts): `next_part(units)` returns the next operation (a list of changes, replayed in
order after the part before it) covering about `units` keys and elements, or None once done.
A collection longer than `units` is written in pieces: a whole-collection change ("c") of its
first elements, then appends (colls.py `piece_change`), then what rides on its elements
(`tail_changes`: a hash's field deadlines), so no part handles more than about `units`
elements; the collection being written counts as not
read yet for Rule 2 until its last piece.
Rule 4 (the end): the images kept of keys the walk never met (deleted or renamed since the
instant) come last, then the TTLs the topics had at the instant. A flush while a snapshot
runs keeps the image of every key not read yet first (O(keys) in that step, once).
"""

from __future__ import annotations

from itertools import islice
from typing import TYPE_CHECKING, Any, Final

from topicsrv.engine.keyspace import colls as colls_mod
from topicsrv.engine.keyspace.ops import Change, Op
from topicsrv.engine.keyspace.scanorder import scan_hash

if TYPE_CHECKING:
    from topicsrv.engine.keyspace.space import Keyspace

PART_UNITS: Final = 256  # keys and elements per part (Rule 3): about a ms of work at most
_IN_PLACE: Final = frozenset(("L", "H", "h", "x", "Z", "S"))
_DONE: Final = 1 << 64  # the cursor once every key is read


class Snapshot:
    def __init__(self, ks: Keyspace) -> None:
        self.ks = ks
        self.cursor = 0  # Rule 1
        self.kept: dict[str, Any] = {}  # Rule 2: name -> string image, collection, or None
        self.flushed = False  # Rule 4: the first part starts with a flush
        self.piece: _Piece | None = None  # the collection being written (Rule 3)
        deadlines, topics = ks.expiry.deadlines, ks.host.topics
        self.topic_ttls: Op = []
        for name, topic in topics.items():
            d = deadlines.get(name)
            if d:
                self.topic_ttls.append(("x", name, d, topic.epoch))
        self.finished = False

    # ---- Rule 2 --------------------------------------------------------------------------

    def before(self, ch: Change) -> None:
        kind = ch[0]
        if kind == "f":
            self._keep_all()
            return
        name: str = ch[1]
        piece = self.piece
        if piece is not None and piece.name == name:
            if not piece.frozen:  # the collection being written: go on from a frozen copy
                piece.freeze(colls_mod.copy(piece.value) if kind in _IN_PLACE else piece.value)
            return
        if name in self.kept or scan_hash(name) < self.cursor:
            return
        self.kept[name] = self._image(name, kind in _IN_PLACE)

    def _image(self, name: str, copy: bool) -> Any:
        ks = self.ks
        e = ks.strings.get(name)
        if e is not None:
            return ("s", name, e.value, ks.expiry.deadlines.get(name, 0), ks.enc.get(name, ""))
        value = ks.colls.get(name)
        if value is None:
            return None
        return _Image(colls_mod.copy(value) if copy else value, ks.expiry.deadlines.get(name, 0))

    def _keep_all(self) -> None:
        ks = self.ks
        for name in ks.order.irange_key(min_key=self.cursor):
            if name not in self.kept:
                self.kept[name] = self._image(name, False)  # a flush drops every object
        piece = self.piece
        if piece is not None and not piece.frozen:
            piece.freeze(piece.value)

    # ---- Rules 3-4 -----------------------------------------------------------------------

    def next_part(self, units: int = PART_UNITS) -> Op | None:
        if self.finished:
            return None
        out: Op = []
        if not self.flushed:
            out.append(("f",))
            self.flushed = True
        budget = units
        if self.piece is not None:
            budget -= self._continue(out, budget)
        order = self.ks.order
        # `_busy()`, not `self.piece is None`: `_one` sets the piece, and a test of the
        # attribute here would narrow it to None for the compiled build (mypyc checks it)
        while budget > 0 and not self._busy() and self.cursor < _DONE:
            # the names from the cursor on, and the one after them (taken before any is read)
            pairs = list(islice(order.pairs_from(self.cursor), budget + 1))
            used = min(len(pairs), budget)
            for k in range(used):
                budget -= self._one(out, pairs[k][1], budget)
                if self._busy() or budget <= 0:
                    used = k + 1
                    break
            # the next name's hash (a name sharing the last one's is read again: harmless)
            self.cursor = pairs[used][0] if used < len(pairs) else _DONE
        if not self._busy() and self.cursor >= _DONE:
            out += self._leftovers()
            self.finished = True
        return out

    def _busy(self) -> bool:
        """A collection is being written in pieces (Rule 3)."""
        return self.piece is not None

    def _one(self, out: Op, name: str, budget: int) -> int:
        """Write one key met by the walk (its kept image first, Rule 2); the units spent."""
        if name in self.kept:
            image = self.kept.pop(name)
            if image is None:
                return 1
            if isinstance(image, tuple):
                out.append(image)
                return 1
            return self._start(out, name, image.value, image.deadline, True, budget)
        ks = self.ks
        e = ks.strings.get(name)
        if e is not None:
            out.append(("s", name, e.value, ks.expiry.deadlines.get(name, 0), ks.enc.get(name, "")))
            return 1
        return self._start(out, name, ks.colls[name], ks.expiry.deadlines.get(name, 0), False, budget)

    def _start(self, out: Op, name: str, value: Any, deadline: int, frozen: bool, budget: int) -> int:
        if len(value) <= max(budget, 1):
            out.append(colls_mod.put_change(name, value, deadline))
            return len(value)
        self.piece = _Piece(name, value, deadline, frozen)
        return self._continue(out, budget)

    def _continue(self, out: Op, budget: int) -> int:
        piece = self.piece
        assert piece is not None
        spent = piece.write(out, max(budget, 1))
        if piece.done:
            self.piece = None
        return spent

    def _leftovers(self) -> Op:
        out: Op = []
        for name, image in self.kept.items():
            if image is None:
                continue
            if isinstance(image, tuple):
                out.append(image)
            else:
                out.append(colls_mod.put_change(name, image.value, image.deadline))
        self.kept.clear()
        return out + self.topic_ttls


class _Image:
    __slots__ = ("value", "deadline")

    def __init__(self, value: Any, deadline: int) -> None:
        self.value = value
        self.deadline = deadline


class _Piece:
    """A collection written in pieces (Rule 3): `pos` elements written so far."""

    def __init__(self, name: str, value: Any, deadline: int, frozen: bool) -> None:
        self.name = name
        self.value = value
        self.deadline = deadline
        self.frozen = frozen
        self.pos = 0
        self.done = False
        self.items: Any = None  # colls.elements' iterator, resumed from part to part

    def freeze(self, value: Any) -> None:
        """The live collection is about to change: go on from `value` (a copy, or the object
        the change drops), skipping what is written already."""
        self.value = value
        self.frozen = True
        if self.items is not None:
            self.items = colls_mod.elements(value, self.pos)

    def write(self, out: Op, budget: int) -> int:
        value, name = self.value, self.name
        n = len(value)
        stop = min(self.pos + budget, n)
        if self.items is None:
            self.items = colls_mod.elements(value, 0)
        chunk = [next(self.items) for _ in range(stop - self.pos)]
        out.append(colls_mod.piece_change(name, value, chunk, self.pos, self.deadline))
        spent = stop - self.pos
        self.pos = stop
        if stop >= n:
            self.done = True
            out += colls_mod.tail_changes(name, value)
        return spent
