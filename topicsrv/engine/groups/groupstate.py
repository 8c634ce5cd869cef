"""Consumer-group state: groups, consumers and pending entries as values, Redis's stream
counters on a topic, the group lifecycle (XGROUP) and snapshots. Pure and synchronous.

State lives in `topic.ext["groups"]` (a `Groups`), so it dies with the topic instance (a
recreated topic starts without groups). A group is:
  - a cursor: `last_seq` (the last-delivered position, Redis's `last_id`), shown as `last_id`
    (ms, seq); and `cursor` >= last_seq, where the next `>` read starts. `cursor` also steps
    over deleted and node-filtered slots the read pipeline skipped, so a read always makes
    progress, while `last_id` stays the last entry actually delivered, as in Redis;
  - `entries_read`, Redis's logical read counter (None = unknown), and the lag derived from it;
  - the PEL: seq -> `Delivery` (consumer, delivery time, delivery count, entry ms); each
    consumer keeps the same Delivery objects in its own sorted PEL.

Rule 1: a Delivery is in the group PEL iff it is in exactly one consumer's PEL, its owner's;
  `Group.assign` and `Group.drop` are the only ways in and out.
Rule 2: the Delivery/idle machinery is independent of streams (queues reuse it): a Delivery is
  a lease record, idle = now - time.

Mapping of Redis stream counters onto a topic: entries_added = head_seq - seq_base + 1, length =
count, first entry = earliest_seq, last entry = head_seq, and Redis's max-deleted-entry-id is
the highest hole (deleted or lost slot) at/after earliest_seq.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from sortedcontainers import SortedDict

from topicsrv.engine.groups.delivery import Delivery
from topicsrv.engine.log.segments import LIVE
from topicsrv.engine.log.topic import Topic

EXT_KEY = "groups"


@dataclass(slots=True, eq=False)
class Consumer:
    name: str
    seen_time: int  # last time the consumer was referenced (read, claimed, created)
    active_time: int = -1  # last successful delivery/claim to it (-1: never)
    pel: SortedDict = field(default_factory=SortedDict)  # seq -> Delivery


@dataclass(slots=True, eq=False)
class Group:
    name: str
    last_seq: int
    last_ms: int
    cursor: int
    entries_read: int | None
    pel: SortedDict = field(default_factory=SortedDict)  # seq -> Delivery
    consumers: SortedDict = field(default_factory=SortedDict)  # name -> Consumer

    @property
    def last_id(self) -> tuple[int, int]:
        return self.last_ms, self.last_seq

    def consumer(self, name: str) -> Consumer | None:
        found: Consumer | None = self.consumers.get(name)
        return found

    def touch(self, name: str, now: int) -> Consumer:
        """Look the consumer up, creating it; refresh its seen-time (Redis SLC_DEFAULT)."""
        c = self.consumer(name)
        if c is None:
            c = self.consumers[name] = Consumer(name, now)
        c.seen_time = now
        return c

    def assign(self, d: Delivery, owner: Consumer) -> None:
        if d.consumer != owner.name:
            old = self.consumer(d.consumer)
            if old is not None:
                old.pel.pop(d.seq, None)
            d.consumer = owner.name
        owner.pel[d.seq] = d
        self.pel[d.seq] = d

    def drop(self, d: Delivery) -> None:
        self.pel.pop(d.seq, None)
        owner = self.consumer(d.consumer)
        if owner is not None:
            owner.pel.pop(d.seq, None)


class Groups:
    """The consumer groups of one topic, by name (sorted, as Redis lists them)."""

    def __init__(self) -> None:
        self.by_name: SortedDict = SortedDict()

    def get(self, name: str) -> Group | None:
        found: Group | None = self.by_name.get(name)
        return found

    def __len__(self) -> int:
        return len(self.by_name)

    def __iter__(self) -> Iterator[Group]:
        return iter(self.by_name.values())

    def to_dict(self) -> dict[str, Any]:
        return {"groups": [group_to_dict(g) for g in self]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Groups:
        out = cls()
        for gd in data.get("groups", []):
            g = group_from_dict(gd)
            out.by_name[g.name] = g
        return out


def groups_of(topic: Topic, create: bool = False) -> Groups | None:
    found: Groups | None = topic.ext.get(EXT_KEY)
    if found is None and create:
        found = topic.ext[EXT_KEY] = Groups()
    return found


def find(topic: Topic | None, name: str) -> Group | None:
    if topic is None:
        return None
    gs = groups_of(topic)
    return None if gs is None else gs.get(name)


# ---- Redis's stream counters on a topic ------------------------------------------------------


def entries_added(topic: Topic) -> int:
    """Redis's entries-added, the one definition (XINFO STREAM, group lag): every seq up to the
    visible head; a write still waiting for its fsync counts once readers can see it."""
    return topic.head_seq - topic.seq_base + 1


def entry_ms(topic: Topic, seq: int) -> int:
    """The ms part of the id of `seq`: its $ts while the slot is resident, else a bound."""
    if topic.segs and topic.segs[0].base <= seq < topic.next_seq:
        return topic.ts_of(seq)
    if seq >= topic.head_seq:
        return topic.last_ts
    return 0


def max_hole(topic: Topic) -> int | None:
    """The highest deleted/lost slot in [earliest_seq, head_seq] (Redis's max-deleted id, as far
    as it still fragments the stream), or None."""
    lo, head = topic.earliest_seq, topic.head_seq
    if lo > head or topic.count >= head - lo + 1:
        return None
    for seg in reversed(topic.segs):
        if seg.next_seq <= lo:
            break
        start = max(lo - seg.base, 0)
        n = len(seg)
        if seg.flags.count(LIVE, start, n) == n - start:
            continue
        for k in range(n - 1, start - 1, -1):
            if seg.flags[k] != LIVE:
                return seg.base + k
    return None


def has_tombstones(topic: Topic, start: int, hole: int | None) -> bool:
    """Redis's streamRangeHasTombstones(s, start, NULL)."""
    return topic.count > 0 and hole is not None and start <= hole


