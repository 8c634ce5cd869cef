"""redis-py access to topicsrv for the Spark data source: watermarks, loss-aware pages, XADD.

Rule 1: every process (driver planner, each executor task) opens its own client with
`connect(url)`; objects that cross a pickle boundary hold the URL, never a connection.
Rule 2: a read position is a seq used as an exclusive lower bound (a topicsrv cursor):
reading "from 41" returns seqs > 41. Over RESP the position is the stream ID `0-41`, whose
seq part is authoritative (API.md section 9); position 0 is `0-0`, the start of the topic.
Rule 3: pages come from non-blocking `XREAD COUNT n`, not XRANGE, because XREAD is the read
that reports loss in-band and does so atomically with the records of the same page: when
the cursor crossed the topic's evict_floor the page starts with a tombstone entry whose ID
is `<ts>-<gap_to>`. In a range without loss XREAD and XRANGE return the same entries.
Rule 4: replies are read raw (redis-py's stream reply callbacks are removed) so repeated
field names and binary values survive; the client speaks RESP2, and RESP3 maps are
accepted too in case the URL asks for protocol 3.
Rule 5 (columns): against a server with TOPIC.ROWS (the same read as XREAD's, each page as
columns: resp/commands/topic_rows.py), pages arrive column by column and become Arrow
columns without a Python step per record (rows.py `columns_batch`); a server without it is
read entry by entry (Rule 3).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import redis

_RAW_COMMANDS = ("XREAD", "XRANGE", "XREVRANGE", "XINFO STREAM", "XADD")
_UNKNOWN = "unknown command"


def connect(url: str) -> redis.Redis:
    """A redis-py client whose stream replies are left raw (lists of bytes)."""
    client = redis.Redis.from_url(url, protocol=2, socket_timeout=60)
    for name in _RAW_COMMANDS:
        client.response_callbacks.pop(name, None)
    return client


def read_from_url(url: str, read_from: str) -> str:
    """The server a read plans on and reads from (option readFrom): `url` itself for
    `primary`; else one of the replicas its server's ROLE lists (the first, so every task of a
    query reads the same copy: its offsets, tombstones and head are that copy's), or `url`
    when it is itself a replica; `replicaPreferred` falls back to `url` when there is none,
    `replica` raises ValueError."""
    if read_from == "primary":
        return url
    role = connect(url).execute_command("ROLE")
    kind = role[0].decode() if isinstance(role[0], bytes) else str(role[0])
    if kind == "slave":
        return url
    replicas = role[2] if len(role) > 2 else []
    if not replicas:
        if read_from == "replicaPreferred":
            return url
        raise ValueError(f"option readFrom=replica: {url} has no replica (ROLE lists none)")
    host, port = (x.decode() if isinstance(x, bytes) else str(x) for x in replicas[0][:2])
    parts = urlsplit(url)
    auth = parts.netloc.rpartition("@")[0]
    return urlunsplit((parts.scheme, f"{auth}@{host}:{port}" if auth else f"{host}:{port}",
                       parts.path, parts.query, parts.fragment))


def position(seq: int) -> str:
    """The stream ID that means "after seq" (0: from the start)."""
    return f"0-{max(seq, 0)}"


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _int(value: Any) -> int:
    return int(value.decode() if isinstance(value, bytes) else value)


# ---- watermarks ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TopicInfo:
    """The watermarks of one topic (API.md: TOPIC.INFO)."""

    head_seq: int
    earliest_seq: int
    evict_floor: int
    exists: bool = True

    @property
    def earliest_position(self) -> int:
        """The position before the first live record (where "earliest" starts)."""
        return max(self.earliest_seq - 1, 0)


MISSING = TopicInfo(head_seq=0, earliest_seq=1, evict_floor=1, exists=False)


def _pairs_to_dict(reply: Any) -> dict[str, Any]:
    if isinstance(reply, dict):
        return {_text(k): v for k, v in reply.items()}
    items = list(reply)
    return {_text(items[i]): items[i + 1] for i in range(0, len(items) - 1, 2)}


def topic_info(client: redis.Redis, topic: str) -> TopicInfo:
    """TOPIC.INFO of `topic`; a topic that does not exist (yet) reads as empty."""
    try:
        reply = client.execute_command("TOPIC.INFO", topic)
    except redis.ResponseError as exc:
        if "does not exist" in str(exc) or "not found" in str(exc).lower():
            return MISSING
        raise
    info = _pairs_to_dict(reply)
    return TopicInfo(
        head_seq=_int(info["head_seq"]),
        earliest_seq=_int(info["earliest_seq"]),
        evict_floor=_int(info["evict_floor"]),
    )


# ---- entries ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Entry:
    """One record as read over RESP: its id parts and field/value pairs (extras split off)."""

    seq: int
    ts: int
    pairs: list[bytes]
    node: str | None
    tag: str | None
    meta: str | None


@dataclass(frozen=True, slots=True)
class Tombstone:
    """An in-band loss report: seqs [gap_from, gap_to] were lost before this reader read them.

    The connector's reading of the server's tombstone entry (topicsrv.engine.log.tombstone
    `resp_entry`; the connector ships without the server's modules, so it parses the wire).
    tests/integration/test_tombstone_paths.py checks that both agree."""

    ts: int
    gap_from: int
    gap_to: int
    reason: str
    missed_estimate: int | None

    @property
    def seq(self) -> int:
        return self.gap_to

    def clipped(self, lo: int, hi: int) -> Tombstone:
        """The part of the gap inside the range (lo, hi]."""
        return Tombstone(self.ts, max(self.gap_from, lo + 1), min(self.gap_to, hi), self.reason,
                         self.missed_estimate)


def _split_id(ident: Any) -> tuple[int, int]:
    ts, _, seq = _text(ident).partition("-")
    return int(ts), int(seq or 0)


def parse_entry(raw: Any) -> Entry | Tombstone:
    """A raw stream entry `[id, [f, v, ...]]` as an Entry or a Tombstone."""
    ts, seq = _split_id(raw[0])
    pairs = list(raw[1] or [])
    if len(pairs) >= 2 and pairs[0] == b"$type" and pairs[1] == b"tombstone":
        fields = {_text(pairs[i]): pairs[i + 1] for i in range(2, len(pairs) - 1, 2)}
        missed = fields.get("missed_estimate")
        return Tombstone(
            ts=ts,
            gap_from=_int(fields["gap_from"]),
            gap_to=_int(fields.get("gap_to", seq)),
            reason=_text(fields.get("reason", b"unknown")),
            missed_estimate=_int(missed) if missed not in (None, b"") else None,
        )
    extras: dict[bytes, str] = {}
    for key in (b"$meta", b"$tag", b"$node"):  # appended as node, tag, meta: strip from the end
        if len(pairs) >= 2 and pairs[-2] == key:
            extras[key] = pairs[-1].decode("utf-8", "surrogateescape")
            pairs = pairs[:-2]
    return Entry(seq=seq, ts=ts, pairs=pairs, node=extras.get(b"$node"),
                 tag=extras.get(b"$tag"), meta=extras.get(b"$meta"))


def _stream_entries(reply: Any) -> list[Any]:
    if not reply:
        return []
    if isinstance(reply, dict):  # RESP3: {key: entries}
        return list(next(iter(reply.values())) or [])
    return list(reply[0][1] or [])


def read_range(
    client: redis.Redis, topic: str, lo: int, hi: int, page: int
) -> Iterator[list[Entry | Tombstone]]:
    """Pages of the seq range (lo, hi]: records and the tombstones of losses inside the range.

    A tombstone is clipped to the range; a page never holds an entry past `hi`. The read
    ends at `hi` or when no live record follows the cursor.
    """
    cursor = lo
    while cursor < hi:
        before = cursor
        count = max(1, min(page, hi - cursor))
        reply = client.execute_command("XREAD", "COUNT", count, "STREAMS", topic, position(cursor))
        raw = _stream_entries(reply)
        if not raw:
            return
        out: list[Entry | Tombstone] = []
        for item in raw:
            entry = parse_entry(item)
            if entry.seq <= cursor:  # defensive: never go backwards or repeat
                continue
            if isinstance(entry, Tombstone):
                if entry.gap_from <= hi:
                    out.append(entry.clipped(lo, hi))
            elif entry.seq <= hi:
                out.append(entry)
            cursor = entry.seq
            if cursor >= hi:
                break
        if out:
            yield out
        if cursor == before:
            return


@dataclass(slots=True)
class Columns:
    """One page of records as columns (TOPIC.ROWS, Rule 5): one list per column."""

    seqs: list[int]
    tss: list[int]
    nodes: list[Any]
    tags: list[Any]
    metas: list[Any]
    datas: list[Any]

    def __len__(self) -> int:
        return len(self.seqs)

    def head(self, n: int) -> Columns:
        return Columns(self.seqs[:n], self.tss[:n], self.nodes[:n], self.tags[:n],
                       self.metas[:n], self.datas[:n])


def read_rows(
    client: redis.Redis, topic: str, lo: int, hi: int, page: int
) -> Iterator[tuple[Tombstone | None, Columns]] | None:
    """Rule 5: pages of (lo, hi] as (the tombstone of a loss inside the range or None, the
    records as columns), from TOPIC.ROWS; None when the server does not have it (then
    `read_range` reads the same range entry by entry)."""
    try:
        first = client.execute_command("TOPIC.ROWS", topic, max(lo, 0), "LIMIT", max(1, min(page, hi - lo)))
    except redis.ResponseError as exc:
        if _UNKNOWN in str(exc).lower():
            return None
        raise
    return _rows_pages(client, topic, lo, hi, page, first)


def _rows_pages(client: redis.Redis, topic: str, lo: int, hi: int, page: int,
                reply: Any) -> Iterator[tuple[Tombstone | None, Columns]]:
    cursor = lo
    while True:
        seqs, tss, nodes, tags, metas, datas, tomb, next_from, _head = reply
        gap = None
        if tomb is not None:
            gap = Tombstone(_int(tomb[0]), _int(tomb[1]), _int(tomb[2]), _text(tomb[3]),
                            _int(tomb[4]) if tomb[4] is not None else None)
            gap = gap.clipped(lo, hi) if gap.gap_from <= hi else None
        cols = Columns(seqs, tss, nodes, tags, metas, datas)
        if seqs and seqs[-1] > hi:  # never past the range's end
            cols = cols.head(bisect_right(seqs, hi))
        if gap is not None or cols:
            yield gap, cols
        nxt = _int(next_from)
        if nxt <= cursor or nxt >= hi:
            return
        cursor = nxt
        reply = client.execute_command("TOPIC.ROWS", topic, cursor, "LIMIT", max(1, min(page, hi - cursor)))


# ---- writes ----------------------------------------------------------------------------


def entry_args(pairs: list[Any], node: str | None, tag: str | None) -> list[Any]:
    """One record as a TOPIC.APPEND entry: `[NODE node] [TAG tag] npairs field value ...`."""
    args: list[Any] = []
    if node is not None:
        args += ["NODE", node]
    if tag is not None:
        args += ["TAG", tag]
    args.append(len(pairs) // 2)
    args += pairs
    return args


def append_args(topic: str, entries: list[list[Any]], idmp: tuple[str, str] | None = None) -> list[Any]:
    """TOPIC.APPEND of `entries` (entry_args) as one atomic write (docs/resp.md); `idmp` is the
    batch's (producer id, idempotent id): a repeat appends nothing and answers the first
    write's IDs. IDs are server-assigned."""
    args: list[Any] = ["TOPIC.APPEND", topic]
    if idmp is not None:
        args += ["IDMP", *idmp]
    args += ["ENTRIES", len(entries)]
    for entry in entries:
        args += entry
    return args
