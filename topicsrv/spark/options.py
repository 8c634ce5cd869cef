"""Options of the `topics` source and sink, offset specs, and splitting seq ranges.

Rule 1: an offset is a topicsrv cursor, the exclusive lower bound of what comes next; a
range is (lo, hi]: `startingOffsets {"a": 100}` reads from seq 101, `endingOffsets
{"a": 200}` reads through seq 200 inclusive. Streaming offsets use the same numbers.
Rule 2: offset dicts always hold every configured topic, keys sorted, so two equal
positions serialise to identical JSON (Spark compares offsets by their JSON text).
Rule 3: option parsing is pure and raises ValueError with the option's name; nothing here
touches the network.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from topicsrv.spark.client import TopicInfo

EARLIEST = "earliest"
LATEST = "latest"
DEFAULT_PAGE = 1000


def _get(options: Mapping[str, str], name: str, default: str | None = None) -> str | None:
    lowered = {str(k).lower(): v for k, v in options.items()}
    value = lowered.get(name.lower())
    return default if value is None else str(value)


def _bool(options: Mapping[str, str], name: str, default: bool) -> bool:
    value = _get(options, name)
    if value is None:
        return default
    v = value.strip().lower()
    if v in ("true", "1", "yes"):
        return True
    if v in ("false", "0", "no"):
        return False
    raise ValueError(f"option {name} must be true or false, not {value!r}")


def _int(options: Mapping[str, str], name: str, default: int | None, minimum: int) -> int | None:
    value = _get(options, name)
    if value is None:
        return default
    try:
        n = int(value)
    except ValueError:
        raise ValueError(f"option {name} must be an integer, not {value!r}") from None
    if n < minimum:
        raise ValueError(f"option {name} must be >= {minimum}, not {n}")
    return n


def _split_list(value: str | None) -> tuple[str, ...]:
    if not value:
        return ()
    return tuple(dict.fromkeys(p.strip() for p in value.split(",") if p.strip()))


OffsetSpec = str | dict[str, int]


def parse_offsets(value: str | None, default: str, name: str, topics: tuple[str, ...]) -> OffsetSpec:
    """`earliest`, `latest` or a JSON object {"topic": seq} (topics it omits use `default`)."""
    if value is None or not value.strip():
        return default
    v = value.strip()
    if v.lower() in (EARLIEST, LATEST):
        return v.lower()
    try:
        obj = json.loads(v)
    except ValueError:
        raise ValueError(f"option {name} must be earliest, latest or a JSON object "
                         f'like {{"topic": 42}}, not {value!r}') from None
    if not isinstance(obj, dict):
        raise ValueError(f"option {name} must be a JSON object of topic -> seq")
    out: dict[str, int] = {}
    for topic, seq in obj.items():
        if topic not in topics:
            raise ValueError(f"option {name} names topic {topic!r}, which is not in option topic")
        if isinstance(seq, bool) or not isinstance(seq, int) or seq < 0:
            raise ValueError(f"option {name}: the position of {topic!r} must be an integer >= 0")
        out[topic] = seq
    return out


def resolve(spec: OffsetSpec, default: str, topic: str, info: TopicInfo) -> int:
    """The position `spec` means for `topic`, given its current watermarks."""
    kind: Any = spec.get(topic, default) if isinstance(spec, dict) else spec
    if kind == EARLIEST:
        return info.earliest_position
    if kind == LATEST:
        return info.head_seq
    return int(kind)


READ_FROM = ("primary", "replica", "replicaPreferred")


def _read_from(value: str) -> str:
    for name in READ_FROM:
        if value.lower() == name.lower():
            return name
    raise ValueError(f"option readFrom must be primary, replica or replicaPreferred, not {value!r}")


@dataclass(frozen=True)
class ReadOptions:
    url: str
    topics: tuple[str, ...]
    starting: OffsetSpec
    ending: OffsetSpec
    nodes: tuple[str, ...]
    min_partitions: int  # 0: the default (`default_partitions`)
    page: int
    max_per_trigger: int | None
    fail_on_data_loss: bool
    include_tombstones: bool
    read_from: str = "primary"  # primary | replica | replicaPreferred (client.read_from_url)

    @classmethod
    def parse(cls, options: Mapping[str, str], streaming: bool) -> ReadOptions:
        url = _get(options, "url", "redis://127.0.0.1:6379") or ""
        topics = _split_list(_get(options, "topic") or _get(options, "topics"))
        if not topics:
            raise ValueError('option topic is required: one topic or a comma-separated list "a,b"')
        starting = parse_offsets(_get(options, "startingOffsets"),
                                 LATEST if streaming else EARLIEST, "startingOffsets", topics)
        ending = parse_offsets(_get(options, "endingOffsets"), LATEST, "endingOffsets", topics)
        if streaming and _get(options, "endingOffsets") is not None:
            raise ValueError("option endingOffsets applies to batch reads only")
        if ending == EARLIEST or (isinstance(ending, dict) and EARLIEST in ending.values()):
            raise ValueError("option endingOffsets cannot be earliest")
        return cls(
            url=url,
            topics=topics,
            starting=starting,
            ending=ending,
            nodes=_split_list(_get(options, "node")),
            min_partitions=_int(options, "minPartitions", 0, 1) or 0,
            page=_int(options, "pageSize", DEFAULT_PAGE, 1) or DEFAULT_PAGE,
            max_per_trigger=_int(options, "maxOffsetsPerTrigger", None, 1),
            fail_on_data_loss=_bool(options, "failOnDataLoss", True),
            include_tombstones=_bool(options, "includeTombstones", False),
            read_from=_read_from(_get(options, "readFrom", "primary") or "primary"),
        )


MAX_BATCH = 10_000  # rows per TOPIC.APPEND: the server's records per write (records.py)


@dataclass(frozen=True)
class WriteOptions:
    url: str
    topic: str | None
    batch_size: int
    idempotent: bool = True  # one IDMP key per batch (writer.py Rule 4)

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> WriteOptions:
        return cls(
            url=_get(options, "url", "redis://127.0.0.1:6379") or "",
            topic=(_get(options, "topic") or "").strip() or None,
            batch_size=min(_int(options, "batchSize", 500, 1) or 500, MAX_BATCH),
            idempotent=_bool(options, "idempotent", True),
        )


def ordered(offsets: Mapping[str, int]) -> dict[str, int]:
    """An offset dict with its keys sorted (stable JSON)."""
    return {k: int(offsets[k]) for k in sorted(offsets)}


def default_partitions(ranges: Mapping[str, tuple[int, int]], page: int) -> int:
    """Tasks for a read with no `minPartitions`: one per core of this machine (Spark's
    `local[*]`), yet never a task for less than a page of seqs, so a small read stays one task
    per topic."""
    total = sum(max(0, hi - lo) for lo, hi in ranges.values())
    return max(1, min(os.cpu_count() or 1, total // max(page, 1)))


def split_ranges(
    ranges: Mapping[str, tuple[int, int]], min_partitions: int
) -> list[tuple[str, int, int]]:
    """(topic, lo, hi) pieces covering every (lo, hi] exactly once, at least `min_partitions`
    pieces in all when the seqs allow, each topic cut in proportion to its span."""
    spans = {t: hi - lo for t, (lo, hi) in ranges.items() if hi > lo}
    total = sum(spans.values())
    out: list[tuple[str, int, int]] = []
    for topic in sorted(spans):
        lo, hi = ranges[topic]
        pieces = max(1, min(spans[topic], -(-spans[topic] * min_partitions // total)))
        step, extra = divmod(spans[topic], pieces)
        start = lo
        for i in range(pieces):
            end = start + step + (1 if i < extra else 0)
            out.append((topic, start, end))
            start = end
    return out


def limit_ranges(
    ranges: Mapping[str, tuple[int, int]], max_rows: int
) -> dict[str, int]:
    """End positions admitting at most `max_rows` seqs in all, shared fairly between topics
    (water-filling: a topic with little to read gives its share to the others)."""
    want = {t: max(0, hi - lo) for t, (lo, hi) in ranges.items()}
    grant = dict.fromkeys(want, 0)
    left = max_rows
    active = sorted(t for t, n in want.items() if n > 0)
    while left > 0 and active:
        share = max(1, left // len(active))
        for topic in list(active):
            take = min(share, want[topic] - grant[topic], left)
            grant[topic] += take
            left -= take
            if grant[topic] >= want[topic]:
                active.remove(topic)
            if left <= 0:
                break
    return ordered({t: ranges[t][0] + grant[t] for t in ranges})
