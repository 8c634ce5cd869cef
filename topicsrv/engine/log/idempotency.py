"""A topic's idempotency table: HTTP `idempotency_key`s and RESP `XADD IDMP|IDMPAUTO` pairs,
one machinery (docs/resp.md "Idempotent XADD", docs/storage.md T_IDMP).

Rule 1: a key is (producer id, idempotent id), both bytes. HTTP keys live under the producer
`HTTP` (b""); RESP refuses an empty producer id, so the two never collide.
Rule 2: an entry (Hit) remembers where its write went (first seq, count, ts, stream IDs); a
repeated key inside its window returns that and appends nothing.
Rule 3 (bounds): each producer's map keeps insertion order. The HTTP producer keeps its keys
`idempotency_window_ms` and at most KEYS_MAX of them; a RESP producer keeps `duration_s`
seconds and at most `maxsize` iids (Redis's IDMP-DURATION / IDMP-MAXSIZE, per stream); the
whole table holds at most KEYS_MAX entries (past it the least recently written producer's
oldest entry goes first), so memory is bounded per topic whatever the producers do.
Rule 4: time is the engine clock: an entry is live while `now < expires`.
Rule 5: `configure` (XCFGSET) clears every RESP producer's map when a value changes (Redis);
the lifetime counters `added` / `duplicates` (RESP only) survive it.
Rule 6 (persistence, topicsrv/storage): an add is journaled (Journal.idempotent) BEFORE its
APPEND, in the same WAL shard, and recovery keeps it only if that APPEND was replayed; the
whole table is in every checkpoint (`snapshot` / `restore`).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import xxhash

HTTP = b""
DURATION_DEFAULT = 100  # seconds (Redis's stream-idmp-duration)
MAXSIZE_DEFAULT = 100  # iids per producer (stream-idmp-maxsize)
DURATION_MAX = 86_400
MAXSIZE_MAX = 10_000
KEYS_MAX = 100_000

Xid = tuple[int, int]


@dataclass(frozen=True, slots=True)
class Hit:
    expires: int
    first_seq: int
    n: int
    ts: int
    earliest: int
    created: bool
    xids: tuple[Xid, ...] | None = None  # the records' stream IDs in an ID-mapped topic

    def stream_id(self) -> Xid:
        """The entry ID XADD replied with: the first record's."""
        return self.xids[0] if self.xids else (self.ts, self.first_seq)

    def to_json(self, pid: bytes, iid: bytes) -> dict[str, Any]:
        out: dict[str, Any] = {"p": pid.decode("latin-1"), "i": iid.decode("latin-1"), "exp": self.expires,
                               "seq": self.first_seq, "n": self.n, "ts": self.ts, "e": self.earliest,
                               "c": self.created}
        if self.xids:
            out["x"] = [list(x) for x in self.xids]
        return out


def hit_from_json(d: dict[str, Any]) -> tuple[bytes, bytes, Hit]:
    xids = tuple((int(a), int(b)) for a, b in d["x"]) if d.get("x") else None
    hit = Hit(int(d["exp"]), int(d["seq"]), int(d["n"]), int(d["ts"]), int(d.get("e", d["seq"])),
              bool(d.get("c", False)), xids)
    return str(d["p"]).encode("latin-1"), str(d["i"]).encode("latin-1"), hit


def result(topic: Any, hit: Hit) -> dict[str, Any]:
    """A write's result rebuilt from its Hit (Engine.write), marked `duplicate`."""
    last = hit.first_seq + hit.n - 1
    out: dict[str, Any] = {
        "topic": topic.name, "seqs": list(range(hit.first_seq, last + 1)), "first_seq": hit.first_seq,
        "last_seq": last, "ts": hit.ts, "head_seq": last, "earliest_seq": hit.earliest,
        "durability": topic.config.durability, "created": hit.created, "duplicate": True,
    }
    if hit.xids:
        out["xids"] = list(hit.xids)
    return out


def auto_iid(pairs: list[bytes]) -> bytes:
    """IDMPAUTO's idempotent id: derived from the content, independent of the pairs' order
    (as Redis: a XOR of one 128-bit hash per field/value pair), so a resent entry matches."""
    acc = 0
    for i in range(0, len(pairs) - 1, 2):
        h = xxhash.xxh3_128()
        h.update(len(pairs[i]).to_bytes(8, "little"))
        h.update(pairs[i])
        h.update(pairs[i + 1])
        acc ^= h.intdigest()
    return acc.to_bytes(16, "big")


