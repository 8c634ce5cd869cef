"""The engine: the one set of topic operations both fronts call.

Rule 1: pure and synchronous: no I/O, no awaits, so every operation is atomic.
Rule 2: every operation validates its whole request before it mutates anything.
Rule 3: after a mutation the engine tells its listeners the topic name (the fronts wake
waiters: long-poll diff, SSE, XREAD BLOCK); storage hears through the Journal. Between
`hold_changes` and `release_changes` (a Lua script running: its writes are one step to other
clients) the names are gathered and told once each at the release, in first-change order,
each remembering whether a topic of that name changed (Rule 4 holds at the release too).
Rule 4: `listeners` hear every key that changed (waiters, WATCH); `topic_listeners` (the
activity sampler) only topics: a change of string keys (engine/keyspace/space.py `tell`,
compiled: every string write calls it) is told to `listeners` only, with the list read once
per change, not once per key. A listener added with `listen(fn, interest)` declares the names
it can act on (a live mapping it keeps, e.g. the names someone waits on or WATCHes): a string
change of any other name is not told to it, so a write nobody waits on calls no listener.
The routers task's listener (`router_listener`) hears topics too, but only while a router
or a router worker exists (`routers`, `router_workers`): otherwise it has nothing to do, and
a write does not call it.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator
from typing import Any

from sortedcontainers import SortedDict

from topicsrv.clock import Clock, SystemClock
from topicsrv.engine import groups
from topicsrv.engine.config import (
    SEQ_MAX,
    ConfigRequest,
    TopicConfig,
    apply,
    check_queue_fields,
    check_topic_name,
    parse_config,
)
from topicsrv.engine.groups import groupops, grouprefs
from topicsrv.engine.journal import CommitToken, Journal, NullJournal
from topicsrv.engine.keyspace import Keyspace, wrongtype
from topicsrv.engine.keyspace.scanorder import TopicMap
from topicsrv.engine.log import deletes, writes, xids
from topicsrv.engine.log.reads import FMT_JSON, ReadResult, read
from topicsrv.engine.log.records import PreparedRecord
from topicsrv.engine.log.segments import TRIMMED
from topicsrv.engine.log.topic import Topic
from topicsrv.engine.queues import priority, queues
from topicsrv.engine.restore import fill_lost
from topicsrv.engine.routing import routers
from topicsrv.errors import TopicsError, invalid, not_found

MAX_READ_LIMIT = 10_000
DEFAULT_READ_LIMIT = 1000
U64_MAX = (1 << 64) - 1


class Engine:
    def __init__(self, clock: Clock | None = None, journal: Journal | None = None) -> None:
        self.clock: Clock = clock or SystemClock()
        self.journal: Journal = journal or NullJournal()
        self.topics: SortedDict = TopicMap()  # a SortedDict that also keeps SCAN order
        self.epochs: dict[str, int] = {}  # last epoch per name, kept after a topic is deleted
        self.listeners: list[Callable[[str], None]] = []
        self.interests: dict[int, Collection[str]] = {}  # id(listener) -> its names (Rule 4)
        self.topic_listeners: list[Callable[[str], None]] = []  # Rule 4
        # the routers task's listener (tasks/routers.py), told only while a router or a router
        # worker exists (Rule 4): with none it has nothing to do, and every write would call it
        self.router_listener: Callable[[str], None] | None = None
        self.router_workers: dict[str, Any] = {}  # that task's workers (read, never changed here)
        # names changed while held (Rule 3), in first-change order -> whether a topic of that
        # name changed (False: only a string key did: topic_listeners are not told, Rule 4)
        self.held: dict[str, bool] | None = None
        # the delivery scheduler's oldest ready waiter of a topic (the age term of P_eff)
        self.ready_since: Callable[[str], int | None] | None = None
        self.routers: dict[str, routers.Router] = {}
        self.keyspace = Keyspace(self)  # string keys and every key's TTL (engine/keyspace)
        self.stats = {"writes": 0, "records_written": 0, "reads": 0, "records_read": 0,
                      "deletes": 0, "records_deleted": 0, "bytes_written": 0}

    # ---- topics ------------------------------------------------------------------------

    def now(self) -> int:
        return self.clock.now_ms()

    def _notify(self, name: str) -> None:
        writes.notify(self, name)  # compiled with the write path (engine/log/writes.py)

    def listen(self, listener: Callable[[str], None], interest: Collection[str] | None = None) -> None:
        """Rule 4: add a listener of every key; `interest`: the live mapping of the names a
        string change of which it acts on (None: all)."""
        self.listeners.append(listener)
        if interest is not None:
            self.interests[id(listener)] = interest

    def all_listeners(self) -> list[Callable[[str], None]]:
        rl = self.router_listener
        return [*self.listeners, *self.topic_listeners, *(() if rl is None else (rl,))]

    def hold_changes(self) -> None:
        """Rule 3: gather the changed names instead of telling the listeners."""
        if self.held is None:
            self.held = {}

    def release_changes(self) -> None:
        """Rule 3: tell the listeners every name changed since `hold_changes`; the
        topic_listeners only the names a topic change was held for (Rule 4). Compiled with
        the write path (engine/log/writes.py `release`): every script and MULTI ends here."""
        writes.release(self)

    def notify(self, name: str) -> None:
        """Wake the waiters of `name` (a nack made jobs claimable again)."""
        self._notify(name)

    def get(self, name: str) -> Topic:
        topic = self.find(name)
        if topic is None:
            check_topic_name(name)
            raise not_found(name)
        return topic

    def find(self, name: str) -> Topic | None:
        """The topic `name` (None if no key has that name; WRONGTYPE if a string has it),
        after the key's lazy expiry (engine/keyspace/space.py Rule 3)."""
        ks = self.keyspace
        if ks.expiry.deadlines and ks.expire_if_due(name):
            return None
        found: Topic | None = self.topics.get(name)
        if found is None and ks.owns(name):
            raise wrongtype(name)
        return found

    def _create(self, name: str, req: ConfigRequest) -> Topic:
        if self.keyspace.owns(name):
            raise wrongtype(name)
        topic_type = req.topic_type or "log"
        check_queue_fields(req, topic_type)
        if req.changes.get("dead_letter") == name:
            raise invalid("'dead_letter' must name another topic, not the queue itself",
                          field="dead_letter")
        config = apply(TopicConfig(), req)
        epoch = self.epochs.get(name, 0) + 1
        self.epochs[name] = epoch
        topic = Topic(name, epoch, topic_type, config, req.seq_base or 1, self.now())
        self.topics[name] = topic
        return topic

    def put_topic(self, name: str, body: Any) -> tuple[Topic, bool, CommitToken | None]:
        """Create-or-update (API 1). Returns (topic, created, token)."""
        check_topic_name(name)
        req = parse_config(body)
        if req.changes.get("dead_letter") == name:
            raise invalid("'dead_letter' must name another topic, not the queue itself",
                          field="dead_letter")
        topic = self.find(name)
        if topic is None:
            self.journal.check_writable(None)
            topic = self._create(name, req)
            token = self.journal.topic_upserted(topic)
            self._notify(name)
            return topic, True, token
        if req.topic_type is not None and req.topic_type != topic.type:
            raise TopicsError(
                "topic_exists_incompatible",
                f"topic '{name}' is of type '{topic.type}'; a topic's type cannot change",
                {"reason": "type_immutable", "type": topic.type, "requested": req.topic_type},
            )
        if req.seq_base is not None and req.seq_base != topic.seq_base:
            raise TopicsError(
                "topic_exists_incompatible",
                f"topic '{name}' has seq_base {topic.seq_base}; seq_base is fixed at create",
                {"reason": "seq_base_immutable", "seq_base": topic.seq_base},
            )
        check_queue_fields(req, topic.type)
        self.journal.check_writable(topic)
        topic.config = apply(topic.config, req)
        now = self.now()
        topic.expire(now)
        if topic.config.discard == "old" and (topic.config.cap_records or topic.config.cap_bytes):
            topic.evict_for_cap(topic.config.cap_records, topic.config.cap_bytes)
        token = self.journal.topic_upserted(topic)
        self._notify(name)
        return topic, False, token

    def state(self, name: str, touch: bool = True) -> dict[str, Any]:
        topic = self.get(name)
        now = self.now()
        topic.expire(now)
        if touch:
            topic.last_consumed_at = now
            topic.last_read_ts = now
        return self.describe(topic, now)

    def describe(self, topic: Topic, now: int | None = None) -> dict[str, Any]:
        now = self.now() if now is None else now
        cfg = topic.config
        ready = self.ready_since(topic.name) if self.ready_since is not None else None
        prio = priority.components(cfg.priority, cfg.auto_priority, topic.last_consumed_at, now, ready)
        out: dict[str, Any] = {
            "topic": topic.name,
            "type": topic.type,
            "epoch": topic.epoch,
            "head_seq": topic.head_seq,
            "earliest_seq": topic.earliest_seq,
            "evict_floor": topic.evict_floor,
            "next_seq": topic.next_seq,
            "count": topic.count,
            "bytes": topic.bytes,
            "config": cfg.to_json(topic.type),
            "durability": cfg.durability,
            "effective_priority": prio.total,
            "priority_components": prio.to_json(),
            "last_write_ts": topic.last_write_ts,
            "last_read_ts": topic.last_read_ts,
        }
        if topic.type == "queue":
            out["queue"] = queues.stats(topic, now)
        return out

    def list_topics(
        self, prefix: str = "", limit: int = 1000, after: str | None = None
    ) -> tuple[list[dict[str, Any]], str | None]:
        now = self.now()
        deadlines = self.keyspace.expiry.deadlines
        if deadlines:  # lazy expiry of the listed keys: due keys are deleted before the walk
            self.keyspace.reap()
        items: list[dict[str, Any]] = []
        keys: Iterator[str] = self.topics.irange(minimum=after or prefix or None, inclusive=(after is None, True))
        last = None
        for name in keys:
            if prefix and not name.startswith(prefix):
                if name > prefix:
                    break
                continue
            if deadlines and deadlines.get(name, now + 1) <= now:
                continue  # its delete was refused (storage not writable): hidden all the same
            if len(items) >= limit:
                return items, last
            topic: Topic = self.topics[name]
            topic.expire(now)
            items.append({"topic": name, "type": topic.type, "head_seq": topic.head_seq,
                          "earliest_seq": topic.earliest_seq, "count": topic.count})
            last = name
        return items, None

    def delete_topic(self, name: str) -> tuple[Topic, CommitToken | None]:
        topic = self.get(name)
        self.journal.check_writable(topic)
        del self.topics[name]
        self.keyspace.topic_dropped(name)
        routers.drop_topic(self, topic)
        token = self.journal.topic_dropped(name, topic.epoch)
        self._notify(name)
        return topic, token

    # ---- routers (engine/routing/routers.py; seeds section 8) -----------------------------------

    def router_put(self, name: str, body: Any, admit: Callable[[], None] | None = None) -> tuple[
            dict[str, Any], bool, CommitToken | None]:
        return routers.put(self, name, body, admit)

    def router_get(self, name: str) -> dict[str, Any]:
        return routers.get(self, name)

    def router_list(self) -> list[dict[str, Any]]:
        return routers.list_routers(self)

    def router_delete(self, name: str) -> CommitToken | None:
        return routers.delete(self, name)

    def derive(self, dest: Topic, router: routers.Router, records: list[PreparedRecord],
               now: int | None = None) -> int:
        """Append a router's copies like `write` (the dest's caps, discard and TTL; no memory
        guard, no idempotency), journaled as derived (no WAL frame). Returns the first seq;
        the caller wakes the dest's readers. `now`: the forwarding step's one clock reading
        (a replica runs the step again on it: engine/routing/routerrepl.py Rule 2)."""
        self.journal.check_writable(dest)
        now = self.now() if now is None else now
        dest.expire(now)
        dest.check_append(records)
        first, _, _ = dest.append(records, now, xids.plan(dest, len(records), None, now))
        self.journal.derived(dest, first, len(records))
        return first

    def set_stream_id(self, topic: Topic, last_id: tuple[int, int]) -> CommitToken | None:
        """XSETID: the caller checked Redis's conditions (engine/log/xids.py Rule 4)."""
        xids.set_last_id(topic, last_id)
        return self.journal.stream_id_set(topic)

    def idmp_configure(self, topic: Topic, duration_s: int | None, maxsize: int | None) -> CommitToken | None:
        """XCFGSET: the stream's IDMP window and per-producer size (engine/log/idempotency.py)."""
        self.journal.check_writable(topic)
        topic.idempotency.configure(duration_s, maxsize)
        cfg = {"duration": topic.idempotency.duration_s, "maxsize": topic.idempotency.maxsize}
        return self.journal.idempotent(topic, {"cfg": cfg})

    def derive_gap(self, dest: Topic, router: routers.Router, n: int, now: int | None = None) -> int:
        """Append `n` TRIMMED slots (source seqs gone before they were forwarded); `now` as
        `derive`'s."""
        self.journal.check_writable(dest)
        first = dest.next_seq
        if first + n - 1 > SEQ_MAX:
            raise TopicsError("seq_exhausted", "The stream has exhausted the last possible ID, "
                              "unable to add more items", {"topic": dest.name})
        now = self.now() if now is None else now
        fill_lost(dest, first + n, max(now, dest.last_ts), TRIMMED)
        dest.last_ts = max(dest.last_ts, now)
        self.journal.derived_gap(dest, first, n, TRIMMED)
        return first

    # ---- writes ------------------------------------------------------------------------

    def write(
        self,
        name: str,
        records: list[PreparedRecord],
        *,
        create: bool | None = None,
        config: Any = None,
        idempotency_key: str | None = None,
        xid: tuple[int, int | None] | None = None,
        idmp: tuple[bytes, bytes] | None = None,
        lean: bool = False,
    ) -> tuple[dict[str, Any], CommitToken | None]:
        """Append a batch atomically. Returns (result, commit token). `xid` is a client-chosen
        stream ID for the first record (`(ms, None)`: `<ms>-*`; engine/log/xids.py). `idmp` is
        XADD's (producer id, idempotent id), `idempotency_key` HTTP's: a repeat inside its
        window returns the original result with `duplicate: true` and appends nothing
        (engine/log/idempotency.py). `lean`: the result holds the seqs and ts only
        (engine/log/writes.py Rule 4)."""
        return writes.write(self, name, records, create, config, idempotency_key, xid, idmp,
                            lean)

    # ---- reads -------------------------------------------------------------------------

    def diff(
        self,
        name: str,
        from_seq: int,
        limit: int = DEFAULT_READ_LIMIT,
        *,
        max_bytes: int = 0,
        nodes: Collection[str] | None = None,
        fmt: int = FMT_JSON,
        epoch: int | None = None,
    ) -> ReadResult:
        topic = self.get(name)
        result = read(topic, from_seq, limit, self.now(), fmt=fmt, max_bytes=max_bytes,
                      nodes=nodes, epoch=epoch)
        self.stats["reads"] += 1
        self.stats["records_read"] += len(result.records)
        return result

    # ---- deletes -----------------------------------------------------------------------

    def delete_records(
        self, name: str, before_seq: int | None, match: deletes.Match | None
    ) -> tuple[dict[str, Any], CommitToken | None]:
        if before_seq is None and match is None:
            raise invalid("a delete needs 'before_seq', 'match' or both")
        topic = self.get(name)
        self.journal.check_writable(topic)
        now = self.now()
        bound = topic.next_seq
        deleted = deletes.delete(topic, now, before_seq, match)
        selector: dict[str, Any] = {}
        if before_seq is not None:
            selector["before_seq"] = before_seq
        if match is not None:
            selector["match"] = match.to_json()
        token = self.journal.deleted(topic, selector, bound)
        self.stats["deletes"] += 1
        self.stats["records_deleted"] += deleted
        self._notify(name)
        return {
            "topic": name,
            "deleted": deleted,
            "earliest_seq": topic.earliest_seq,
            "head_seq": topic.head_seq,
            "count": topic.count,
            "bytes": topic.bytes,
        }, token

    def delete_seqs(self, name: str, seqs: list[int], wait: bool = True) -> tuple[int, CommitToken | None]:
        """Delete the given seqs (XDEL, queue acks). `wait=False`: the caller will not await
        the commit (no token, so the WAL batch is not hurried)."""
        topic = self.get(name)
        self.journal.check_writable(topic)
        bound = topic.next_seq
        deleted = deletes.delete_seqs(topic, self.now(), seqs)
        token = self.journal.deleted(topic, {"seqs": seqs}, bound, wait) if deleted else None
        if deleted:
            self._notify(name)
        return deleted, token

    def delete_refs(self, name: str, seqs: list[int], policy: str,
                    group: groups.Group | None = None) -> tuple[list[int], CommitToken | None]:
        """XDELEX / XACKDEL (engine/groups/grouprefs.py): per-seq result codes; the records go through
        `delete_seqs` (journaled as XDEL), nothing changes when storage refuses writes."""
        topic = self.get(name)
        self.journal.check_writable(topic)
        topic.expire(self.now())
        codes, doomed = grouprefs.plan_deletes(topic, seqs, policy, group)
        token = self.delete_seqs(name, doomed)[1] if doomed else None
        return codes, token

    # ---- consumer-group definitions: change + journal in one step (Rule 2: the journal's
    # check_writable runs before anything changes). Storage logs each definition change at
    # once (engine/groups/groupops.py), so a group a client was told exists survives a crash;
    # delivery progress and pending entries are persisted at checkpoints. ------------------

    def group_create(
        self, topic: Topic, name: str, last_seq: int, last_ms: int, entries_read: int | None
    ) -> tuple[groups.Group | None, CommitToken | None]:
        """XGROUP CREATE; (None, None) when the group exists (BUSYGROUP): nothing changed."""
        self.journal.check_writable(topic)
        group = groups.create(topic, name, last_seq, last_ms, entries_read, self.now())
        if group is None:
            return None, None
        return group, self.journal.groups_changed(topic, groupops.created(group))

    def group_setid(
        self, topic: Topic, group: groups.Group, last_seq: int, last_ms: int, entries_read: int | None
    ) -> CommitToken | None:
        """XGROUP SETID: move the group's cursor (the PEL is kept)."""
        self.journal.check_writable(topic)
        groups.setid(group, last_seq, last_ms, entries_read)
        return self.journal.groups_changed(topic, groupops.id_set(group))

    def group_destroy(self, topic: Topic, name: str) -> tuple[bool, CommitToken | None]:
        """XGROUP DESTROY; (False, None) when there is no such group."""
        self.journal.check_writable(topic)
        if not groups.destroy(topic, name):
            return False, None
        return True, self.journal.groups_changed(topic, groupops.destroyed(name))

    def group_create_consumer(
        self, topic: Topic, group: groups.Group, consumer: str
    ) -> tuple[bool, CommitToken | None]:
        """XGROUP CREATECONSUMER; (False, None) when the consumer exists."""
        self.journal.check_writable(topic)
        now = self.now()
        if not groups.create_consumer(group, consumer, now):
            return False, None
        return True, self.journal.groups_changed(topic, groupops.consumer_created(group, consumer, now))

    def group_delete_consumer(
        self, topic: Topic, group: groups.Group, consumer: str
    ) -> tuple[int, CommitToken | None]:
        """XGROUP DELCONSUMER: how many entries it had pending (they leave the PEL). Logged
        even for an unknown consumer, as the RESP command always did (replay is idempotent)."""
        self.journal.check_writable(topic)
        pending = groups.delete_consumer(group, consumer)
        return pending, self.journal.groups_changed(topic, groupops.consumer_deleted(group, consumer))

    # ---- queues (engine/queues/queues.py; seeds section 10) ------------------------------------------

    def claim(self, name: str, claimers: list[queues.Claimer]) -> tuple[
            list[list[queues.Job]], CommitToken | None, list[queues.Move]]:
        return queues.claim(self, name, claimers)

    def ack(self, name: str, node: Any, seqs: Any, lease_ids: Any = None) -> tuple[dict[str, Any], CommitToken | None]:
        return queues.ack(self, name, node, seqs, lease_ids)

    def nack(self, name: str, node: Any, seqs: Any, lease_ids: Any = None,
             delay_ms: Any = 0) -> tuple[dict[str, Any], CommitToken | None]:
        return queues.nack(self, name, node, seqs, lease_ids, delay_ms)

    def extend(self, name: str, node: Any, seqs: Any, lease_ids: Any = None,
               lease_ms: Any = None) -> tuple[dict[str, Any], CommitToken | None]:
        return queues.extend(self, name, node, seqs, lease_ids, lease_ms)

    def trim(
        self, name: str, maxlen: int | None = None, minid_seq: int | None = None
    ) -> tuple[int, CommitToken | None]:
        topic = self.get(name)
        self.journal.check_writable(topic)
        removed = deletes.trim(topic, self.now(), maxlen, minid_seq)
        token = self.journal.trimmed(topic, topic.front) if removed else None
        if removed:
            self._notify(name)
        return removed, token
