"""Consumer groups on log topics, with Redis 7 semantics (XGROUP, XREADGROUP, XACK, XPENDING,
XCLAIM, XAUTOCLAIM, XINFO GROUPS|CONSUMERS). Pure and synchronous, like the rest of the engine;
time is always passed in (`now`, from `engine.now()`).

This package's `__init__` is the stable import name (`from topicsrv.engine import groups`);
the code lives along its seams:
  groupstate.py  groups, consumers and deliveries as values; Redis's stream counters (lag,
                 entries-read); the lifecycle (XGROUP) and snapshots storage restores from
  grouppel.py    delivery and the PEL: XREADGROUP (`>` and history), XACK, XPENDING
  groupclaim.py  ownership transfer: XCLAIM, XAUTOCLAIM, XREADGROUP's CLAIM
Mutations a front makes that storage must log (XGROUP CREATE, SETID, ...) go through the
Engine's `group_*` operations (engine/core.py), which also journal the change.

This folder owns consumer groups; it may import the log (engine/log/) and the shared engine
modules (config, journal, glob), `engine.core.Engine` for type hints only, and never queues/,
routing/ or keyspace/ (tests/test_layering.py).

Rule 1: a Delivery is in the group PEL iff it is in exactly one consumer's PEL, its owner's.
Rule 2: `>` reads go through the one read pipeline (`reads.read`); XACK/XCLAIM/XAUTOCLAIM
  never touch the log.
"""

from __future__ import annotations

from topicsrv.engine.groups.groupclaim import Claimed, autoclaim, claim, claim_idle, next_ripe
from topicsrv.engine.groups.grouppel import (
    ack,
    pending_range,
    pending_summary,
    read_history,
    read_new,
    resp_entry,
)
from topicsrv.engine.groups.groupstate import (
    EXT_KEY,
    Consumer,
    Delivery,
    Group,
    Groups,
    create,
    create_consumer,
    delete_consumer,
    destroy,
    entries_added,
    entry_ms,
    estimate_entries_read,
    find,
    group_from_dict,
    group_to_dict,
    groups_of,
    has_tombstones,
    lag,
    max_hole,
    restore,
    setid,
    snapshot,
)

__all__ = [
    "EXT_KEY", "Claimed", "Consumer", "Delivery", "Group", "Groups", "ack", "autoclaim", "claim", "claim_idle",
    "create", "create_consumer", "delete_consumer", "destroy", "entries_added", "entry_ms",
    "estimate_entries_read", "find", "group_from_dict", "group_to_dict", "groups_of",
    "has_tombstones", "lag", "max_hole", "next_ripe", "pending_range", "pending_summary", "read_history",
    "read_new", "resp_entry", "restore", "setid", "snapshot",
]
