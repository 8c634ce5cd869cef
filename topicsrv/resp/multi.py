"""MULTI/EXEC state of a RESP client, and the WATCH registry: sans-IO values the dispatcher
(topicsrv/resp/dispatch.py) and the transaction commands (commands/transactions.py) share.

Rule 1 (queueing, as redis-server's processCommand): while a client is in MULTI every command
but EXEC, DISCARD, MULTI, WATCH, QUIT and RESET is checked (unknown command, NOAUTH, unknown
subcommand, arity, OOM) and queued with `+QUEUED`; a command refused by those checks is
answered with its error and flags the transaction (`aborted`), so EXEC answers EXECABORT and
runs nothing. Argument syntax is checked when the command runs, inside EXEC (as Redis).
Rule 2 (WATCH): a watched key is dirty once anything changed it after the WATCH: every engine
mutation tells its listeners the topic name (engine/core.py Rule 3: writes and deletes from
either front, topic create/update/delete, trims, capacity evictions, router copies), and
`Watches` (one per engine, installed as a listener on first use) marks the transactions that
watch it; EXEC also compares each key's fingerprint (epoch, next seq, front, count) taken at
WATCH time after TTL expiry, so records that expired meanwhile (which no listener hears) make
it dirty too, as an expired key does in Redis.
Rule 3: `client.tx` is None for a client with no MULTI and no WATCH, so the hot path of every
other client costs one attribute test; a client's watches leave the registry on EXEC, DISCARD,
UNWATCH, RESET and disconnect (`Tx.end`).
Rule 4 (bounded): a MULTI queue holds at most MAX_QUEUED commands and MAX_QUEUED_BYTES of
arguments; past that a command is refused with an error that flags the transaction.
Rule 5 (issue 23): a queued command is kept as a tuple of bytes, which CPython's cyclic GC
stops tracking at its first collection, so a queue of 300,000 commands does not make every
full collection meanwhile (a stall of every client) scan 300,000 lists.
"""

from __future__ import annotations

from typing import Any

from topicsrv.resp.commands.base import Simple

QUEUED = Simple("QUEUED")
NOT_QUEUED = frozenset({"exec", "discard", "multi", "watch", "quit", "reset"})
EXECABORT = "EXECABORT Transaction discarded because of previous errors."
MAX_QUEUED = 1_000_000
MAX_QUEUED_BYTES = 512 * 1024 * 1024

Fingerprint = tuple[int, int, int, int] | None


class ExecReply(list[Any]):
    """EXEC's array of replies; an element may wait for its commit (session.emit marks each
    one, so a failed commit turns only its own element into the error)."""


def fingerprint(engine: Any, name: str) -> Fingerprint:
    kind = engine.keyspace.kind(name)  # lazy expiry first: an expired key reads missing
    if kind is None:
        return None
    if kind != "stream":  # every change of a string or collection tells the listeners (Rule 2)
        return (-1, 0, 0, 0)
    topic = engine.topics[name]
    topic.expire(engine.now())
    return (topic.epoch, topic.next_seq, topic.front, topic.count)


class Watches:
    """Topic name -> the transactions watching it; an engine listener (Rule 2)."""

    __slots__ = ("by_topic",)

    def __init__(self) -> None:
        self.by_topic: dict[str, set[Tx]] = {}

    def __call__(self, name: str) -> None:
        txs = self.by_topic.get(name)
        if txs:
            for tx in txs:
                tx.dirty = True


def watches_of(engine: Any) -> Watches:
    """The engine's registry, installed as its listener on first use."""
    for listener in engine.listeners:
        if type(listener) is Watches:
            return listener
    w = Watches()
    engine.listen(w, w.by_topic)  # a string change of a name nobody watches is not told
    return w


class Tx:
    """One client's transaction and watches (Rules 1-4)."""

    __slots__ = ("multi", "queued", "queued_bytes", "denyoom_bytes", "aborted", "watched",
                 "dirty", "registry")

    def __init__(self) -> None:
        self.multi = False
        self.queued: list[tuple[bytes, ...]] = []
        self.queued_bytes = 0
        self.denyoom_bytes = -1  # bytes of the queued `denyoom` commands, -1 when none
        self.aborted = False
        self.watched: dict[str, Fingerprint] = {}
        self.dirty = False
        self.registry: Watches | None = None

    def queue(self, argv: list[bytes], denyoom: bool = False) -> str | None:
        """Queue a command; the error text when the queue is full (Rule 4). `denyoom`: the
        command may grow memory (EXEC's check over --max-memory counts its bytes)."""
        size = sum(map(len, argv))
        if len(self.queued) >= MAX_QUEUED or self.queued_bytes + size > MAX_QUEUED_BYTES:
            self.aborted = True
            return (f"ERR the transaction is too large ({len(self.queued)} commands, "
                    f"{self.queued_bytes} bytes queued); EXEC or DISCARD it")
        self.queued.append(tuple(argv))  # Rule 5: a tuple of bytes leaves the GC's lists
        self.queued_bytes += size
        if denyoom:
            self.denyoom_bytes = max(self.denyoom_bytes, 0) + size
        return None

    def watch(self, engine: Any, name: str) -> None:
        if name in self.watched:
            return
        registry = self.registry
        if registry is None:
            registry = self.registry = watches_of(engine)
        self.watched[name] = fingerprint(engine, name)
        registry.by_topic.setdefault(name, set()).add(self)

    def is_dirty(self, engine: Any) -> bool:
        return self.dirty or any(fingerprint(engine, name) != fp
                                 for name, fp in self.watched.items())

    def unwatch(self) -> None:
        registry = self.registry
        if registry is not None:
            by_topic = registry.by_topic
            for name in self.watched:
                txs = by_topic.get(name)
                if txs is not None:
                    txs.discard(self)
                    if not txs:
                        del by_topic[name]
        self.watched.clear()
        self.dirty = False

    def end(self) -> None:
        """Leave MULTI and forget every watch (EXEC, DISCARD, RESET, disconnect)."""
        self.unwatch()
        self.multi = False
        self.queued = []
        self.queued_bytes = 0
        self.denyoom_bytes = -1
        self.aborted = False
