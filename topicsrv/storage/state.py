"""Per-topic storage state, kept in `topic.ext["storage"]` (it dies with the topic instance).

Rule: the shard of a topic is a stable hash of its name (xxh3), so every frame of a name,
across instances (epochs), lands in one shard and replays in order.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import xxhash

from topicsrv.engine.topic import Topic
from topicsrv.storage.segfiles import SegFile

EXT_KEY = "storage"


def shard_of(name: str, shards: int) -> int:
    return xxhash.xxh3_64_intdigest(name.encode()) % shards


def topic_dir(name: str, epoch: int) -> str:
    return f"topics/{name}@{epoch}"


@dataclass
class TState:
    shard: int
    dir: str
    files: dict[int, SegFile] = field(default_factory=dict)  # key: base // SEGMENT_RECORDS
    dead: set[int] = field(default_factory=set)  # keys of whole-dead segments already unlinked
    ceil_durable: int = 0  # highest seq a durable HeadWatermark covers
    ceil_head: int = 0  # head when the last ceiling was reserved


def state_of(topic: Topic, shards: int) -> TState:
    st: TState | None = topic.ext.get(EXT_KEY)
    if st is None:
        st = topic.ext[EXT_KEY] = TState(shard_of(topic.name, shards), topic_dir(topic.name, topic.epoch))
    return st
