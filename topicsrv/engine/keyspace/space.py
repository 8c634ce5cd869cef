"""The keyspace: string keys beside the engine's topics, one expiry index for both kinds.

Rule 1 (one keyspace): a name is a topic (in `host.topics`) or a string (in `strings`), never
both; `kind` is the only type test and `wrongtype()` the only WRONGTYPE error (RESP prefix
WRONGTYPE, HTTP 409 `key_type_conflict`).
Rule 2 (one write path): every mutation of strings or TTLs is ONE operation (engine/keyspace/
ops.py) passed to `commit`, which checks that storage accepts writes, applies it, journals it
once (`journal.keyspace_changed`) and tells the engine's listeners each key it touched (WATCH,
waiters). Recovery replays the same operations through `apply`.
Rule 3 (expiry): an expired key is never visible: every lookup first runs `expire_if_due` on
its name (lazy expiry), and `active_expire` reclaims at most `budget` due keys per tick
(engine/keyspace/expiry.py Rule 2). Expiring a string journals its delete; expiring a topic
deletes it exactly as DEL (`host.delete_topic`: readers of a recreated name get `recreated`).
Each key that expires, lazily or by the active cycle, is passed to `on_expired` (the bus's
keyspace notifications wire it: Redis's `expired` event) after it is gone.
Counts (DBSIZE, INFO keyspace, KEYS, SCAN, RANDOMKEY) reap every due key first: work
proportional to the keys that expired, never a scan of the map.
Rule 4: sans-IO and synchronous like the rest of the engine; time comes from the host's clock,
kept as `self.clock` (the engine's own `now()` is one interpreted call more, and `host` is a
Python object: every attribute of it is a lookup).
Rule 5: `strings` (name -> Entry), `colls` (name -> a list or hash value) and `order` (the
names of both in SCAN's hash order, engine/keyspace/scanorder.py) change together, in `apply`
only; every lookup goes to `strings` or `colls`, only ordered walks to `order`.
Rule 6 (collections): a list or hash key exists while it holds an element: the change that
empties it deletes it (as Redis). Its changes are physical (ops.py "L", "H", "h", "c"), so
replay rebuilds the same value.
Rule 7 (hash field expiry, hashexpiry.py): `fexpiry` maps each hash with field deadlines to
its soonest one; `kind`, the counts and the active tick reap due fields as they do due keys.
Rule 8 (a replica's keyspace is `passive`): its primary alone decides expiry (repl/state.py
Rule 1); a due key reads as missing but is not deleted, the active tick reclaims nothing, and
the primary's delete arrives as any other change (DBSIZE still counts it, as on a Redis
replica). Hash fields are still reaped where they are met.
Rule 9 (a run's journal, resp/batch_colls.py): between `gather` and `journal_gathered` every
commit applies and tells as always but journals nothing; `journal_gathered` journals the
operations in commit order as ONE (the bytes the WAL would have joined into one frame body
anyway: storage/keyspacelog.py Rule 2), so a run of pipelined LPUSHes pays one journal call.
A crash keeps all of them or none; the replies share the one token.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from mypy_extensions import mypyc_attr

from topicsrv.clock import Clock
from topicsrv.engine.keyspace import colls as colls_mod
from topicsrv.engine.keyspace import hashexpiry
from topicsrv.engine.keyspace.expiry import ExpiryIndex
from topicsrv.engine.keyspace.host import Host, tell, told
from topicsrv.engine.keyspace.ops import Op
from topicsrv.engine.keyspace.scanorder import ScanOrder, page, scan_list
from topicsrv.errors import TopicsError

if TYPE_CHECKING:
    from topicsrv.engine.journal import CommitToken

WRONGTYPE_TEXT: Final = "Operation against a key holding the wrong kind of value"
ACTIVE_BUDGET: Final = 200  # heap pops per active-expiry tick (Rule 3)
STRING, STREAM = "string", "stream"
LIST, HASH = colls_mod.LIST, colls_mod.HASH
ZSET = colls_mod.ZSET


@mypyc_attr(acyclic=True)  # data only, never in a cycle: outside the cyclic GC (docs/decisions.md)
class Entry:
    """A string key's value and its last access (OBJECT IDLETIME), in one object: a write of a
    key already present changes its entry in place and a read records its access there, so
    neither touches the map a second time (the map of 100,000 keys is a cache miss per
    lookup: docs/performance.md). `second` is the access clock in whole Unix seconds, the
    resolution of Redis's LRU clock; 0 = not accessed since it was loaded (replay)."""

    __slots__ = ("value", "second")

    def __init__(self, value: bytes, second: int) -> None:
        self.value = value
        self.second = second


