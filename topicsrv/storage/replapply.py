"""A replica applies its primary's frames live (tasks/replica.py feeds them; sans-IO).

Each frame means in memory what recovery makes of it (storage/recovery.py `_apply`), applied
to the live topic or keyspace, and is then written to the replica's own WAL as the same frame
under the replica's own durability classes (`Storage.replicated`), so it restarts from its
own disk.

Rule 1 (one step): `apply` runs synchronously; the frames of one T_REPL_GROUP (a commit group
of the primary: a MULTI/EXEC, a script) are applied inside one commit group of the replica's
journal, so its readers and its disk see all of them or none.
Rule 2 (idempotent): a frame the replica already holds changes nothing (an APPEND below
`next_seq`, a DELETE of deleted seqs, a keyspace operation: engine/keyspace/ops.py Rule 1),
so a resumed stream that overlaps what a checkpoint brought is harmless.
Rule 3 (the primary decides): nothing here reads the replica's clock to decide (records keep
the primary's ts; expiry, lease timeouts and forwarding arrive as their effects).
Rule 4: T_CEIL and T_SEGDROP never arrive (repl/backlog.py Rule 2).
Rule 5 (routers): a router definition (T_ROUTER) is installed or removed as on the primary,
and a primary's forwarding step (T_FORWARD) is run again here on the primary's clock, so the
copies are the primary's without crossing the link (engine/routing/routerrepl.py); a dest's
direct writes keep the cursor they carry (APPEND_RC), which the replica's own recovery needs
to place them among the copies it re-derives (storage/rederive.py Rule 1).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import orjson

from topicsrv.engine import restore
from topicsrv.engine.groups import groupops
from topicsrv.engine.keyspace import ops as ks_ops
from topicsrv.engine.log import idempotency as idem
from topicsrv.engine.routing import routerrepl
from topicsrv.storage import codec, frames, recovery, routerlog

if TYPE_CHECKING:
    from topicsrv.engine.core import Engine
    from topicsrv.engine.log.topic import Topic
    from topicsrv.storage.store import Storage

log = logging.getLogger("topicsrv.repl")


class Applier:
    def __init__(self, engine: Engine, storage: Storage | None) -> None:
        self.engine = engine
        self.storage = storage
        self.idmp_pending: dict[tuple[str, int], dict[str, Any]] = {}
        self.frames = 0
        self.on_functions: Callable[[list[bytes]], None] | None = None  # the scripting service

    def apply(self, items: list[frames.Frame]) -> None:
        """Rule 1: every frame of `items`, in order, in this one step."""
        touched: dict[str, None] = {}
        for fr in items:
            self._one(fr.ftype, fr.body, touched)
        for name in touched:
            self.engine.notify(name)

    def _one(self, ftype: int, body: memoryview, touched: dict[str, None]) -> None:
        self.frames += 1
        if ftype == frames.T_REPL_PING:
            return
        if ftype == frames.T_REPL_GROUP:
            journal = self.engine.journal
            journal.begin_group()
            try:
                for fr in frames.scan(body, 0):
                    if isinstance(fr, frames.Damage):
                        raise ValueError(f"a damaged group frame from the primary: {fr.reason}")
                    self._one(fr.ftype, fr.body, touched)
            finally:
                journal.end_group()
            return
        if ftype == frames.T_FUNCTIONS:  # the whole library set (scripting/service.py Rule 7)
            replace_all = self.on_functions
            if replace_all is not None:
                codes: list[str] = orjson.loads(bytes(body))
                replace_all([c.encode("latin-1") for c in codes])
            return
        if ftype == frames.T_KEYSPACE:  # written as received (no decode-encode round trip)
            raw = bytes(body)
            self.engine.keyspace.commit(ks_ops.decode(raw), logged=self.storage is not None)
            if self.storage is not None:
                self.storage.replicated_keyspace(raw)
            return
        if ftype in frames.RECORD_FRAMES:
            self._append(ftype, body, touched)
            return
        d = codec.decode_json(body)
        name, epoch = str(d["name"]), int(d["epoch"])
        if ftype == frames.T_TOPIC:
            self._topic(d)
            return
        topic = self.engine.topics.get(name)
        if topic is None or topic.epoch != epoch:
            return  # a topic this replica does not have in that incarnation (dropped since)
        if ftype == frames.T_DROP:
            self.engine.delete_topic(name)  # journals the drop itself
            return
        if ftype == frames.T_GROUPPROG:  # never in a WAL, the replica's neither (groupops Rule 3)
            groupops.apply_progress(topic, d["op"])
            return
        if ftype == frames.T_FORWARD:  # Rule 5
            gone = d.get("gone")
            routerrepl.follow(self.engine, str(d["router"]), topic, int(d["to"]), int(d["ts"]),
                              int(d["next"]), None if gone is None else int(gone))
            return
        if ftype == frames.T_ROUTER:  # Rule 5: logged by this replica's journal as its own
            routerrepl.apply_op(self.engine, topic, d["op"])
            return
        if ftype == frames.T_IDMP and "add" in d:  # waits for its APPEND, as in recovery
            self.idmp_pending[(name, int(d["add"]["seq"]))] = d["add"]
            return
        if not recovery.redo(topic, ftype, d, self.engine.now()):
            return  # Rule 4
        touched[name] = None
        if self.storage is not None:
            self.storage.replicated(topic, ftype, bytes(body), d)

    def _topic(self, d: dict[str, Any]) -> None:
        name, epoch = str(d["name"]), int(d["epoch"])
        engine = self.engine
        topic = engine.topics.get(name)
        config = restore.config_from_dict(d["config"])
        if topic is not None and topic.epoch > epoch:
            return
        if topic is not None and topic.epoch == epoch:
            topic.config = config
        else:
            if topic is not None:
                engine.delete_topic(name)
            topic = restore.new_topic(name, epoch, str(d["type"]), config, int(d["seq_base"]),
                                      int(d["created_ts"]))
            restore.install(engine, topic)
        if self.storage is not None:
            self.storage.topic_upserted(topic)

    def _append(self, ftype: int, body: memoryview, touched: dict[str, None]) -> None:
        name, epoch, first, ts, n, pos = codec.append_header(body)
        topic: Topic | None = self.engine.topics.get(name)
        if topic is None or topic.epoch != epoch:
            return
        rc = ftype == frames.T_APPEND_RC
        if first + n <= topic.next_seq:
            return  # Rule 2
        xids = codec.append_xids(body, pos, n, rc)
        restore.put_live(topic, first, ts, list(codec.append_items(body, pos, n)), xids)
        add = self.idmp_pending.pop((name, first), None)
        if add is not None:  # its key, sent just before (engine/log/idempotency.py Rule 6)
            pid, iid, hit = idem.hit_from_json(add)
            topic.idempotency.add(pid, iid, replace(hit, ts=ts, earliest=topic.earliest_seq),
                                  self.engine.now())
            if self.storage is not None:
                self.storage.replicated(topic, frames.T_IDMP, codec.encode_json(
                    {"name": name, "epoch": epoch, "add": add}), {"add": add})
        topic.appended_total += n
        topic.last_write_ts = self.engine.now()
        cfg = topic.config
        if cfg.discard == "old" and (cfg.cap_records or cfg.cap_bytes):
            topic.evict_for_cap(cfg.cap_records, cfg.cap_bytes)
        touched[name] = None
        if self.storage is not None:
            if rc and routerlog.rc_of(topic) is None:  # a router this replica lost: plain
                self.storage.replicated_append(topic, bytes(body[:len(body) - 8]), first, n)
            else:
                self.storage.replicated_append(topic, bytes(body), first, n, rc)
