"""The tombstone: the one value that reports involuntary loss, and its rendering per wire.

Seeds tombstones.txt and data-model 5.4/5.5. The read pipeline (`reads.gate`, `reads.read`)
builds it; the fronts only render it, through the methods below:
  to_json()     the `tombstone` object of an HTTP diff; with "topic" first, the data of an SSE
                `event: tombstone`; the `tombstone` map of TOPIC.DIFF; the gap columns of a
                Spark tombstone row (the connector reads them back from `resp_entry`)
  resp_entry()  the stream entry of XREAD, XREADGROUP and TOPIC.DIFF's `tombstone_entry`:
                `[<ts>-<resume_after>, ["$type", "tombstone", field, value, ...]]`

Rule 1: FIELDS is the public shape, in this order, on every wire: no path drops or renames a
  field, and the values are the same (integers as decimal text over RESP, where the
  `$type tombstone` pair in front marks the entry; docs/resp.md). One gap has one `reason`
  on every path.
Rule 2: `reason` is a key of REASONS; a new reason (routers' `source_trim`) is one row there.
Rule 3: the one documented variation is SSE's: a loss a watch finds when it opens, with a
  reason whose row says `at_connect`, carries a seventh field after FIELDS,
  `variant: "from_seq_too_old"` (seeds tombstones.txt: the connect-time variant, Kafka's
  OffsetOutOfRange), beside the same `reason` the diff and XREAD give (`at_connect()`).
Rule 4: `resume_after = earliest_seq - 1` is the position after the tombstone: the SSE cursor
  its frame's `id:` carries and the seq part of its RESP entry ID, so resuming is exact. `ts`,
  the ms part of that ID, is the `$ts` of the first record after the gap (the topic's last
  `$ts` when there is none), so entry IDs stay increasing; it is not a JSON field. In an
  ID-mapped topic (engine/log/xids.py) the entry ID is `xid`: the ID of the first record after
  the gap minus one (the last ID when there is none), so resuming after it is exact too.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from topicsrv.engine.log.entries import encode_entry


@dataclass(frozen=True, slots=True)
class Reason:
    name: str
    at_connect: bool  # SSE marks it `variant: from_seq_too_old` when found as a watch opens
    meaning: str


FROM_SEQ_TOO_OLD = "from_seq_too_old"  # the connect-time variant (Rule 3), not a reason

REASONS: dict[str, Reason] = {r.name: r for r in (
    Reason("cap", True, "live records were evicted for capacity (caps, XTRIM, MAXLEN/MINID)"),
    Reason("ttl", True, "live records expired (now - $ts > ttl_ms)"),
    Reason("mixed", True, "both cap eviction and TTL expiry contributed to the gap"),
    Reason("recreated", False, "the topic was deleted and created again since the cursor"),
    Reason("lost", False, "a crash lost acknowledged records of a non-fsync topic"),
    Reason("failover", False, "a replica was promoted: records the old primary held and had "
                              "not shipped may be lost (engine/log/failover.py)"),
    Reason("source_trim", False,
           "a router's source evicted (or lost) records before they were forwarded here"),
)}

FIELDS = ("gap_from", "gap_to", "reason", "missed_estimate", "earliest_seq", "head_seq")
_TYPE_PAIR = (b"$type", b"tombstone")


@dataclass(frozen=True, slots=True)
class Tombstone:
    """Seqs [gap_from, gap_to] (inclusive) were lost below the reader's cursor; why."""

    gap_from: int
    gap_to: int
    reason: str
    missed_estimate: int
    earliest_seq: int  # the first live seq after the gap: where the read resumes
    head_seq: int
    ts: int  # the ms part of the RESP entry ID (Rule 4)
    xid: tuple[int, int] | None = None  # an ID-mapped topic's entry ID (engine/log/xids.py)
    variant: str | None = None  # SSE's connect-time FROM_SEQ_TOO_OLD (Rule 3)

    def __post_init__(self) -> None:
        if self.reason not in REASONS:
            raise ValueError(f"unknown tombstone reason {self.reason!r}")

    @property
    def resume_after(self) -> int:
        return max(0, self.earliest_seq - 1)

    def at_connect(self) -> Tombstone:
        """The tombstone as an SSE watch reports it when found on opening (Rule 3)."""
        if REASONS[self.reason].at_connect:
            return replace(self, variant=FROM_SEQ_TOO_OLD)
        return self

    def to_json(self) -> dict[str, Any]:
        out = {
            "gap_from": self.gap_from,
            "gap_to": self.gap_to,
            "reason": self.reason,
            "missed_estimate": self.missed_estimate,
            "earliest_seq": self.earliest_seq,
            "head_seq": self.head_seq,
        }
        if self.variant is not None:  # Rule 3
            out["variant"] = self.variant
        return out

    def resp_fields(self) -> list[bytes]:
        """The entry's field/value pairs: `$type tombstone`, then FIELDS as text."""
        out = list(_TYPE_PAIR)
        for name, value in self.to_json().items():
            out += [name.encode(), str(value).encode()]
        return out

    def resp_entry(self) -> bytes:
        if self.xid is not None:
            return encode_entry(self.xid[0], self.xid[1], self.resp_fields())
        return encode_entry(self.ts, self.resume_after, self.resp_fields())
