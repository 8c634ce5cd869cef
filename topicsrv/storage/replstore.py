"""The replication half of the storage Journal (a mixin of `Storage`; topicsrv/repl/).

On a primary: the changes that reach replicas without a WAL frame of their own (a class that
writes no WAL, a group's delivery progress, a router's forwarding step) are fed to the backlog the shards' `tee` holds
(storage/wal.py Rule 10), built only when a replica listens; a promotion's failover gap is
journaled for every class. On a replica: its primary's frames are written to its own WAL as
its own journal would write them (`replicated_append`, `replicated`: storage/replapply.py),
and a full sync stops the storage before the files are replaced (`stop_for_resync`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import trio

from topicsrv.engine.groups import groupops
from topicsrv.engine.log.topic import Topic
from topicsrv.storage import codec, frames, keyspacelog
from topicsrv.storage.policy import policy_of
from topicsrv.storage.state import TState, near_ceiling
from topicsrv.storage.wal import Shard, Token


class ReplJournal:
    shards: list[Shard]
    keyspace_class: str
    closed: bool
    ckpt_lock: trio.Lock
    seg_lock: trio.Lock
    flip_topics: dict[int, Topic]
    flip_wake: trio.Event

    _shard: Callable[[Topic], tuple[TState, Shard]]  # Storage's
    _control: Callable[[Topic, int, dict[str, Any], bool], Token | None]  # Storage's
    flip_later: Callable[[Topic, list[int] | None], None]  # SegTasks'

    @property
    def tee(self) -> Any:
        """The backlog replicas read (repl/backlog.py, typed loosely: storage never imports
        repl), once one attached; None before: nothing is fed."""
        return self.shards[0].tee if self.shards else None

    # ---- a primary's changes that have no WAL frame of their own -----------------------------

    def _tee_only(self, topic: Topic, ftype: int, obj: dict[str, Any]) -> Token | None:
        """A change of a class that writes no WAL: the frame it would be, for the replicas only."""
        tee = self.tee
        if tee is not None:
            tee.body(ftype, codec.encode_json({"name": topic.name, "epoch": topic.epoch, **obj}))
        return None

    def failover_gap(self, topic: Topic, first: int, count: int) -> None:
        """A T_LOSTRANGE marked `failover`, for every class: the gap outlives a crash of the
        new primary, and its replicas open the same gap (engine/log/failover.py Rule 2)."""
        obj = {"first": first, "count": count, "failover": True}
        if policy_of(topic.config).wal:
            self._control(topic, frames.T_LOSTRANGE, obj, False)
        else:
            self._tee_only(topic, frames.T_LOSTRANGE, obj)

    def forwarded(self, router: Any, dest: Topic, now: int, gone: int | None) -> None:
        """A router's forwarding step, for replicas only (they run it again:
        engine/routing/routerrepl.py Rule 2): its copies write no frame (routerlog.py Rule 1)."""
        self._tee_only(dest, frames.T_FORWARD, {"router": router.name, "to": int(router.cursor),
                                                "ts": now, "next": dest.next_seq, "gone": gone})

    def group_progress(self, topic: Topic, group: Any, consumers: Iterable[str],
                       seqs: Iterable[int]) -> None:
        """For replicas only (engine/groups/groupops.py Rule 3): built only when one listens."""
        tee = self.tee
        if tee is not None:
            tee.body(frames.T_GROUPPROG, codec.encode_json({
                "name": topic.name, "epoch": topic.epoch,
                "op": groupops.progress(group, consumers, seqs)}))

    # ---- a replica's copy of its primary's frames (storage/replapply.py) ------------------------

    def replicated_append(self, topic: Topic, body: bytes, first: int, n: int, rc: bool = False) -> None:
        """The primary's APPEND (`rc`: an APPEND_RC, a router dest's), written to this
        replica's WAL as `appended` writes its own."""
        st, sh = self._shard(topic)
        pol = policy_of(topic.config)
        last = first + n - 1
        near = near_ceiling(st, last)
        if pol.wal:
            if pol.readable == "durable":
                topic.hide_from(first)  # readable once durable here too (Topic Rule 6)
            sh.enqueue(frames.encode(frames.T_APPEND_RC if rc else frames.T_APPEND, body),
                       (topic, topic.epoch, first, n, codec.append_rc(memoryview(body)) if rc else None))
        if near and (pol.ceiling or not pol.wal):
            sh.want_ceiling(topic)

    def replicated_keyspace(self, body: bytes) -> None:
        """The primary's keyspace operation, its bytes as this replica's `keyspace_changed`
        would write them (keyspacelog.py Rule 1), under this replica's keyspace class."""
        if self.keyspace_class != "memory":
            self.shards[keyspacelog.SHARD].enqueue_body(frames.T_KEYSPACE, body)

    def replicated(self, topic: Topic, ftype: int, body: bytes, d: dict[str, Any]) -> None:
        """The primary's control frame, written as this replica's own journal would write it:
        config-like frames always, the others where the class keeps a WAL."""
        config_like = ftype in (frames.T_GROUPOP, frames.T_GROUPS, frames.T_XSETID) or \
            (ftype == frames.T_IDMP and "cfg" in d)
        if not config_like and not policy_of(topic.config).wal:
            return
        _, sh = self._shard(topic)
        sh.enqueue(frames.encode(ftype, body))
        if ftype == frames.T_DELETE:
            self.flip_topics[id(topic)] = topic
            self.flip_wake.set()
        elif ftype == frames.T_LEASES:
            seqs = [s for ev in d["ev"] if ev[0] == "A" for s in ev[2]]
            if seqs:
                self.flip_later(topic, seqs)

    async def stop_for_resync(self) -> None:
        """A replica is about to replace its files with its primary's (tasks/replica.py Rule 2):
        every write is refused from now on, what is queued is written, the files are closed;
        no checkpoint (the process restarts on the primary's)."""
        self.closed = True
        async with self.ckpt_lock, self.seg_lock:
            for sh in self.shards:
                await sh.drain()
            for sh in self.shards:
                sh.close()
