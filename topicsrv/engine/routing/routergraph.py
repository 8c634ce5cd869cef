"""The router graph: topics are nodes, routers are directed edges source -> dest.

Rule 1 (DAG by default): an edge that closes a directed cycle is refused unless it is
`allow_cycle`; the refusal names the cycle as topic names from the new edge's source back to
it (`["a","b","a"]`), the shortest such cycle.
Rule 2 (hop cap): a router forwards a record only if its hop count is below the router's cap:
`max_hops` when given, else for an edge on a directed cycle (the length of the shortest cycle
through it) - 1 (A<->B: 1, a 3-ring: 2), else unlimited (None). So around a mirror or a ring
each record reaches every other topic exactly once. Caps are recomputed on every graph change.
Rule 3: the graph is small (routers are configuration); every check is a BFS over it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping

MAX_AUTO_CAP = 255  # a cycle longer than this gets this cap (hops are small ints)


def adjacency(edges: Iterable[tuple[str, str]]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for source, dest in edges:
        out.setdefault(source, []).append(dest)
    return out


def shortest_path(adj: Mapping[str, list[str]], start: str, goal: str) -> list[str] | None:
    """The shortest directed path start -> goal as topic names (both ends included)."""
    if start == goal:
        return [start]
    prev: dict[str, str] = {start: start}
    todo = deque([start])
    while todo:
        node = todo.popleft()
        for nxt in sorted(adj.get(node, ())):
            if nxt in prev:
                continue
            prev[nxt] = node
            if nxt == goal:
                path = [goal]
                while path[-1] != start:
                    path.append(prev[path[-1]])
                return path[::-1]
            todo.append(nxt)
    return None


def cycle_through(adj: Mapping[str, list[str]], source: str, dest: str) -> list[str] | None:
    """The cycle a new edge source -> dest would close (Rule 1), or None."""
    back = shortest_path(adj, dest, source)
    return None if back is None else [source, *back]


def hop_cap(adj: Mapping[str, list[str]], source: str, dest: str, max_hops: int | None) -> int | None:
    """The effective cap of the edge source -> dest, which is in `adj` (Rule 2)."""
    if max_hops is not None:
        return max_hops
    back = shortest_path(adj, dest, source)
    if back is None:
        return None
    return min(len(back) - 1, MAX_AUTO_CAP)  # the cycle has len(back) edges; the cap is one less
