"""Routers in storage: derived copies cost no WAL write; router definitions are control frames.

Rule 1: a router's copies (`Journal.derived`, `derived_gap`) write nothing for the classes
that log records: no frame, no HeadWatermark. They are re-derived from the source after a
crash (recovery + rederive.py). Ephemeral dests keep their ceiling behaviour (their seqs
continue above a reserved ceiling, as for a direct write).
Rule 2: every frame of a topic with an inbound router carries that router's cursor at the
moment it was written (`rc`: APPEND_RC's trailing u64, the `rc` key of JSON frames), so
recovery can place it exactly among the re-derived copies.
Rule 3: a router definition change (`router_logged`) is a T_ROUTER frame in the DEST's shard,
fsync-gated like a topic create, for every class: a router a client was told exists
survives a crash. A topic DROP implies its routers are gone (no frame of its own).
Rule 4: the checkpoint entry of a dest carries `router_in` (name, cursor, source_epoch,
spec) taken in the same step as the dest's slots, so contents and cursor always match (also
for Rule 4's fallback entry); a source's entry carries `hops` above its smallest outbound
cursor; checkpoint.json lists every router spec (`routers`).
Rule 5 (a source record removed after it was forwarded): a source's DELETE and TRIM frames
carry `oc`, {router: [cursor, created_ts]} of its outbound routers at that moment, so
recovery knows which removed records a router had already forwarded and gives each its
dest seq again (storage/removed.py). For that the removed record's bytes must be at hand
when recovery replays the frame: a deleted slot of a router source is flipped on disk
(or its dead segment unlinked) only at or below `flip_limit`, the smallest outbound cursor
of the last checkpoint written (re-derivation never starts below it); a checkpoint entry
of a source lists its deleted slots above the seq it flipped up to (`dfloor`, `dels`), and
recovery deletes them again at load.
Rule 6 (forward what is durable): a `disk`-class topic (readable and acknowledged before its
WAL batch is fsynced) lists in `topic.ext["unsynced"]` the first seq of every append whose
batch is not durable yet (`hold`); routers forward only below the oldest (routerfwd Rule 7).
When a batch is durable (or failed: its seqs are LOST then) `release` drops its entries and
says whether a router may now move. So after any crash with a clean WAL end every record a
router forwarded is back in its source and its copy is re-derived at the same dest seq: the
dest needs no `lost` gap (rederive.py Rule 3).
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any

from topicsrv.engine.log.segments import DELETED, Segment
from topicsrv.engine.log.topic import Topic
from topicsrv.engine.routing import gaphops
from topicsrv.storage import frames
from topicsrv.storage.policy import policy_of
from topicsrv.storage.state import EXT_KEY, TState, near_ceiling, state_of

if TYPE_CHECKING:
    from collections.abc import Callable

    from topicsrv.engine.core import Engine
    from topicsrv.storage.wal import Shard, Token

IN_KEY = "router_in"  # topic.ext: the inbound Router of a dest (engine/routing/routers.py)
OUT_KEY = "router_out"  # topic.ext: the outbound Routers of a source
HOPS_KEY = "hops"  # topic.ext: {seq: hop} of resident copies with hop > 0
UNSYNCED_KEY = "unsynced"  # topic.ext: first seqs of appends not durable yet (Rule 6)


def hold(topic: Topic, first_seq: int) -> None:
    """An append of a disk-class topic was enqueued (Rule 6)."""
    pending: deque[int] | None = topic.ext.get(UNSYNCED_KEY)
    if pending is None:
        pending = topic.ext[UNSYNCED_KEY] = deque()
    pending.append(first_seq)


def release(topic: Topic, end: int) -> bool:
    """The appends below `end` are durable (or failed); True when a router of `topic` waits
    for them (Rule 6)."""
    pending: deque[int] | None = topic.ext.get(UNSYNCED_KEY)
    if not pending:
        return False
    first = pending[0]
    while pending and pending[0] < end:
        pending.popleft()
    return first < end and any(r.cursor >= first - 1 for r in topic.ext.get(OUT_KEY, ()))


def rc_of(topic: Topic) -> int | None:
    """The inbound router's cursor (Rule 2), None for a topic without one."""
    router = topic.ext.get(IN_KEY)
    return None if router is None else int(router.cursor)


def oc_of(topic: Topic) -> dict[str, list[int]] | None:
    """The outbound routers' cursors of a source (Rule 5), None for a topic without any."""
    outs = topic.ext.get(OUT_KEY)
    if not outs:
        return None
    return {r.spec.name: [int(r.cursor), int(r.spec.created_ts)] for r in outs}


def valid_oc(oc: Any) -> bool:
    """A frame's `oc` as this version writes it: {name: [cursor, created_ts]} (Rule 5)."""
    return isinstance(oc, dict) and all(
        isinstance(k, str) and isinstance(v, list) and len(v) == 2 and all(type(x) is int for x in v)
        for k, v in oc.items())


def valid_dels(dels: Any) -> bool:
    """A checkpoint entry's `dels`: [[first, last], ...] with first <= last (Rule 5)."""
    return isinstance(dels, list) and all(
        isinstance(r, list) and len(r) == 2 and all(type(x) is int for x in r) and r[0] <= r[1]
        for r in dels)


