"""The narrow interface between the engine and storage.

Rule 1: the engine calls a Journal synchronously, after validating and (for writes) before
answering; it never awaits. A call may return a CommitToken, which the front awaits before it
acknowledges (fsync class), or None (nothing to wait for).
Rule 2: `check_writable` runs before any mutation, so a storage failure refuses the write
whole (507) instead of half-applying it.
Rule 3 (routers): a router's copies are derived, never logged as records: `derived` and
`derived_gap` tell storage that seqs were taken (it writes no frame for WAL classes; the
copies are re-derived from the source on recovery). Router definitions are logged on the
dest (`router_logged`), like a topic create. `forwarded` tells storage where a forwarding step
ended, for replicas only (they run the same step: engine/routing/routerrepl.py Rule 2).
Rule 4 (commit groups): `begin_group` .. `end_group` bracket one synchronous step whose
journal calls must survive a crash all or none (a MULTI/EXEC, a string write replacing a
topic); groups nest (the outermost decides). A journal without storage ignores them.
A group that turns out to span scheduler turns (a Lua script past busy-reply-threshold, whose
commands then run across turns) is told so with `span_turns` before the loop gets its turn:
from then on its writes wait on the group's own commits rather than on the shards' open
batches, and the tokens it returns are what the writes captured before must also wait for
(storage/txgroup.py Rule 7). `begin_group(spans_turns=True)` opens a group spanning turns from
its start.
Rule 5 (a stop under a running script): `discard_group` drops such a group unwritten, so the
script leaves nothing durable (storage/txgroup.py Rule 11); a journal without storage has
nothing to drop.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from topicsrv.engine.log.records import PreparedRecord
    from topicsrv.engine.log.topic import Topic


class CommitToken(Protocol):
    async def wait(self) -> float:
        """Wait until durable; returns the fsync time in ms. Raises TopicsError on failure."""
        ...


class Journal(Protocol):
    def check_writable(self, topic: Topic | None) -> None: ...

    def topic_upserted(self, topic: Topic) -> CommitToken | None: ...

    def topic_dropped(self, name: str, epoch: int) -> CommitToken | None: ...

    def appended(
        self, topic: Topic, first_seq: int, ts: int, blobs: list[bytes], records: list[PreparedRecord]
    ) -> CommitToken | None: ...

    def deleted(self, topic: Topic, selector: dict[str, Any], bound: int, wait: bool = True) -> CommitToken | None: ...

    def trimmed(self, topic: Topic, new_front: int) -> CommitToken | None: ...

    def groups_changed(self, topic: Topic, change: dict[str, Any]) -> CommitToken | None: ...

    def stream_id_set(self, topic: Topic) -> CommitToken | None:
        """XSETID moved `topic.last_id` (engine/log/xids.py); gated like a group change."""
        ...

    def failover_gap(self, topic: Topic, first: int, count: int) -> None:
        """A promotion opened a failover gap in `topic` (engine/log/failover.py): journaled
        for every class (and fed to replicas), never waited on."""
        ...

    def group_progress(self, topic: Topic, group: Any, consumers: Iterable[str],
                       seqs: Iterable[int]) -> None:
        """XREADGROUP/XACK/XCLAIM/XAUTOCLAIM moved a group's delivery progress: replicas
        follow it (engine/groups/groupops.py Rule 3); nothing is written to the WAL."""
        ...

    def leases_logged(self, topic: Topic, events: list[list[Any]]) -> CommitToken | None:
        """Append events to the queue's leases log (engine/queues/leases.py); gated iff the queue's
        `leases_durable` is set (and its class writes a WAL)."""
        ...

    def acked(self, topic: Topic, seqs: list[int], bound: int, events: list[list[Any]],
              wait: bool) -> CommitToken | None:
        """A queue ack: the jobs' delete (as `deleted`) and the acked events (as
        `leases_logged`), which a journal may write as one frame; `wait` as for `deleted`."""
        ...

    def idempotent(self, topic: Topic, op: dict[str, Any]) -> CommitToken | None:
        """An idempotency-table change (engine/log/idempotency.py Rule 6): `{"add": hit}` just
        before the write's `appended` (never waited on: the APPEND is), or `{"cfg": {...}}`
        (XCFGSET: config-like, gated for every class)."""
        ...

    def barrier(self, topic: Topic) -> CommitToken | None:
        """A token that completes once everything logged for `topic` so far is durable
        (None: nothing of it is ever written)."""
        ...

    def derived(self, topic: Topic, first_seq: int, n: int) -> None:
        """A router appended `n` copies to `topic` at `first_seq` (Rule 3)."""
        ...

    def derived_gap(self, topic: Topic, first_seq: int, n: int, flag: int) -> None:
        """A router appended `n` record-less slots flagged `flag` (TRIMMED) at `first_seq`."""
        ...

    def router_logged(self, dest: Topic, op: dict[str, Any]) -> CommitToken | None:
        """A router definition changed: `{"op": "put", "spec": {...}, "cursor": c,
        "source_epoch": e}` or `{"op": "del", "name": n}`; logged on its dest."""
        ...

    def forwarded(self, router: Any, dest: Topic, now: int, gone: int | None) -> None:
        """A forwarding step of `router` moved its cursor at clock `now` (Rule 3); `gone` is
        the router's count of evicted unforwarded seqs when the step began. Nothing is
        written; a primary's replicas hear it."""
        ...

    def keyspace_changed(self, op: list[tuple[Any, ...]]) -> CommitToken | None:
        """One keyspace operation (engine/keyspace/ops.py): string writes and key TTLs, under
        the keyspace's one durability class."""
        ...

    def begin_group(self, spans_turns: bool = False) -> None:
        """Rule 4: the calls until the matching `end_group` are one commit group."""
        ...

    def end_group(self) -> None: ...

    def span_turns(self) -> list[CommitToken]:
        """Rule 4: the open group spans turns from now on; the tokens its writes so far must
        also wait for (none without a group or without storage)."""
        ...

    def discard_group(self) -> bool:
        """Rule 5: drop the open group unwritten (the server stops under a running script);
        every later mutation is refused. True when there was one."""
        ...


