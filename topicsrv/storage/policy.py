"""Durability classes as data: what each class means to the store, recovery and checkpoints.

The one table of docs/storage.md §Durability classes, as values the storage code consults
(`policy_of(topic.config)`), so a new class is one new row here, never a new branch.

Rule 1: every class of `engine.config.DURABILITY_CLASSES` has exactly one row (a test checks
the table against that tuple and against docs/storage.md).
Rule 2: the topic's config (create/update/drop) is fsync-gated for every class, whatever the
row says: a topic a client was told exists survives a crash.
Rule 3: a class whose records skip the WAL (`wal` False) skips their deletes and trims too;
its config, group definitions and HeadWatermark ceilings are still logged.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from topicsrv.engine.config import TopicConfig

Ack = Literal["fdatasync", "enqueue", "at_once"]
Readable = Literal["at_once", "durable"]
Recovery = Literal["at_open", "after_ready", "config_only"]


@dataclass(frozen=True, slots=True)
class Durability:
    name: str
    # records (and their deletes and trims: Rule 3) are written to the WAL and segment files
    wal: bool
    # when a write is acknowledged: after its batch's fdatasync (the token reports the real
    # fsync ms); on enqueue (waiting only for a HeadWatermark ceiling frame when the write
    # passes the durable ceiling); or at once, never waited on
    ack: Ack
    # records become readable at once, or only once their batch is durable (Topic Rule 6)
    readable: Readable
    # HeadWatermark ceilings are logged, and recovery continues seqs above the durable one
    ceiling: bool
    # how records come back: at open (before readiness), rebuilt just after readiness
    # (recovery Rule 4), or not at all (config only; seqs continue above the old head)
    recovery: Recovery
    # tombstone reason for seqs above the recovered head after a crash with a clean WAL
    # end; None: nobody can have read or been acked them, so they are skipped silently
    # (after WAL damage every class reports `lost`: recovery Rule 5)
    crash_gap: str | None
    # an acknowledged delete (XDEL, DELETE) waits for its frame's fdatasync
    deletes_gated: bool
    # an explicit trim (XTRIM, XADD MAXLEN) waits for its frame's fdatasync
    trims_gated: bool


FSYNC = Durability("fsync", wal=True, ack="fdatasync", readable="durable", ceiling=True,
                   recovery="at_open", crash_gap=None, deletes_gated=True, trims_gated=True)
DISK = Durability("disk", wal=True, ack="enqueue", readable="at_once", ceiling=True,
                  recovery="at_open", crash_gap="lost", deletes_gated=True, trims_gated=False)
MEMORY = Durability("memory", wal=True, ack="at_once", readable="at_once", ceiling=False,
                    recovery="after_ready", crash_gap="lost", deletes_gated=False, trims_gated=False)
EPHEMERAL = Durability("ephemeral", wal=False, ack="at_once", readable="at_once", ceiling=True,
                       recovery="config_only", crash_gap="lost", deletes_gated=False, trims_gated=False)

POLICIES: dict[str, Durability] = {p.name: p for p in (FSYNC, DISK, MEMORY, EPHEMERAL)}


def policy(cls: str) -> Durability:
    return POLICIES[cls]


def policy_of(config: TopicConfig) -> Durability:
    """The row of a topic's class (its config derives the class: engine/config.py Rule 3)."""
    return POLICIES[config.durability]
