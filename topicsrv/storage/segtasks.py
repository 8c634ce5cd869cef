"""Storage background work on segment files: delete flips and the cold tier.

Rule 1: a delete is durable through its WAL Delete frame first; flipping the on-disk flags
of sealed records (and unlinking a segment whose every slot is dead) follows off the hot
path, and a failed flip is retried by the next checkpoint.
Rule 2: a whole dead segment is unlinked only after its SegDrop frame is durable, so
recovery never looks for a file the WAL still needs.
Rule 3: segment-file I/O runs in worker threads, one at a time under `seg_lock` (store.py
Rule 3); only sealed segments older than the newest HOT_SEGMENTS move to the cold dir.
"""

from __future__ import annotations

import logging
from typing import Any

import trio

from topicsrv.engine.log.segments import SEGMENT_RECORDS
from topicsrv.engine.log.topic import Topic
from topicsrv.storage import codec, frames, routerlog, segfiles
from topicsrv.storage.checkpoint import Checkpoints
from topicsrv.storage.policy import policy_of
from topicsrv.storage.state import TState, state_of

log = logging.getLogger("topicsrv.storage")

HOT_SEGMENTS = 2  # sealed segments per topic kept in the hot dir when a cold dir is set


class SegTasks(Checkpoints):
    """Delete flips and cold relocation: the segment-file half of `Storage` (a mixin)."""

    flip_wake: trio.Event
    flip_topics: dict[int, Topic]
    relocate_interval_s: float

    def _current(self, topic: Topic) -> bool:
        return self.engine.topics.get(topic.name) is topic

    # ---- delete flips ------------------------------------------------------------------------

    def flip_later(self, topic: Topic, seqs: list[int] | None = None) -> None:
        """Wake the flipper for `topic` (Rule 1), unless `seqs` (the deleted seqs, when known)
        lie outside every segment file of the topic: their slots are not on disk yet, so
        there is nothing to flip (a checkpoint writes them, and flips, when it appends them).
        So a queue acking jobs still in the WAL costs no flipper round (a thread hop) per ack."""
        if seqs:
            files = state_of(topic, self.nshards).files  # key: base // SEGMENT_RECORDS (aligned)
            lo, hi = min(seqs), max(seqs)
            k0, k1 = lo // SEGMENT_RECORDS, hi // SEGMENT_RECORDS
            if k1 - k0 <= 8 and not any(
                    sf is not None and sf.base <= hi and lo < sf.base + len(sf.offsets)
                    for sf in map(files.get, range(k0, k1 + 1))):
                return
        self.flip_topics[id(topic)] = topic
        self.flip_wake.set()

    async def _flipper(self) -> None:
        while True:
            await self.flip_wake.wait()
            self.flip_wake = trio.Event()
            topics = list(self.flip_topics.values())
            self.flip_topics.clear()
            for topic in topics:
                if self._current(topic):
                    try:
                        await self.flip_deleted(topic)
                    except OSError as exc:
                        log.error("topic %s: delete flags not flipped yet (%s); the next checkpoint "
                                  "retries, the WAL Delete frame covers it until then", topic.name, exc)

    async def flip_deleted(self, topic: Topic) -> None:
        """Flip the on-disk flag of sealed records deleted in memory; unlink dead segments."""
        st = state_of(topic, self.nshards)
        async with self.seg_lock:
            await self.groups_closed()  # not a running script's deletes (txgroup.py Rule 12)
            drops = await trio.to_thread.run_sync(self._flip_topic, topic, st)
        for key in drops:
            sf = st.files.get(key)
            if sf is None:
                continue
            sh = self.shards[st.shard]
            commit = sh.enqueue(frames.encode(frames.T_SEGDROP, codec.encode_json(
                {"name": topic.name, "epoch": topic.epoch, "base": sf.base})))
            await commit.event.wait()
            if commit.error is not None:
                return
            async with self.seg_lock:
                if st.files.get(key) is sf:
                    await trio.to_thread.run_sync(self._unlink_seg, st, sf)
                    st.files.pop(key, None)
                    st.dead.add(key)

    def _seg_for(self, topic: Topic, base: int) -> Any:
        if not topic.segs or base < topic.segs[0].base or base >= topic.next_seq:
            return None
        seg, _ = topic.locate(base)
        return seg if seg.base == base else None

    def _flip_topic(self, topic: Topic, st: TState) -> list[int]:
        drops = []
        limit = routerlog.flip_limit(topic, st)  # a router source: routerlog Rule 5
        for key, sf in list(st.files.items()):
            seg = self._seg_for(topic, sf.base)
            if seg is None:
                continue
            # a LOST or TRIMMED slot keeps its segment: its tombstone (`lost`, `source_trim`)
            # must reach readers after a restart, which an all-DELETED dead segment cannot
            if (seg.full and seg.live == 0 and sf.count == len(seg) and not seg.has_gap()
                    and (limit is None or seg.next_seq - 1 <= limit)):
                drops.append(key)
                continue
            segfiles.flip(self.ops, self._dir(st, sf), sf, segfiles.to_flip(seg, sf, limit))
        return drops

    # ---- cold tier ---------------------------------------------------------------------------------

    async def _relocator(self) -> None:
        while True:
            await trio.sleep(self.relocate_interval_s)
            try:
                await self.relocate()
            except OSError as exc:
                log.error("cold relocation failed (segments stay hot): %s", exc)

    async def relocate(self) -> int:
        """Move older sealed segment files to the cold dir (off the hot path)."""
        if self.cold_dir is None:
            return 0
        work = [(t, state_of(t, self.nshards)) for t in self.engine.topics.values()
                if policy_of(t.config).wal]
        async with self.seg_lock:
            moved: int = await trio.to_thread.run_sync(self._relocate, work)
        return moved

    def _relocate(self, work: list[tuple[Topic, TState]]) -> int:
        assert self.cold_dir is not None
        moved = 0
        for _topic, st in work:
            sealed = sorted((k, sf) for k, sf in st.files.items() if sf.count >= SEGMENT_RECORDS or
                            (sf.base % SEGMENT_RECORDS and sf.count >= SEGMENT_RECORDS - sf.base % SEGMENT_RECORDS))
            for _k, sf in sealed[:-HOT_SEGMENTS] if len(sealed) > HOT_SEGMENTS else []:
                if sf.cold:
                    continue
                src = self.data_dir / st.dir
                dst = self.cold_dir / st.dir
                dst.mkdir(parents=True, exist_ok=True)
                for path in (segfiles.data_path(src, sf.base), segfiles.idx_path(src, sf.base)):
                    self.ops.write_file(dst / path.name, path.read_bytes())
                sf.cold = True
                self.ops.unlink(segfiles.data_path(src, sf.base))
                self.ops.unlink(segfiles.idx_path(src, sf.base))
                moved += 1
        return moved
