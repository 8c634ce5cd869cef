"""The primary's side: a replica's link, the backlog it reads, acknowledgements, WAIT.

Rule 1 (the backlog begins with the first replica): until a replica asks for a sync, no
frame is kept and the write path pays nothing; `attach` hands storage a backlog
(storage/wal.py Rule 10), which stays from then on.
Rule 2 (PSYNC): a replica that names this primary's replid (or its previous one, up to the
offset where it ended: state.py Rule 2) and an offset the backlog still holds resumes from
there (+CONTINUE); any other gets a full sync: a checkpoint, its files (storage/replsync.py),
then the frames after its cut (+FULLRESYNC). Either way the reply ends with the backlog up to
now and, in the same step, the link starts receiving every later frame, so nothing falls
between the two.
Rule 3 (links are clients): a link is the replica's RESP connection; frames are appended to
its output like pub/sub messages (resp/pubsub.py Rules 1-3) and a link whose unsent output
passes `output_limit` is closed (Redis's replica output buffer limit); the replica then
resumes from its offset. CLIENT LIST and CLIENT KILL TYPE replica see it.
Rule 4 (acknowledgements): a replica sends `REPLCONF ACK <offset>` once it applied up to
there (after each batch it received, and every second); WAIT returns once enough links
acknowledged the offset the backlog had when it was called (every write of the caller is
before it), asking them first with a T_REPL_PING frame.
Rule 5 (min-replicas-to-write): with `min_replicas_to_write` N > 0, a write is refused with
-NOREPLICAS unless N links acknowledged within `min_replicas_max_lag` seconds.
Rule 6 (min-replicas-to-ack, synchronous replication): with N > 0, the reply of every RESP
command that fed the backlog (a write, EXEC, a script that wrote) waits, like an fsync-class
commit, until N links acknowledged the offset after it (dispatch.py Rule 11): an acknowledged
write is on N replicas. Past min-replicas-max-lag seconds the reply is -NOREPLICAS (the write
stands on the primary, and reaches the replicas when they come back).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import trio

from topicsrv.errors import TopicsError
from topicsrv.repl.backlog import Backlog

if TYPE_CHECKING:
    from topicsrv.repl.state import ReplState
    from topicsrv.storage.store import Storage

log = logging.getLogger("topicsrv.repl")

OUTPUT_LIMIT = 256 << 20  # client-output-buffer-limit replica (Redis's hard limit)


@dataclass(eq=False)
class Link:
    client: Any  # resp/state.py Client
    ip: str
    port: int  # the replica's listening port (REPLCONF listening-port)
    ack: int = 0
    ack_time: float = field(default_factory=time.monotonic)
    closed: bool = False

    def lag(self) -> int:
        return int(time.monotonic() - self.ack_time)


class Primary:
    def __init__(self, state: ReplState) -> None:
        self.state = state
        self.backlog: Backlog | None = None
        self.links: list[Link] = []
        self.acked = trio.Event()  # Rule 4: set (and replaced) on every ACK
        self.handshakes: dict[int, dict[str, Any]] = {}  # client id -> what REPLCONF said
        self.full_syncs = 0
        self.partial_syncs = 0
        self.partial_refused = 0  # a replica named a replid/offset this primary cannot resume

    @property
    def offset(self) -> int:
        return self.backlog.offset if self.backlog is not None else self.state.offset

    def attach(self, storage: Storage | None) -> Backlog:
        """Rule 1 (a promoted replica keeps the backlog its link filled)."""
        if self.backlog is None:
            self.backlog = Backlog(self.state.backlog_size, self.state.offset)
        if storage is not None:
            for sh in storage.shards:
                sh.tee = self.backlog
        return self.backlog

    def shadow(self, off: int) -> None:
        """A replica keeps the frames it receives in a backlog of its own (replica.py Rule 3),
        fed by the link, not by its storage, so that once promoted it can resume its peers."""
        if self.backlog is None or self.backlog.offset != off:
            self.backlog = Backlog(self.state.backlog_size, off)

    def shadow_feed(self, data: bytes) -> None:
        if self.backlog is not None:
            self.backlog.feed(data)

    def detach(self, storage: Storage | None) -> None:
        """The server became a replica: its own writes no longer feed anyone."""
        if self.backlog is not None:
            self.state.offset = self.backlog.offset
        if storage is not None:
            for sh in storage.shards:
                sh.tee = None
        for link in list(self.links):
            self.drop(link)
            link.client.kill()
        self.backlog = None

    def can_resume(self, replid: str, off: int) -> bool:
        """Rule 2."""
        st = self.state
        if self.backlog is None or off < 0:
            return False
        if replid == st.replid or (replid == st.replid2 and off <= st.second_offset):
            return self.backlog.since(off) is not None
        return False

    def link(self, client: Any, ip: str, port: int, off: int, reply: bytes) -> Link:
        """Rule 2: `reply` (PSYNC's, with the backlog up to now) goes into the client's output
        at once, and every frame fed from now on after it: the handler answers nothing itself,
        since a frame fed between its return and its reply's turn would come first."""
        backlog = self.backlog
        assert backlog is not None
        link = Link(client, ip, port, ack=off)
        session = client.session

        def send(data: bytes, link: Link = link) -> None:
            if link.closed:
                return
            if len(session.out) - session.sent_off > OUTPUT_LIMIT:
                log.warning("replica %s:%d closed: its unsent output passed %d bytes (it resumes "
                            "from its offset)", link.ip, link.port, OUTPUT_LIMIT)
                self.drop(link)
                session.drop_output()
                client.kill()
                return
            session.out += data
            session.wake()

        session.out += reply
        session.wake()
        link_send = send
        backlog.listeners.append(link_send)
        link.send = link_send  # type: ignore[attr-defined]
        client.repl = link
        self.handshakes.pop(client.id, None)
        self.links.append(link)
        return link

    def drop(self, link: Link) -> None:
        if link.closed:
            return
        link.closed = True
        if link in self.links:
            self.links.remove(link)
        if self.backlog is not None:
            send = getattr(link, "send", None)
            if send in self.backlog.listeners:
                self.backlog.listeners.remove(send)
        log.info("replica %s:%d left", link.ip, link.port)

    def ack(self, link: Link, off: int) -> None:
        link.ack = max(link.ack, off)
        link.ack_time = time.monotonic()
        self._notify()

    def _notify(self) -> None:
        self.acked.set()
        self.acked = trio.Event()

    def good(self) -> int:
        """Rule 5: links that acknowledged within the allowed lag."""
        lag = self.state.min_replicas_max_lag
        return sum(1 for link in self.links if link.lag() <= lag)

    def acked_at(self, target: int) -> int:
        return sum(1 for link in self.links if link.ack >= target)

    def wait(self, n: int, timeout_ms: int) -> AckWait:
        """Rule 4: WAIT."""
        return AckWait(self, n, timeout_ms, self.offset)

    async def wait_acked(self, n: int, timeout_ms: int, target: int) -> int:
        if self.acked_at(target) >= n:
            return self.acked_at(target)
        if self.backlog is not None:
            self.backlog.ping()
        with trio.move_on_after(timeout_ms / 1000 if timeout_ms > 0 else float("inf")):
            while self.acked_at(target) < n:
                await self.acked.wait()
        return self.acked_at(target)


class AckWait:
    """WAIT's wait for `n` acknowledgements of `target` (Rule 4), not started until awaited;
    `nowait()` is its answer without waiting, which EXEC takes instead (dispatch.py Rule 7:
    Redis's WAIT inside a transaction counts the acknowledgements it has and never blocks)."""

    __slots__ = ("primary", "n", "timeout_ms", "target")

    def __init__(self, primary: Primary, n: int, timeout_ms: int, target: int) -> None:
        self.primary = primary
        self.n = n
        self.timeout_ms = timeout_ms
        self.target = target

    def __await__(self) -> Generator[Any, None, int]:
        return self.primary.wait_acked(self.n, self.timeout_ms, self.target).__await__()

    def nowait(self) -> int:
        return self.primary.acked_at(self.target)

    def close(self) -> None:
        """Nothing started: nothing to close (dispatch closes a blocking command's wait)."""


class AckToken:
    """Rule 6: a commit token (engine/journal.py CommitToken) that completes once `n` replicas
    acknowledged `target`; NOREPLICAS after min-replicas-max-lag seconds (the write stands)."""

    __slots__ = ("primary", "n", "target")

    def __init__(self, primary: Primary, n: int, target: int) -> None:
        self.primary = primary
        self.n = n
        self.target = target

    async def wait(self) -> float:
        limit = max(1, self.primary.state.min_replicas_max_lag)
        got = await self.primary.wait_acked(self.n, limit * 1000, self.target)
        if got < self.n:
            raise TopicsError("no_replicas", f"Not enough good replicas acknowledged the write "
                              f"({got} of {self.n} within {limit}s; it is on the primary)",
                              resp_prefix="NOREPLICAS")
        return 0.0
