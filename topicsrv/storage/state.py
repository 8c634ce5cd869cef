"""Per-topic storage state, kept in `topic.ext["storage"]` (it dies with the topic instance).

Rule 1: the shard of a topic is a stable hash of its name (xxh3), so every frame of a name,
across instances (epochs), lands in one shard and replays in order.
Rule 2: a file name on disk is never longer than ~100 bytes whatever the topic name
(`topic_dir`), so no valid name can make a file operation fail with ENAMETOOLONG.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import xxhash

from topicsrv.engine.log.topic import Topic
from topicsrv.storage.segfiles import SegFile

EXT_KEY = "storage"
HEADROOM = 1024  # seqs a HeadWatermark reserves above the head (at least)
DIR_NAME_MAX = 100  # a topic dir named NAME@EPOCH up to this length (the old layout, unchanged)
DIR_PREFIX = 64  # characters of a longer name kept readable in its dir name


def shard_of(name: str, shards: int) -> int:
    return xxhash.xxh3_64_intdigest(name.encode()) % shards


def topic_dir(name: str, epoch: int) -> str:
    """`topics/NAME@EPOCH` while that stays short; a longer name keeps a readable prefix plus
    a hash of the whole name: `topics/PREFIX~HASH@EPOCH` (at most ~100 bytes, far below any
    filesystem's NAME_MAX). `~` is outside the topic-name alphabet, so the two forms never
    collide. The checkpoint maps each topic's real name to its dir."""
    plain = f"{name}@{epoch}"
    if len(plain) <= DIR_NAME_MAX:
        return f"topics/{plain}"
    digest = xxhash.xxh3_64_hexdigest(name.encode())
    return f"topics/{name[:DIR_PREFIX]}~{digest}@{epoch}"


@dataclass
class TState:
    shard: int
    dir: str
    files: dict[int, SegFile] = field(default_factory=dict)  # key: base // SEGMENT_RECORDS
    dead: set[int] = field(default_factory=set)  # keys of whole-dead segments already unlinked
    ceil_durable: int = 0  # highest seq a durable HeadWatermark covers
    ceil_head: int = 0  # head when the last ceiling was reserved
    # router copies appended while earlier (fsync-class) writes were still hidden: [first, end)
    # ranges revealed together with those writes (routerlog.reveal_upto)
    hidden_derived: list[tuple[int, int]] = field(default_factory=list)
    router: Any = None  # a dest's inbound Router as last logged (its cursor goes into a `del`)
    # a router source: (smallest outbound cursor, router names) at the cut of the last
    # checkpoint written for it, and the pair its pending checkpoint will make current
    # (routerlog Rule 5: which deleted slots may be flipped on disk)
    rcut: tuple[int, frozenset[str]] | None = None
    rcut_next: tuple[int, frozenset[str]] | None = None


def near_ceiling(st: TState, head: int) -> bool:
    """A head within half the headroom of the durable seq ceiling: the topic's shard writer
    must reserve a higher one (a HeadWatermark frame, storage/wal.py Rule 2)."""
    return head + HEADROOM // 2 > st.ceil_durable


def state_of(topic: Topic, shards: int) -> TState:
    st: TState | None = topic.ext.get(EXT_KEY)
    if st is None:
        st = topic.ext[EXT_KEY] = TState(shard_of(topic.name, shards), topic_dir(topic.name, topic.epoch))
        # a new topic: no seq below its start was ever handed out, so reservations start there
        st.ceil_durable = st.ceil_head = topic.next_seq - 1
    return st