def wrongtype(name: str | None = None) -> TopicsError:
    """The one type error (Rule 1)."""
    detail = {"key": name} if name is not None else None
    return TopicsError("key_type_conflict", WRONGTYPE_TEXT, detail, resp_prefix="WRONGTYPE")


class Keyspace:
    def __init__(self, host: Host) -> None:
        self.host = host
        self.clock: Clock = host.clock  # the engine's, fixed for its life (Rule 4)
        # name -> Entry (its value and last access): a plain dict, so that the compiled build
        # looks a key up with one C call (a SortedDict's .get is a method call through its
        # class); `order` keeps the names in SCAN order (for SCAN and RANDOMKEY) and changes
        # only when a key is added or deleted (Rule 5)
        self.strings: dict[str, Entry] = {}
        self.colls: dict[str, Any] = {}  # name -> ListValue | HashValue (Rules 5-6)
        # the encodings' limits, as Redis's list-max-listpack-size and
        # hash-max-listpack-entries/-value (CONFIG SET changes them; every hash change
        # carries the hash ones: hashvalue.py Rule 3)
        self.list_fill = -2
        self.hash_entries = 512
        self.hash_value = 64
        # set-max-intset-entries, set-max-listpack-entries/-value (setvalue.py Rule 2)
        self.set_intset = 512
        self.set_entries = 128
        self.set_value = 64
        self.zset_entries = 128  # zset-max-listpack-entries/-value (zsetvalue.py Rule 3)
        self.zset_value = 64
        self.order: ScanOrder = scan_list()
        self.enc: dict[str, str] = {}  # encoding overrides (values.py Rule 1)
        self.saving: Any = None  # the snapshot a checkpoint is writing (snapshot.py)
        self.gathered: Op | None = None  # a run's operations, journaled as one (Rule 9)
        self._second = 0
        self.expiry = ExpiryIndex()
        self.fexpiry = ExpiryIndex()  # hash -> its soonest field deadline (colls.py Rule 3)
        self.stats = {"expired_keys": 0, "expired_topics": 0, "string_writes": 0}
        self.nbytes = 0  # sum of len(name) + len(value) over `strings` (INFO used_memory, /metrics)
        self.on_expired: Callable[[str], None] | None = None  # Rule 3
        self.passive = False  # Rule 8: a replica's keyspace (its primary decides expiry)
        # hash fields expired (the hash's name, whether the hash went with them): the bus's
        # `hexpired` (and `del`) events, engine/keyspace/hashexpiry.py
        self.on_hexpired: Callable[[str, bool], None] | None = None

    # ---- lookups (Rule 3: each runs lazy expiry first) -------------------------------------

    def expire_if_due(self, name: str, now: int | None = None) -> bool:
        """Delete `name` if its deadline passed; True when it did (the key is gone)."""
        deadline = self.expiry.deadlines.get(name)
        if deadline is None:
            return False
        if now is None:
            now = self.clock.now_ms()
        if deadline > now:
            return False
        if self.passive:  # a replica: gone for its readers, deleted by its primary (Rule 8)
            return True
        return self._expire(name)

    def _expire(self, name: str) -> bool:
        if name in self.strings or name in self.colls:
            try:
                self.commit([("d", name)])
            except TopicsError:  # storage refuses writes: hide it anyway; replay drops it too
                self.apply([("d", name)])
                self.host.notify(name)
            self.stats["expired_keys"] += 1
            if self.on_expired is not None:
                self.on_expired(name)
            return True
        if name in self.host.topics:
            deadline = self.expiry.deadlines.pop(name)  # delete_topic looks the name up
            try:
                self.host.delete_topic(name)
            except TopicsError:
                self.expiry.set(name, deadline)
                return False  # storage refuses writes: retried on the next tick
            self.stats["expired_keys"] += 1
            self.stats["expired_topics"] += 1
            if self.on_expired is not None:
                self.on_expired(name)
            return True
        self.expiry.clear(name)
        return False

    def kind(self, name: str) -> str | None:
        """"string", "stream" or None (after lazy expiry)."""
        if self.expiry.deadlines and self.expire_if_due(name):
            return None
        if self.fexpiry.deadlines and hashexpiry.reap_if_due(self, name):
            return None
        if name in self.strings:
            return STRING
        coll = self.colls.get(name)
        if coll is not None:
            kind: str = coll.KIND
            return kind
        return STREAM if name in self.host.topics else None

    def get(self, name: str) -> bytes | None:
        """A string's value; None when the key does not exist; WRONGTYPE for a topic."""
        value = self._read(name, self.clock.now_ms())
        if type(value) is TopicsError:
            raise value
        return value

    def get_many(self, names: list[str]) -> list[Any]:
        """get() of each name with one clock read for all (a pipelined run of GETs,
        resp/batch.py Rule 8): its value, None, or a topic's WRONGTYPE error (returned, not
        raised, so each name keeps its own answer)."""
        now = self.clock.now_ms()
        return [self._read(name, now) for name in names]

    def _read(self, name: str, now: int) -> Any:
        """get() at clock reading `now`, a topic's WRONGTYPE error returned."""
        if self.expiry.deadlines and self.expire_if_due(name, now):
            return None
        e: Entry | None = self.strings.get(name)
        if e is None:
            return wrongtype(name) if name in self.host.topics or name in self.colls else None
        e.second = self._clock_second(now)  # touch()
        return e.value

    def value(self, name: str) -> bytes:
        """The value of a string key known to exist (no expiry check, no access recorded)."""
        e: Entry = self.strings[name]
        return e.value

    def _clock_second(self, now: int) -> int:
        """The access clock at `now` (ms) in whole seconds. The same int object for a whole
        second: the compiled Entry stores it unboxed, the pure one keeps a reference, which
        every key touched within that second then shares."""
        second = now // 1000
        if second != self._second:
            self._second = second
        return self._second

    def touch(self, name: str) -> None:
        """Record an access of a string or collection (OBJECT IDLETIME) in whole seconds."""
        e: Any = self.strings.get(name)
        if e is None:
            e = self.colls.get(name)
        if e is not None:
            e.second = self._clock_second(self.clock.now_ms())

    def idle_seconds(self, name: str) -> int:
        """OBJECT IDLETIME of a string: whole seconds since its last access."""
        now = self.clock.now_ms() // 1000
        e: Any = self.strings.get(name)
        if e is None:
            e = self.colls.get(name)
        if e is None or not e.second:
            return 0
        return max(0, now - e.second)

    def deadline(self, name: str) -> int | None:
        return self.expiry.get(name)

    def encoding(self, name: str) -> str:
        from topicsrv.engine.keyspace.values import encoding

        coll = self.colls.get(name)
        if coll is not None:
            enc: str = coll.ENCODING if coll.KIND == LIST else coll.encoding
            return enc
        override = self.enc.get(name)
        return override if override is not None else encoding(self.value(name))

    def reap(self, limit: int | None = None) -> int:
        """Delete due keys: all of them (`limit` None: before a count) or at most `limit` heap
        pops (the active tick). Returns how many keys expired."""
        if self.passive:  # Rule 8
            return 0
        now = self.clock.now_ms()
        budget = limit if limit is not None else len(self.expiry.heap) + 1
        n = 0
        for name in self.expiry.due(now, budget):
            if self._expire(name):
                n += 1
        if self.fexpiry.deadlines:  # hashes whose fields all expired go too
            n += hashexpiry.reap(self, now, ACTIVE_BUDGET if limit is not None else None)
        return n

    def active_expire(self) -> int:
        return self.reap(ACTIVE_BUDGET) if self.expiry.deadlines or self.fexpiry.deadlines \
            else 0

    def size(self) -> int:
        """DBSIZE: live keys of both kinds (due keys reaped first, Rule 3)."""
        if self.expiry.deadlines or self.fexpiry.deadlines:
            self.reap()
        return len(self.strings) + len(self.colls) + len(self.host.topics)

    def names(self) -> list[str]:
        """Every key name (strings, collections and topics) in byte order (KEYS)."""
        from heapq import merge

        if self.expiry.deadlines or self.fexpiry.deadlines:
            self.reap()
        own = sorted([*self.strings, *self.colls]) if self.colls else sorted(self.strings)
        return list(merge(own, self.host.topics))

    # ---- collections (Rules 5-6) -----------------------------------------------------------

    def owns(self, name: str) -> bool:
        """Does a key of the keyspace's own kinds (a string, a list, a hash) hold `name`? (A
        topic's name is the engine's.)"""
        return name in self.strings or name in self.colls

    def coll(self, name: str, kind: str) -> Any:
        """The list or hash value of `name` (after lazy expiry), None when there is no key;
        WRONGTYPE when the key holds another kind. The caller only reads it: changes go
        through `commit` (Rule 2)."""
        if self.expiry.deadlines and self.expire_if_due(name):
            return None
        value = self.colls.get(name)
        if value is not None:
            if value.KIND != kind:
                raise wrongtype(name)
            value.second = self._clock_second(self.clock.now_ms())
            return value
        if name in self.strings or name in self.host.topics:
            raise wrongtype(name)
        return None

    def scan(self, cursor: int, count: int) -> tuple[int, list[str]]:
        """SCAN's page of names of both kinds from `cursor`, and the next cursor
        (engine/keyspace/scanorder.py Rule 2; due keys reaped first, Rule 3)."""
        if self.expiry.deadlines or self.fexpiry.deadlines:
            self.reap()
        return page((self.order, self.host.topics.scan), cursor, count)

    # ---- the write path (Rule 2) -----------------------------------------------------------

    def commit(self, op: Op, access: bool = False, logged: bool = False) -> CommitToken | None:
        """Rule 2. `access`: the op's puts are writes by a client, which count as an access of
        each key (OBJECT IDLETIME counts from it, as Redis's). `logged`: the caller journals
        the op's bytes itself (a replica, its primary's frame: storage/replapply.py)."""
        journal = self.host.journal
        journal.check_writable(None)
        self.apply(op, self._clock_second(self.clock.now_ms()) if access else 0)
        gathered = self.gathered
        if logged:
            token = None
        elif gathered is None:
            token = journal.keyspace_changed(op)
        else:  # Rule 9: journaled with the run's other operations
            gathered += op
            token = None
        self.stats["string_writes"] += 1
        host = self.host
        listened = told(host)
        names: dict[str, None] = {}
        for ch in op:
            kind = ch[0]
            if kind == "x":
                host.notify(ch[1])  # a TTL may be a topic's (engine/core.py Rule 4)
            elif listened and kind != "f":
                names[ch[1]] = None
        if names:
            tell(host, names)
        return token

    def gather(self) -> None:
        """Rule 9: from now on `commit` journals nothing; `journal_gathered` journals every
        operation committed since, as one."""
        self.gathered = []

    def journal_gathered(self) -> CommitToken | None:
        """Rule 9: journal the operations gathered since `gather`, in commit order, as one."""
        op, self.gathered = self.gathered, None
        return self.host.journal.keyspace_changed(op) if op else None

    def apply(self, op: Op, second: int = 0) -> None:
        """Apply an operation's changes in memory (the live path and recovery's replay). A
        put records `second` as its key's access (0: leave it as it is, replay)."""
        strings, expiry, enc = self.strings, self.expiry, self.enc
        saving = self.saving
        for ch in op:
            if saving is not None:  # a checkpoint is reading the keyspace (snapshot.py Rule 2)
                saving.before(ch)
            kind = ch[0]
            if kind == "s":
                name, value = ch[1], ch[2]
                e: Entry | None = strings.get(name)
                if e is not None:  # an overwrite: the entry changes in place, the map does not
                    self.nbytes += len(value) - len(e.value)
                    e.value = value
                    if second:
                        e.second = second
                else:
                    if name in self.colls:  # SET replaces a key of any kind
                        colls_mod.drop(self, name)
                    self.nbytes += len(name) + len(value)
                    strings[name] = Entry(value, second)
                    self.order.add(name)
                if ch[4]:
                    enc[name] = ch[4]
                elif enc:
                    enc.pop(name, None)
                if ch[3]:
                    expiry.set(name, ch[3])
                elif expiry.deadlines:
                    expiry.clear(name)
            elif kind == "d":
                name = ch[1]
                gone: Entry | None = strings.pop(name, None)
                if gone is not None:
                    self.order.remove(name)
                    self.nbytes -= len(name) + len(gone.value)
                    self.enc.pop(name, None)
                    expiry.clear(name)
                elif name in self.colls:
                    colls_mod.drop(self, name)
            elif kind == "x":
                name, deadline, epoch = ch[1], ch[2], ch[3]
                topic = self.host.topics.get(name)
                if topic is not None and topic.epoch != epoch:
                    continue  # a TTL of an earlier incarnation of the topic (ops.py)
                if topic is None and name not in strings and name not in self.colls:
                    continue
                if deadline:
                    expiry.set(name, deadline)
                else:
                    expiry.clear(name)
            elif kind == "f":
                strings.clear()
                self.colls.clear()
                self.order.clear()
                self.nbytes = 0
                self.enc.clear()
                expiry.reset()
                self.fexpiry.reset()
            elif kind in ("L", "H", "c", "h", "Z"):
                colls_mod.apply(self, ch, second)
            elif kind == "S":
                colls_mod.apply(self, ch, second)
            else:
                raise ValueError(f"unknown keyspace change {kind!r}")

    def snapshot(self) -> Op:
        """The whole keyspace as one operation: a flush, then a put of every string (its value,
        deadline and encoding override) and the TTL of every topic that has one, at once (tests
        and models; the checkpoint reads the keyspace in parts instead: snapshot.py)."""
        out: Op = [("f",)]
        deadlines, enc = self.expiry.deadlines, self.enc
        if not deadlines and not enc:
            out += [("s", name, e.value, 0, "") for name, e in self.strings.items()]
        else:
            out += [("s", name, e.value, deadlines.get(name, 0), enc.get(name, ""))
                    for name, e in self.strings.items()]
        out += [colls_mod.put_change(name, value, deadlines.get(name, 0))
                for name, value in self.colls.items()]
        topics = self.host.topics
        for name, deadline in deadlines.items():
            topic = topics.get(name)
            if topic is not None:
                out.append(("x", name, deadline, topic.epoch))
        return out

    def topic_dropped(self, name: str) -> None:
        """A topic left the keyspace (DEL, expiry, FLUSHDB): its TTL goes with it (as Redis's
        DEL), in memory; its frames carry the epoch, so replay never applies it to a new one."""
        self.expiry.clear(name)

    def ttl_change(self, name: str, deadline: int) -> Op:
        """The change that sets (deadline > 0) or removes (0) the TTL of an existing key."""
        topic = self.host.topics.get(name)
        return [("x", name, deadline, 0 if topic is None else topic.epoch)]