class _AllOf:
    """A token that waits for several (a router PUT that also created its topics)."""

    def __init__(self, tokens: list[CommitToken]) -> None:
        self.tokens = tokens

    async def wait(self) -> float:
        return max([await t.wait() for t in self.tokens])


def all_of(tokens: Iterable[CommitToken | None]) -> CommitToken | None:
    real = [t for t in tokens if t is not None]
    if len(real) <= 1:
        return real[0] if real else None
    return _AllOf(real)


class NullJournal:
    """No storage: everything is resident only (used by engine tests and `--no-storage`)."""

    def check_writable(self, topic: Topic | None) -> None:
        return None

    def topic_upserted(self, topic: Topic) -> None:
        return None

    def topic_dropped(self, name: str, epoch: int) -> None:
        return None

    def appended(
        self, topic: Topic, first_seq: int, ts: int, blobs: list[bytes], records: list[PreparedRecord]
    ) -> None:
        return None

    def deleted(self, topic: Topic, selector: dict[str, Any], bound: int, wait: bool = True) -> None:
        return None

    def trimmed(self, topic: Topic, new_front: int) -> None:
        return None

    def groups_changed(self, topic: Topic, change: dict[str, Any]) -> None:
        return None

    def stream_id_set(self, topic: Topic) -> None:
        return None

    def failover_gap(self, topic: Topic, first: int, count: int) -> None:
        return None

    def group_progress(self, topic: Topic, group: Any, consumers: Iterable[str],
                       seqs: Iterable[int]) -> None:
        return None

    def leases_logged(self, topic: Topic, events: list[list[Any]]) -> None:
        return None

    def acked(self, topic: Topic, seqs: list[int], bound: int, events: list[list[Any]],
              wait: bool) -> CommitToken | None:
        """The delete, then the events (a journal without one frame for both)."""
        journal: Journal = self  # subclasses (test doubles) may return tokens
        token = journal.deleted(topic, {"seqs": seqs}, bound, wait)
        return journal.leases_logged(topic, events) or (token if wait else None)

    def idempotent(self, topic: Topic, op: dict[str, Any]) -> None:
        return None

    def barrier(self, topic: Topic) -> None:
        return None

    def derived(self, topic: Topic, first_seq: int, n: int) -> None:
        return None

    def derived_gap(self, topic: Topic, first_seq: int, n: int, flag: int) -> None:
        return None

    def router_logged(self, dest: Topic, op: dict[str, Any]) -> None:
        return None

    def forwarded(self, router: Any, dest: Topic, now: int, gone: int | None) -> None:
        return None

    def keyspace_changed(self, op: list[tuple[Any, ...]]) -> None:
        return None

    def begin_group(self, spans_turns: bool = False) -> None:
        return None

    def end_group(self) -> None:
        return None

    def span_turns(self) -> list[CommitToken]:
        return []

    def discard_group(self) -> bool:
        return False


class Group:
    """`with Group(journal):` one commit group (Rule 4), closed even when the body raises."""

    __slots__ = ("journal",)

    def __init__(self, journal: Journal) -> None:
        self.journal = journal

    def __enter__(self) -> None:
        self.journal.begin_group()

    def __exit__(self, *exc: object) -> None:
        self.journal.end_group()
