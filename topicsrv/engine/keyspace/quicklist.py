"""A list value: a sequence of nodes, each a packed run of elements (engine/keyspace/packed.py),
as Redis's quicklist of listpacks. Sans-IO, typed for the compiled build.

Rule 1 (complexity, as Redis): a push or a pop at either end touches one end node (O(1) but
for the node's memmove); an index near either end walks from that end; a position in the
middle walks nodes by their counts, then one node's elements.
Rule 2 (node size): a node holds at most `fill` elements when `fill` > 0, else at most
(4096 << (-fill - 1)) bytes, as `list-max-listpack-size` (-1: 4 KB ... -5: 64 KB; default -2:
8 KB); an element larger than that sits in a node of its own. Nodes never stay empty. A push
at the head begins a new node once the head node holds HEAD_BYTES or more (below the limit):
an element put in front moves the whole node (a bytearray has no room before its start), so
lists grown by LPUSH keep their head node small (~0.6 us an LPUSH less on 2 KB nodes; RPUSH,
which appends, fills nodes to the limit). OBJECT ENCODING is quicklist whatever the nodes.
Rule 3 (one primitive for changes): every mutation is `splice(pos, remove, insert)`: from
position `pos`, remove `remove` elements, then insert `insert` there. The commands compute
positions; replay applies the same splices (engine/keyspace/ops.py), so the list after
replay is the list the commands made.
Rule 4 (outside the cyclic GC): Node and ListValue are acyclic native classes (data only, no
reference back), so in the compiled build CPython's cyclic GC neither tracks nor walks them;
a list of one node (every list up to the node size) holds it in `one`, and `many` holds two
to TUPLE_NODES nodes in a tuple (CPython stops tracking a tuple of untracked objects at the
first collection it survives), more in a list (a node added or removed at an end stays O(1)
for a long list; a tuple is copied, at most TUPLE_NODES pointers): a keyspace of lists up to
~100 KB adds no object for a full collection to walk (docs/decisions.md, "The keyspace's
values outside the cyclic GC").
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Final

from mypy_extensions import mypyc_attr

from topicsrv.engine.keyspace import packed

DEFAULT_FILL: Final = -2
HEAD_BYTES: Final = 1024  # Rule 2: a head node this big takes no more pushes at the head
TUPLE_NODES: Final = 32  # Rule 4: the most nodes `many` keeps in a tuple


def node_limits(fill: int) -> tuple[int, int]:
    """(max elements, max bytes) of a node for a `list-max-listpack-size` value (Rule 2)."""
    if fill > 0:
        return fill, 1 << 30
    level = min(max(-fill, 1), 5)
    return 1 << 30, 4096 << (level - 1)


@mypyc_attr(acyclic=True)  # Rule 4
class Node:
    __slots__ = ("run", "count")

    def __init__(self, run: bytearray, count: int) -> None:
        self.run = run
        self.count = count


@mypyc_attr(acyclic=True)  # Rule 4
class ListValue:
    __slots__ = ("one", "many", "length", "nbytes", "max_count", "max_bytes", "fill", "second")
    KIND: Final = "list"
    ENCODING: Final = "quicklist"  # Redis 7.0's, whatever the length

    def __init__(self, fill: int = DEFAULT_FILL) -> None:
        self.fill = fill
        self.second = 0  # the last access, in whole seconds (OBJECT IDLETIME; space.py Entry)
        self.one: Node | None = None  # Rule 4: the only node of a one-node list
        self.many: tuple[Node, ...] | list[Node] | None = None  # Rule 4: two nodes or more
        self.length = 0
        self.nbytes = 0  # the packed bytes of every node (MEMORY USAGE, INFO)
        self.max_count, self.max_bytes = node_limits(fill)

    # ---- the nodes, in either shape (Rule 4) -----------------------------------------------

    @property
    def nodes(self) -> list[Node]:
        """The nodes in order: `many` itself when it is a list, else a new list."""
        many = self.many
        if type(many) is list:
            return many
        if many is not None:
            return list(many)
        one = self.one
        return [] if one is None else [one]

    def _seq(self) -> Sequence[Node]:
        """The nodes in order, for reading: `many` itself, or a tuple of the one."""
        many = self.many
        if many is not None:
            return many
        one = self.one
        return () if one is None else (one,)

    def _set(self, nodes: list[Node]) -> None:
        """`nodes` (non-empty ones, in order) become the value's, in Rule 4's shape."""
        n = len(nodes)
        if n > TUPLE_NODES:
            self.one, self.many = None, nodes
        elif n > 1:
            self.one, self.many = None, tuple(nodes)
        else:
            self.one, self.many = (nodes[0] if nodes else None), None

    def copy(self) -> ListValue:
        """A copy with its own bytes (the checkpoint's image of a key about to change)."""
        out = ListValue(self.fill)
        out._set([Node(bytearray(n.run), n.count) for n in self.nodes])
        out.length, out.nbytes = self.length, self.nbytes
        return out

    # ---- reads ---------------------------------------------------------------------------

    def __len__(self) -> int:
        return self.length

    def _locate(self, index: int) -> tuple[int, int]:
        """(node number, index within it) of element `index` (0 <= index < length), walking
        node counts from the nearer end (Rule 1)."""
        nodes = self.many
        if nodes is None:
            return 0, index  # one node (Rule 4)
        if index < self.length - index:
            for k, node in enumerate(nodes):
                if index < node.count:
                    return k, index
                index -= node.count
        else:
            back = self.length - index  # 1-based from the end
            for k in range(len(nodes) - 1, -1, -1):
                node = nodes[k]
                if back <= node.count:
                    return k, node.count - back
                back -= node.count
        raise IndexError(index)

    def get(self, index: int) -> bytes | None:
        """Element `index` (negative: from the end), None out of range."""
        if index < 0:
            index += self.length
        if not 0 <= index < self.length:
            return None
        k, i = self._locate(index)
        node = self._seq()[k]
        return packed.read(node.run, packed.offset(node.run, node.count, i))[0]

    def range(self, start: int, stop: int) -> list[bytes]:
        """Elements start..stop inclusive, already clamped to 0 <= start <= stop < length."""
        out: list[bytes] = []
        if start > stop:
            return out
        k, i = self._locate(start)
        want = stop - start + 1
        nodes = self._seq()
        while want > 0:
            node = nodes[k]
            run = node.run
            pos = packed.offset(run, node.count, i)
            take = min(node.count - i, want)
            for _ in range(take):
                v, pos = packed.read(run, pos)
                out.append(v)
            want -= take
            k += 1
            i = 0
        return out

    def __iter__(self) -> Iterator[bytes]:
        for node in self._seq():
            yield from packed.values(node.run)

    def iter_from(self, start: int) -> Iterator[bytes]:
        """The elements from index `start` on (0 <= start), reaching it by node counts."""
        if start >= self.length:
            return
        k, i = self._locate(start)
        nodes = self._seq()
        node = nodes[k]
        yield from packed.values(node.run, packed.offset(node.run, node.count, i))
        for node in nodes[k + 1:]:
            yield from packed.values(node.run)

    def reversed(self) -> Iterator[bytes]:
        nodes = self._seq()
        for k in range(len(nodes) - 1, -1, -1):
            yield from packed.values_back(nodes[k].run)

    # ---- the ends (Rule 1) --------------------------------------------------------------

    def _fits(self, node: Node, extra: int) -> bool:
        return node.count < self.max_count and len(node.run) + extra <= self.max_bytes

    def push_head(self, value: bytes) -> None:
        data = packed.encode(value)
        many = self.many
        node = self.one if many is None else many[0]
        if node is not None and len(node.run) < HEAD_BYTES and self._fits(node, len(data)):
            node.run[0:0] = data
            node.count += 1
        elif node is None:
            self.one = Node(bytearray(data), 1)
        elif type(many) is list:
            many.insert(0, Node(bytearray(data), 1))
        else:
            self._set([Node(bytearray(data), 1), *self.nodes])
        self.length += 1
        self.nbytes += len(data)

    def push_tail(self, value: bytes) -> None:
        data = packed.encode(value)
        many = self.many
        node = self.one if many is None else many[-1]
        if node is not None and self._fits(node, len(data)):
            node.run += data
            node.count += 1
        elif node is None:
            self.one = Node(bytearray(data), 1)
        elif type(many) is list:
            many.append(Node(bytearray(data), 1))
        else:
            self._set([*self.nodes, Node(bytearray(data), 1)])
        self.length += 1
        self.nbytes += len(data)

    def pop_head(self) -> bytes:
        many = self.many
        node = self.one if many is None else many[0]
        assert node is not None
        value, end = packed.read(node.run, 0)
        del node.run[:end]
        self._popped(node, 0, end)
        return value

    def pop_tail(self) -> bytes:
        many = self.many
        node = self.one if many is None else many[-1]
        assert node is not None
        run = node.run
        value, start = packed.read_back(run, len(run))
        size = len(run) - start
        del run[start:]
        self._popped(node, -1, size)
        return value

    def _popped(self, node: Node, k: int, size: int) -> None:
        node.count -= 1
        self.length -= 1
        self.nbytes -= size
        if node.count == 0:
            if self.many is None:
                self.one = None
            else:
                nodes = self.nodes
                del nodes[k]
                self._set(nodes)

    # ---- any position (Rule 3) ----------------------------------------------------------

    def splice(self, pos: int, remove: int, insert: list[bytes]) -> list[bytes]:
        """From position `pos` (0 <= pos <= length), remove `remove` elements (as many as
        there are), then insert `insert` there; the removed elements, in order."""
        if pos == self.length and remove == 0:  # an empty list's too: nodes filled up (Rule 2)
            for v in insert:
                self.push_tail(v)
            return []
        if pos == 0 and remove == 0:
            for v in reversed(insert):
                self.push_head(v)
            return []
        if pos == 0 and not insert and remove <= self.length:
            return [self.pop_head() for _ in range(remove)]
        if not insert and pos + remove >= self.length and pos < self.length:
            out = [self.pop_tail() for _ in range(self.length - pos)]
            out.reverse()
            return out
        return self._rebuild(pos, remove, insert)

    def _rebuild(self, pos: int, remove: int, insert: list[bytes]) -> list[bytes]:
        """The general splice: the nodes it touches are decoded, changed and packed again
        (split at the node limits)."""
        nodes = self.nodes
        if pos >= self.length:
            k, start = len(nodes), self.length
        else:
            k, i = self._locate(pos)
            start = pos - i  # the position of node k's first element
        end_pos = min(pos + remove, self.length)
        first = k
        items: list[bytes] = []
        at = start
        while k < len(nodes) and (at < end_pos or k == first):
            items.extend(packed.values(nodes[k].run))
            at += nodes[k].count
            k += 1
        lo = pos - start
        removed = items[lo:lo + (end_pos - pos)]
        items[lo:lo + (end_pos - pos)] = insert
        old = sum(len(n.run) for n in nodes[first:k])
        fresh = self._pack(items)
        nodes[first:k] = fresh
        self._set(nodes)
        self.length += len(insert) - len(removed)
        self.nbytes += sum(len(n.run) for n in fresh) - old
        return removed

    def _pack(self, items: list[bytes]) -> list[Node]:
        out: list[Node] = []
        run = bytearray()
        count = 0
        for v in items:
            data = packed.encode(v)
            if count and (count >= self.max_count or len(run) + len(data) > self.max_bytes):
                out.append(Node(run, count))
                run, count = bytearray(), 0
            run += data
            count += 1
        if count:
            out.append(Node(run, count))
        return out

    @classmethod
    def of(cls, items: list[bytes], fill: int = DEFAULT_FILL) -> ListValue:
        lv = cls(fill)
        nodes = lv._pack(items)
        lv._set(nodes)
        lv.length = len(items)
        lv.nbytes = sum(len(n.run) for n in nodes)
        return lv
