"""What the WAL writers tell storage (a mixin of `Storage`; storage/wal.py calls these).

`_ceilings` is asked for the seq reservations a batch should carry (HeadWatermark frames,
docs/storage.md); `_durable` runs once a batch is on disk (its hidden fsync-class records
become readable, routers may forward them); `_failed` once a batch cannot be made durable
(store.py Rule 2: what readers could see becomes LOST, hidden records are skipped, seqs are
never reused, and a LOSTRANGE frame is retried first once the disk writes again).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from topicsrv.engine import restore
from topicsrv.engine.config import SEQ_MAX
from topicsrv.engine.log.segments import DELETED, LOST
from topicsrv.engine.log.topic import Topic
from topicsrv.storage import codec, frames, routerlog
from topicsrv.storage.policy import policy_of
from topicsrv.storage.state import HEADROOM, TState, near_ceiling, state_of
from topicsrv.storage.walread import RESERVE_MAX

if TYPE_CHECKING:
    from topicsrv.engine.core import Engine
    from topicsrv.storage.wal import Batch, Shard

log = logging.getLogger("topicsrv.storage")


class WriterHooks:
    engine: Engine
    nshards: int
    shards: list[Shard]

    _current: Callable[[Topic], bool]  # SegTasks'

    def _ceilings(self, sh: Shard) -> list[tuple[bytes, Any]]:
        out: list[tuple[bytes, Any]] = []
        for topic in sh.ceil_topics.values():
            if not self._current(topic) or not policy_of(topic.config).ceiling:
                continue
            st = state_of(topic, self.nshards)
            head = topic.next_seq - 1
            if not near_ceiling(st, head):
                continue
            # the reservation follows the write rate, within [HEADROOM, RESERVE_MAX] (a bound
            # recovery relies on after WAL damage: walread.Cut), and never passes SEQ_MAX
            new = min(SEQ_MAX, head + min(max(HEADROOM, head - st.ceil_head), RESERVE_MAX))
            if new <= st.ceil_durable:
                continue
            body = codec.encode_json({"name": topic.name, "epoch": topic.epoch, "ceiling": new})

            def done(st: TState = st, new: int = new, head: int = head) -> None:
                st.ceil_durable = max(st.ceil_durable, new)
                st.ceil_head = head

            out.append((frames.encode(frames.T_CEIL, body), done))
        sh.ceil_topics.clear()
        return out

    def _wake(self, name: str) -> None:
        for listener in self.engine.all_listeners():
            listener(name)

    def _reveal(self, topic: Topic, upto: int) -> None:
        # a topic whose class stopped hiding records meanwhile has nothing left to hide;
        # router copies appended behind a hidden write are revealed with it (routerlog.py)
        upto = routerlog.reveal_upto(topic, upto)
        if topic.reveal(upto if policy_of(topic.config).readable == "durable" else topic.next_seq):
            self.engine.notify(topic.name)  # held while a script runs (engine/core.py Rule 3)

    def _durable(self, batch: Batch) -> None:
        """A batch is durable: its hidden (fsync-class) records become readable. Consecutive
        ranges of one topic incarnation (a P1 writer's appends: a range each) are released and
        revealed once, up to their highest end, as one by one would leave them: `release` pops
        every entry below the end and the oldest decides whether a router may move; `reveal`
        keeps the highest end."""
        ranges = batch.ranges
        n = len(ranges)
        i = 0
        while i < n:
            topic, epoch, first, count, _rc = ranges[i]
            end = first + count
            i += 1
            while i < n and ranges[i][0] is topic and ranges[i][1] == epoch:
                end = max(end, ranges[i][2] + ranges[i][3])
                i += 1
            if routerlog.release(topic, end):
                self._wake(topic.name)
            if topic.visible_next is not None and topic.epoch == epoch and self._current(topic):
                self._reveal(topic, end)

    def _failed(self, batch: Batch) -> None:
        """A batch could not be made durable. Records readers could already see (disk and
        memory classes, acknowledged on enqueue) become LOST: a reader crossing them gets a
        `lost` tombstone. Hidden fsync-class records were never readable nor acknowledged
        (their writers get 507), so their seqs are skipped silently. Seqs are never reused."""
        for topic, epoch, first, count, rc in batch.ranges:
            if routerlog.release(topic, first + count):
                self._wake(topic.name)
            if topic.epoch != epoch or not self._current(topic):
                continue
            hidden = topic.visible_next is not None and first >= topic.visible_next
            n = restore.mark_lost(topic, first, count, DELETED if hidden else LOST)
            sh = self.shards[state_of(topic, self.nshards).shard]
            lost: dict[str, Any] = {"name": topic.name, "epoch": epoch, "first": first, "count": count,
                                    "silent": hidden}
            if rc is not None:
                lost["rc"] = rc
            sh.retry.append(frames.encode(frames.T_LOSTRANGE, codec.encode_json(lost)))
            if hidden:
                log.error("topic %s: seqs %d..%d could not be made durable; their writes failed "
                          "(507) and the seqs are skipped", topic.name, first, first + count - 1)
                self._reveal(topic, first + count)
                continue
            log.error("topic %s: seqs %d..%d could not be made durable; %d records marked lost",
                      topic.name, first, first + count - 1, n)
            self.engine.notify(topic.name)