def estimate_entries_read(topic: Topic, seq: int, hole: int | None = None) -> int | None:
    """Redis's streamEstimateDistanceFromFirstEverEntry: the logical read counter at `seq`."""
    added = entries_added(topic)
    if not added:
        return 0
    head = topic.head_seq
    if not topic.count and seq <= head:
        return added
    if seq == head:
        return added
    if seq > head:
        return None
    first = topic.earliest_seq
    if hole is None or hole < first:
        if seq < first:
            return added - topic.count
        if seq == first:
            return added - topic.count + 1
    return None


def lag(topic: Topic, group: Group) -> int | None:
    """XINFO GROUPS `lag` (None = unknown), exactly as Redis 7 computes it (not clamped: an
    `entries-read` set past `entries-added` by XGROUP SETID gives a negative lag, as Redis 7)."""
    added = entries_added(topic)
    if not added:
        return 0
    hole = max_hole(topic)
    if group.entries_read is not None and not has_tombstones(topic, group.last_seq, hole):
        return added - group.entries_read
    est = estimate_entries_read(topic, group.last_seq, hole)
    return None if est is None else added - est


# ---- group lifecycle -------------------------------------------------------------------------


def create(
    topic: Topic, name: str, last_seq: int, last_ms: int, entries_read: int | None, now: int
) -> Group | None:
    """XGROUP CREATE; None when the group exists (BUSYGROUP)."""
    gs = groups_of(topic, create=True)
    assert gs is not None
    if name in gs.by_name:
        return None
    g = Group(name, last_seq, last_ms, last_seq, entries_read)
    gs.by_name[name] = g
    return g


def setid(group: Group, last_seq: int, last_ms: int, entries_read: int | None) -> None:
    """XGROUP SETID: moves the cursor anywhere (backwards re-delivers); the PEL is kept."""
    group.last_seq = group.cursor = last_seq
    group.last_ms = last_ms
    group.entries_read = entries_read


def destroy(topic: Topic, name: str) -> bool:
    gs = groups_of(topic)
    if gs is None or name not in gs.by_name:
        return False
    del gs.by_name[name]
    return True


def create_consumer(group: Group, name: str, now: int) -> bool:
    if group.consumer(name) is not None:
        return False
    group.consumers[name] = Consumer(name, now)
    return True


def delete_consumer(group: Group, name: str) -> int:
    """XGROUP DELCONSUMER: returns how many entries it had pending (they leave the PEL)."""
    c = group.consumers.pop(name, None)
    if c is None:
        return 0
    for seq in c.pel:
        group.pel.pop(seq, None)
    return len(c.pel)


# ---- snapshots (storage restores group state from these) -------------------------------------


def group_to_dict(g: Group) -> dict[str, Any]:
    return {
        "name": g.name,
        "last_seq": g.last_seq,
        "last_ms": g.last_ms,
        "cursor": g.cursor,
        "entries_read": g.entries_read,
        "consumers": [
            {"name": c.name, "seen_time": c.seen_time, "active_time": c.active_time}
            for c in g.consumers.values()
        ],
        "pel": [[d.seq, d.ms, d.consumer, d.time, d.count] for d in g.pel.values()],
    }


def group_from_dict(data: dict[str, Any]) -> Group:
    g = Group(str(data["name"]), int(data["last_seq"]), int(data["last_ms"]), int(data["cursor"]),
              None if data.get("entries_read") is None else int(data["entries_read"]))
    for cd in data.get("consumers", []):
        g.consumers[cd["name"]] = Consumer(cd["name"], int(cd["seen_time"]), int(cd.get("active_time", -1)))
    for seq, ms, owner, t, n in data.get("pel", []):
        d = Delivery(int(seq), int(ms), str(owner), int(t), int(n))
        c = g.consumer(d.consumer) or g.consumers.setdefault(d.consumer, Consumer(d.consumer, d.time))
        c.pel[d.seq] = d
        g.pel[d.seq] = d
    return g


def snapshot(topic: Topic) -> dict[str, Any] | None:
    gs = groups_of(topic)
    return None if gs is None or not len(gs) else gs.to_dict()


def restore(topic: Topic, data: dict[str, Any] | None) -> None:
    if data:
        topic.ext[EXT_KEY] = Groups.from_dict(data)
    else:
        topic.ext.pop(EXT_KEY, None)
