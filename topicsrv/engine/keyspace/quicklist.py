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
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

from topicsrv.engine.keyspace import packed

DEFAULT_FILL: Final = -2
HEAD_BYTES: Final = 1024  # Rule 2: a head node this big takes no more pushes at the head


def node_limits(fill: int) -> tuple[int, int]:
    """(max elements, max bytes) of a node for a `list-max-listpack-size` value (Rule 2)."""
    if fill > 0:
        return fill, 1 << 30
    level = min(max(-fill, 1), 5)
    return 1 << 30, 4096 << (level - 1)


class Node:
    __slots__ = ("run", "count")

    def __init__(self, run: bytearray, count: int) -> None:
        self.run = run
        self.count = count


class ListValue:
    __slots__ = ("nodes", "length", "nbytes", "max_count", "max_bytes", "fill", "second")
    KIND: Final = "list"
    ENCODING: Final = "quicklist"  # Redis 7.0's, whatever the length

    def __init__(self, fill: int = DEFAULT_FILL) -> None:
        self.fill = fill
        self.second = 0  # the last access, in whole seconds (OBJECT IDLETIME; space.py Entry)
        self.nodes: list[Node] = []
        self.length = 0
        self.nbytes = 0  # the packed bytes of every node (MEMORY USAGE, INFO)
        self.max_count, self.max_bytes = node_limits(fill)

    # ---- reads ---------------------------------------------------------------------------

    def __len__(self) -> int:
        return self.length

    def _locate(self, index: int) -> tuple[int, int]:
        """(node number, index within it) of element `index` (0 <= index < length), walking
        node counts from the nearer end (Rule 1)."""
        nodes = self.nodes
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
        node = self.nodes[k]
        return packed.read(node.run, packed.offset(node.run, node.count, i))[0]

    def range(self, start: int, stop: int) -> list[bytes]:
        """Elements start..stop inclusive, already clamped to 0 <= start <= stop < length."""
        out: list[bytes] = []
        if start > stop:
            return out
        k, i = self._locate(start)
        want = stop - start + 1
        nodes = self.nodes
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
        for node in self.nodes:
            yield from packed.values(node.run)

    def iter_from(self, start: int) -> Iterator[bytes]:
        """The elements from index `start` on (0 <= start), reaching it by node counts."""
        if start >= self.length:
            return
        k, i = self._locate(start)
        nodes = self.nodes
        node = nodes[k]
        yield from packed.values(node.run, packed.offset(node.run, node.count, i))
        for node in nodes[k + 1:]:
            yield from packed.values(node.run)

    def reversed(self) -> Iterator[bytes]:
        for k in range(len(self.nodes) - 1, -1, -1):
            yield from packed.values_back(self.nodes[k].run)

    # ---- the ends (Rule 1) --------------------------------------------------------------

    def _fits(self, node: Node, extra: int) -> bool:
        return node.count < self.max_count and len(node.run) + extra <= self.max_bytes

    def push_head(self, value: bytes) -> None:
        data = packed.encode(value)
        nodes = self.nodes
        if nodes and len(nodes[0].run) < HEAD_BYTES and self._fits(nodes[0], len(data)):
            node = nodes[0]
            node.run[0:0] = data
            node.count += 1
        else:
            nodes.insert(0, Node(bytearray(data), 1))
        self.length += 1
        self.nbytes += len(data)

    def push_tail(self, value: bytes) -> None:
        data = packed.encode(value)
        nodes = self.nodes
        if nodes and self._fits(nodes[-1], len(data)):
            node = nodes[-1]
            node.run += data
            node.count += 1
        else:
            nodes.append(Node(bytearray(data), 1))
        self.length += 1
        self.nbytes += len(data)

    def pop_head(self) -> bytes:
        node = self.nodes[0]
        value, end = packed.read(node.run, 0)
        del node.run[:end]
        self._popped(node, 0, end)
        return value

    def pop_tail(self) -> bytes:
        node = self.nodes[-1]
        run = node.run
        value, start = packed.read_back(run, len(run))
        size = len(run) - start
        del run[start:]
        self._popped(node, len(self.nodes) - 1, size)
        return value

    def _popped(self, node: Node, k: int, size: int) -> None:
        node.count -= 1
        self.length -= 1
        self.nbytes -= size
        if node.count == 0:
            del self.nodes[k]

    # ---- any position (Rule 3) ----------------------------------------------------------

    def splice(self, pos: int, remove: int, insert: list[bytes]) -> list[bytes]:
        """From position `pos` (0 <= pos <= length), remove `remove` elements (as many as
        there are), then insert `insert` there; the removed elements, in order."""
        if pos == 0 and remove == 0:
            for v in reversed(insert):
                self.push_head(v)
            return []
        if pos == self.length and remove == 0:
            for v in insert:
                self.push_tail(v)
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
        lv.nodes = lv._pack(items)
        lv.length = len(items)
        lv.nbytes = sum(len(n.run) for n in lv.nodes)
        return lv
