"""The gap a promotion leaves in every topic: seqs the old primary may have handed out.

A replica promoted to primary holds what its old primary shipped before it stopped. The old
primary may have appended (and readers may have read) records it never shipped; their seqs
are unknown here, but bounded in practice by the replication lag.

Rule 1 (no silent loss, no reused seqs): at promotion every topic's log jumps MARGIN seqs
past its head; the slots are LOST and the range is remembered as a failover gap, so a reader
crossing it gets a tombstone with reason `failover` (engine/log/tombstone.py), and no seq the
old primary could have handed out within the margin is handed out again for another record.
A reader that read more than MARGIN unshipped records of one topic is past the gap: docs/
replication.md says so.
Rule 2: the gaps are `topic.ext[KEY]`, a list of [first, last] seq pairs (opened by
engine/restore.py `open_failover_gap`); storage journals
each one (T_LOSTRANGE with `failover`) and checkpoints the list, and replicas of the new
primary receive the frame like any other, so every copy reports the same gap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from topicsrv.engine.log.topic import Topic

KEY: Final = "failover"
MARGIN: Final = 1 << 16  # as the reservation bound recovery assumes after WAL damage


def reason_at(topic: Topic, seq: int) -> str:
    """`failover` when a LOST slot at `seq` is a failover gap's, else `lost`."""
    for first, last in topic.ext.get(KEY, ()):
        if first <= seq <= last:
            return "failover"
    return "lost"
