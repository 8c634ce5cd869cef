"""The replication backlog: the journal frames of the last `size` bytes, by offset (sans-IO).

Rule 1 (offsets): `offset` is the number of bytes ever fed since the backlog began at
`start` (Redis's master_repl_offset); a replica's position is such an offset, and a frame
begins and ends at one. `since(off)` is every byte from `off` to the end, or None when `off`
is older than what is kept (the replica then needs a full sync) or ahead of the end.
Rule 2 (what is fed): whole WAL frames (storage/frames.py), as the primary's storage
enqueues them, minus the ones that only say where its own files stand (T_CEIL, T_SEGDROP).
Rule 3 (commit groups): the frames of one commit group (a MULTI/EXEC, a script:
storage/txgroup.py) are held while the group is open and fed as ONE T_REPL_GROUP frame at its
end, so a replica applies them in one step or not at all; a discarded group feeds nothing.
Rule 4 (listeners): every feed is handed to each listener (a replica's link on the primary:
repl/primary.py) at once, in order, after it was kept.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Final

from topicsrv.storage import frames

_SKIPPED: Final = frozenset({frames.T_CEIL, frames.T_SEGDROP})  # Rule 2
DEFAULT_SIZE: Final = 1 << 20  # repl-backlog-size, as Redis's default (1 MB)


class Backlog:
    def __init__(self, size: int = DEFAULT_SIZE, start: int = 0) -> None:
        self.size = max(size, 16 << 10)
        self.start = start  # the offset of the first byte ever fed
        self.offset = start
        self.parts: deque[tuple[int, bytes]] = deque()  # (offset of the part's first byte, bytes)
        self.kept = 0
        self.depth = 0  # Rule 3: open commit groups (nested: the outermost decides)
        self.held: list[bytes] = []
        self.listeners: list[Callable[[bytes], None]] = []

    @property
    def first(self) -> int:
        """The oldest offset `since` still answers."""
        return self.parts[0][0] if self.parts else self.offset

    def frame(self, frame: bytes) -> None:
        """A WAL frame as storage enqueued it (Rule 2)."""
        if frame[4] in _SKIPPED:
            return
        if self.depth:
            self.held.append(frame)
        else:
            self._feed(frame)

    def body(self, ftype: int, body: bytes) -> None:
        self.frame(frames.encode(ftype, body))

    def begin_group(self) -> None:
        self.depth += 1

    def end_group(self) -> None:
        if not self.depth:
            return
        self.depth -= 1
        if self.depth:
            return
        held, self.held = self.held, []
        if len(held) == 1:
            self._feed(held[0])
        elif held:
            self._feed(frames.encode(frames.T_REPL_GROUP, b"".join(held)))

    def discard_group(self) -> None:
        self.depth = 0
        self.held = []

    def ping(self) -> None:
        """Ask every replica for an acknowledgement (it answers once it applied up to here)."""
        self._feed(frames.encode(frames.T_REPL_PING, b""))

    def feed(self, data: bytes) -> None:
        """Bytes that are already whole frames (a replica's copy of its primary's stream)."""
        self._feed(data)

    def _feed(self, data: bytes) -> None:
        self.parts.append((self.offset, data))
        self.offset += len(data)
        self.kept += len(data)
        while self.kept - len(self.parts[0][1]) >= self.size and len(self.parts) > 1:
            self.kept -= len(self.parts.popleft()[1])
        for listener in self.listeners:
            listener(data)

    def since(self, off: int) -> bytes | None:
        """Rule 1."""
        if off > self.offset or off < self.first:
            return None
        out: list[bytes] = []
        for start, data in self.parts:
            end = start + len(data)
            if end <= off:
                continue
            out.append(data[off - start:] if start < off else data)
        return b"".join(out)

    def histlen(self) -> int:
        return self.offset - self.first