class Table:
    __slots__ = ("producers", "size", "duration_s", "maxsize", "added", "duplicates")

    def __init__(self) -> None:
        self.producers: OrderedDict[bytes, OrderedDict[bytes, Hit]] = OrderedDict()
        self.size = 0
        self.duration_s = DURATION_DEFAULT
        self.maxsize = MAXSIZE_DEFAULT
        self.added = 0
        self.duplicates = 0

    def get(self, pid: bytes, iid: bytes, now: int) -> Hit | None:
        entries = self.producers.get(pid)
        hit = entries.get(iid) if entries is not None else None
        return hit if hit is not None and hit.expires > now else None

    def window_ms(self, pid: bytes, http_window_ms: int) -> int:
        return http_window_ms if pid == HTTP else self.duration_s * 1000

    def add(self, pid: bytes, iid: bytes, hit: Hit, now: int) -> None:
        """Remember `hit` (a replaced expired entry counts as new), evicting per Rule 3."""
        entries = self.producers.get(pid)
        if entries is None:
            entries = self.producers[pid] = OrderedDict()
        else:
            self.producers.move_to_end(pid)
            if entries.pop(iid, None) is not None:
                self.size -= 1
        cap = KEYS_MAX if pid == HTTP else self.maxsize
        while entries and (len(entries) >= cap or next(iter(entries.values())).expires <= now):
            entries.popitem(last=False)
            self.size -= 1
        entries[iid] = hit
        self.size += 1
        if pid != HTTP:
            self.added += 1
        while self.size > KEYS_MAX:
            oldest_pid, oldest = next(iter(self.producers.items()))
            oldest.popitem(last=False)
            self.size -= 1
            if not oldest:
                del self.producers[oldest_pid]

    def expire(self, now: int) -> None:
        """Drop every expired entry (each map is swept from its oldest end)."""
        for pid in list(self.producers):
            entries = self.producers[pid]
            while entries and next(iter(entries.values())).expires <= now:
                entries.popitem(last=False)
                self.size -= 1
            if not entries:
                del self.producers[pid]

    def configure(self, duration_s: int | None, maxsize: int | None) -> bool:
        """XCFGSET; True when a value changed (then every RESP map is cleared, Rule 5)."""
        changed = ((duration_s is not None and duration_s != self.duration_s)
                   or (maxsize is not None and maxsize != self.maxsize))
        if duration_s is not None:
            self.duration_s = duration_s
        if maxsize is not None:
            self.maxsize = maxsize
        if changed:
            for pid in [p for p in self.producers if p != HTTP]:
                self.size -= len(self.producers.pop(pid))
        return changed

    def stats(self, now: int) -> tuple[int, int]:
        """(pids-tracked, iids-tracked): the live RESP producers and their iids."""
        self.expire(now)
        resp = [entries for pid, entries in self.producers.items() if pid != HTTP]
        return len(resp), sum(map(len, resp))

    # ---- persistence (Rule 6) ------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        return {"duration": self.duration_s, "maxsize": self.maxsize, "added": self.added,
                "dups": self.duplicates,
                "hits": [hit.to_json(pid, iid) for pid, entries in self.producers.items()
                         for iid, hit in entries.items()]}

    def restore(self, d: dict[str, Any] | None, with_hits: bool = True) -> None:
        if not d:
            return
        self.duration_s = int(d.get("duration", DURATION_DEFAULT))
        self.maxsize = int(d.get("maxsize", MAXSIZE_DEFAULT))
        self.added = int(d.get("added", 0))
        self.duplicates = int(d.get("dups", 0))
        if not with_hits:
            return
        for raw in d.get("hits", []):
            pid, iid, hit = hit_from_json(raw)
            entries = self.producers.setdefault(pid, OrderedDict())
            if iid not in entries:
                self.size += 1
            entries[iid] = hit

    def is_default(self) -> bool:
        return (not self.size and not self.added and not self.duplicates
                and self.duration_s == DURATION_DEFAULT and self.maxsize == MAXSIZE_DEFAULT)