def flip_limit(topic: Topic, st: TState) -> int | None:
    """The highest seq whose deleted slot may be flipped on disk (Rule 5); None: any."""
    outs = topic.ext.get(OUT_KEY)
    if not outs and st.rcut is None:
        return None
    if st.rcut is None or any(r.spec.name not in st.rcut[1] for r in outs or ()):
        return -1  # a router the last checkpoint did not know: it may re-derive from far back
    return st.rcut[0]


def _deleted_ranges(topic: Topic, above: int) -> list[list[int]]:
    out: list[list[int]] = []
    for seg in topic.segs:
        if not isinstance(seg, Segment) or seg.next_seq <= above + 1:
            continue
        flags = seg.flags
        k = max(0, above + 1 - seg.base)
        while True:
            k = flags.find(DELETED, k)
            if k < 0:
                break
            j = k
            while j < len(flags) and flags[j] == DELETED:
                j += 1
            a, b = seg.base + k, seg.base + j - 1
            if out and out[-1][1] == a - 1:
                out[-1][1] = b
            else:
                out.append([a, b])
            k = j
    return out


def reveal_upto(topic: Topic, upto: int) -> int:
    """`upto`, extended over router copies that were appended right behind it while it was
    hidden (they are readable once everything before them is)."""
    st: TState | None = topic.ext.get(EXT_KEY)
    if st is None or not st.hidden_derived:
        return upto
    ranges = st.hidden_derived
    while ranges and ranges[0][0] <= upto:
        upto = max(upto, ranges.pop(0)[1])
    return upto


def entry_fields(topic: Topic) -> dict[str, Any]:
    """The checkpoint entry's router fields of `topic` (Rule 4)."""
    from topicsrv.engine.routing.routers import spec_to_json

    out: dict[str, Any] = {}
    router = topic.ext.get(IN_KEY)
    if router is not None:
        out["router_in"] = {"name": router.spec.name, "cursor": int(router.cursor),
                            "source_epoch": int(router.source_epoch), "spec": spec_to_json(router.spec)}
    hops: dict[int, int] | None = topic.ext.get(HOPS_KEY)
    outs = topic.ext.get(OUT_KEY)
    st: TState | None = topic.ext.get(EXT_KEY)
    if st is not None:
        st.rcut_next = None
        if outs or st.rcut is not None:  # Rule 5: flipped up to `dfloor`, deleted above it listed
            floor = min((int(r.cursor) for r in outs or ()), default=topic.next_seq - 1)
            limit = flip_limit(topic, st)
            dfloor = floor if limit is None else min(floor, limit)
            out["dfloor"] = dfloor
            out["dels"] = _deleted_ranges(topic, dfloor)
            st.rcut_next = (floor, frozenset(r.spec.name for r in outs or ())) if outs else None
    if outs:
        low = min(int(r.cursor) for r in outs)
        kept = [[seq, hop] for seq, hop in sorted(hops.items()) if seq > low] if hops else []
        if kept:
            out["hops"] = kept
        gaps = [[max(a, low + 1), b, h] for a, b, h in topic.ext.get(gaphops.KEY, ()) if b > low]
        if gaps:  # gap hops (engine/routing/gaphops.py Rule 2)
            out["ghops"] = gaps
    return out


def specs(engine: Engine) -> list[dict[str, Any]]:
    from topicsrv.engine.routing.routers import spec_to_json

    routers: dict[str, Any] = getattr(engine, "routers", {})
    return [spec_to_json(r.spec) for _, r in sorted(routers.items())]


class RouterJournal:
    """The router half of the storage Journal (a mixin of `Storage`)."""

    nshards: int
    shards: list[Shard]

    _control: Callable[[Topic, int, dict[str, Any], bool], Token | None]  # Storage's

    def derived(self, topic: Topic, first_seq: int, n: int) -> None:
        """Router copies [first_seq, first_seq + n) were appended to `topic` (Rule 1)."""
        st = state_of(topic, self.nshards)
        pol = policy_of(topic.config)
        if not pol.wal:
            if near_ceiling(st, first_seq + n - 1):  # as `appended`
                self.shards[st.shard].want_ceiling(topic)
            return
        if topic.visible_next is not None and n > 0:
            st.hidden_derived.append((first_seq, first_seq + n))

    def derived_gap(self, topic: Topic, first_seq: int, n: int, flag: int) -> None:
        """A run of `n` seqs with no record (a `source_trim` gap): like copies (Rule 1)."""
        self.derived(topic, first_seq, n)

    def router_logged(self, dest: Topic, op: dict[str, Any]) -> Token | None:
        """A router definition change, in the dest's shard, gated (Rule 3). A `del` carries
        the cursor the router stopped at (`rc`): recovery re-derives its copies up to it."""
        st = state_of(dest, self.nshards)
        obj: dict[str, Any] = {"op": op}
        if op.get("op") == "del":
            old = st.router
            if old is not None and old.spec.name == op.get("name"):
                obj["rc"] = int(old.cursor)
            st.router = None
        else:
            st.router = dest.ext.get(IN_KEY)
        return self._control(dest, frames.T_ROUTER, obj, True)


def carry(old: Topic, new: Topic) -> None:
    """A memory-class topic rebuilt after readiness takes its placeholder's router links."""
    for key in (IN_KEY, OUT_KEY):
        if key in old.ext:
            new.ext[key] = old.ext[key]
    new.drop_hook = old.drop_hook
