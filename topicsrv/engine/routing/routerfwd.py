"""One forwarding step of a router (seeds 8.1-8.4): synchronous, one engine step.

Rule 1 (order): source seqs are handled in order after the cursor, up to the source's
VISIBLE head (an fsync-class record is forwarded once durable); the dest's appends (copies
and gaps) come in the same order, so per-source FIFO holds and dest seqs are the dest's own.
Rule 2 (what consumes a dest seq): a forwarded copy one; a source seq that is gone
involuntarily (evicted by cap/TTL, LOST, or TRIMMED upstream) one TRIMMED slot, so a dest
reader crossing it gets a `source_trim` tombstone; a deleted, filtered-out or hop-capped
source record none. The cursor moves past all of them.
Rule 3 (what carries): `$node` when `preserve_node`, `$tag` when `preserve_tag`, meta and data
verbatim, in the record's own form (JSON stays JSON, field/value entries stay entries); an
exactly_once copy also carries the key `<router>/<source>/<source_epoch>/<source_seq>` as
`meta._topics_router` (JSON) or a trailing `_topics_router` field before `$node`/`$tag` (entries).
Rule 4 (backpressure): a dest with `discard: "reject"` that is full, or whose storage refuses,
holds the cursor before the first copy that does not fit; the step reports `blocked` and the
copies before it stay. A copy larger than the dest's whole `cap_bytes` could never be kept:
it leaves a one-seq TRIMMED gap instead of blocking the router forever.
Rule 5 (hops): a copy's hop is its source record's hop + 1 (0 for a direct write); hops > 0
live in `topic.ext["hops"]` ({seq: hop}) of a dest that has outbound routers or whose inbound
router is `allow_cycle`/`max_hops`, pruned below the smallest outbound cursor (the front when
there is none). A record is forwarded only if `hop < router.hop_cap`. A gap obeys the same cap
with its own hop (engine/routing/gaphops.py), so no gap goes round a cycle for ever.
Rule 6 (evicted before forwarded): the source's drop hook counts, per outbound router, the
seqs it was going to forward (or report) that an eviction takes above its cursor, so the gap
has exactly that many seqs (a restored router with no count reports the whole span).
Rule 7 (durable first): a router forwards a source record only once the source's storage
holds it durably (`topic.ext["unsynced"]`: the first seqs of the source's WAL writes not yet
fsynced, storage/routerlog.py Rule 6), so a crash never takes a source record whose copy a
dest reader may have seen; the step stops there and counts as caught up (the storage wakes
the worker when the write is durable).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING

import orjson

from topicsrv.engine.log.columns import Tails
from topicsrv.engine.log.entries import bulks, parse_entry
from topicsrv.engine.log.records import KIND_FIELDS, KIND_JSON, PreparedRecord
from topicsrv.engine.log.segments import GAP_FLAGS, LIVE, AnySegment, Segment
from topicsrv.engine.log.topic import Topic
from topicsrv.engine.routing import gaphops
from topicsrv.errors import TopicsError

if TYPE_CHECKING:
    from topicsrv.engine.core import Engine
    from topicsrv.engine.routing.routers import Router

KEY_FIELD = "_topics_router"
STEP_BYTES = 8 << 20  # at most this much copied data per step (then the next step goes on)


@dataclass(frozen=True, slots=True)
class Step:
    forwarded: int
    skipped: int
    gap: int  # source seqs reported to the dest as source_trim
    blocked: TopicsError | None
    caught_up: bool


def _key(router: Router, seq: int) -> str:
    spec = router.spec
    return f"{spec.name}/{spec.source}/{router.source_epoch}/{seq}"


def _tracks_hops(dest: Topic, router: Router) -> bool:
    return bool(dest.ext.get("router_out")) or router.spec.allow_cycle or router.spec.max_hops is not None


def copy_of(seg: AnySegment, k: int, seq: int, router: Router) -> PreparedRecord:
    """The dest record for the live source slot `k` of `seg` (Rule 3)."""
    spec = router.spec
    blob = seg.blobs[k]
    assert blob is not None
    node, tag = seg.node(k), seg.tag(k)
    out_node = node if spec.preserve_node else None
    out_tag = tag if spec.preserve_tag else None
    key = _key(router, seq) if spec.guarantee == "exactly_once" else None
    same = out_node == node and out_tag == tag and key is None
    if blob[0] == KIND_JSON:
        if same:  # the stored tail after `"$ts":<ts>` is the copy's tail, byte for byte
            return PreparedRecord(_tail(blob), KIND_JSON, node, tag, int(seg.sizes[k]))
        rec = orjson.loads(blob)
        parts = []
        if out_node is not None:
            parts.append(b',"$node":' + orjson.dumps(out_node))
        if out_tag is not None:
            parts.append(b',"$tag":' + orjson.dumps(out_tag))
        meta = rec.get("meta")
        if key is not None:
            meta = {**(meta or {}), KEY_FIELD: key}
        data = orjson.dumps(rec["data"])
        size = len(data)
        if meta is not None:
            meta_bytes = orjson.dumps(meta)
            size += len(meta_bytes)
            parts.append(b',"meta":' + meta_bytes)
        parts.append(b',"data":' + data + b"}")
        return PreparedRecord(b"".join(parts), KIND_JSON, out_node, out_tag, size)
    if same:  # an entry: the pairs array after the ID is the copy's tail
        return PreparedRecord(_tail(blob), blob[0], node, tag, int(seg.sizes[k]))
    _, _, pairs = parse_entry(blob)
    extras = (node is not None) + (tag is not None)
    items = pairs[: len(pairs) - 2 * extras]
    if key is not None:
        items += [KEY_FIELD.encode(), key.encode()]
    size = sum(map(len, items))
    if out_node is not None:
        items += [b"$node", out_node.encode()]
    if out_tag is not None:
        items += [b"$tag", out_tag.encode()]
    return PreparedRecord(bulks(items), blob[0], out_node, out_tag, size)


def _would_forward(router: Router, topic: Topic, seg: AnySegment, k: int, hops: dict[int, int] | None) -> bool:
    flag = seg.flags[k]
    cap = router.hop_cap
    if flag in GAP_FLAGS:
        return gaphops.forwards(gaphops.hop_of(topic, seg.base + k), cap)
    if flag != LIVE:
        return False
    if cap is not None and hops and hops.get(seg.base + k, 0) >= cap:
        return False
    return router.spec.matches(seg.tag(k))


def on_drop(topic: Topic, front: int, new_front: int) -> None:
    """The source's drop hook (Rule 6): before [front, new_front) goes, count per outbound
    router the seqs above its cursor it would have forwarded or reported."""
    hops = topic.ext.get("hops")
    for router in topic.ext.get("router_out", ()):
        if router.gone is None:
            continue
        s = max(front, router.cursor + 1)
        plain = router.spec.filter is None and router.hop_cap is None
        while s < new_front:
            seg, i = topic.locate(s)
            j = min(new_front, seg.next_seq) - seg.base
            if plain or not seg.live:
                router.gone += seg.flags.count(LIVE, i, j) + sum(seg.flags.count(f, i, j) for f in GAP_FLAGS)
            else:
                router.gone += sum(_would_forward(router, topic, seg, k, hops) for k in range(i, j))
            s = seg.base + j


def prune_hops(topic: Topic) -> None:
    hops: dict[int, int] | None = topic.ext.get("hops")
    if not hops and gaphops.KEY not in topic.ext:
        return
    outs = topic.ext.get("router_out")
    floor = min(r.cursor for r in outs) if outs else topic.front - 1
    gaphops.prune(topic, floor)
    if not hops:
        return
    while hops:
        first = next(iter(hops))
        if first > floor:
            break
        del hops[first]


def _block(router: Router, exc: TopicsError, now: int) -> None:
    last = router.last_error
    if router.status == "blocked" and last is not None and last["code"] == exc.code:
        router.retries += 1
        last["message"] = exc.message
        return
    router.status = "blocked"
    router.last_error = {"code": exc.code, "message": exc.message, "since_ts": now}


class _Copies:
    """A run of copies for one `Engine.derive` call, with their hops."""

    __slots__ = ("recs", "hops")

    def __init__(self) -> None:
        self.recs: list[PreparedRecord] = []
        self.hops: list[int] = []


Gap = tuple[int, int]  # (seqs, their hop in the dest)


def _gap_spans(ops: list[tuple[int, _Copies | Gap]], src: Topic, seg: AnySegment, i: int, n: int,
               cap: int | None) -> None:
    """The gap slots of `seg` [i, n) as dest gaps, each span at its hop + 1 (Rule 5)."""
    for a, b, hop in gaphops.spans(src, seg.base + i, seg.base + n):
        if not gaphops.forwards(hop, cap):
            continue
        gaps = sum(seg.flags.count(f, a - seg.base, b - seg.base) for f in GAP_FLAGS)
        if gaps:
            _add_gap(ops, a, gaps, hop + 1)


def _tail(blob: bytes) -> bytes:
    """The stored record after its `$seq`/`$ts` (a JSON blob) or its ID (an entry)."""
    if blob[0] == KIND_JSON:  # {"$seq":N,"$ts":T,...: the comma after T
        return blob[blob.index(b",", blob.index(b",", 8) + 7):]
    end = blob.index(b"\r\n", 5)
    return blob[end + 4 + int(blob[5:end]):]


def forward(engine: Engine, router: Router, limit: int = 1000, until: int | None = None) -> Step:
    """One batch (Rules 1-6): read the source after the cursor, append copies and gaps to
    the dest, move the cursor, wake the dest's readers. `until`: never move the cursor past
    this source seq (recovery re-derives up to a recorded cursor)."""
    spec = router.spec
    src, dst = engine.find(spec.source), engine.find(spec.dest)
    if engine.routers.get(spec.name) is not router or src is None or dst is None:
        return Step(0, 0, 0, None, True)  # deleted: nothing moves, ever (a step never runs late)
    now = engine.now()
    cursor, gone = router.cursor, router.gone  # as the step found them (routerrepl.py Rule 2)
    src.expire(now)
    dst.expire(now)
    hi = src.head_seq if until is None else min(src.head_seq, until)
    unsynced: deque[int] | None = src.ext.get("unsynced")
    held = bool(unsynced) and unsynced is not None and unsynced[0] - 1 < hi  # Rule 7
    if held and unsynced is not None:
        hi = unsynced[0] - 1
    ops: list[tuple[int, _Copies | Gap]] = []  # (first source seq, copies | gap)
    skipped = 0
    s = router.cursor + 1
    if s <= hi and s < src.front:  # evicted unforwarded (Rule 6)
        stop = min(src.front - 1, hi)
        span = stop - router.cursor
        n = span if router.gone is None else min(router.gone, span)
        router.gone = 0 if stop == src.front - 1 or router.gone is None else router.gone - n
        if n:
            ops.append((s, (n, 1)))
        s = stop + 1
    hops: dict[int, int] | None = src.ext.get("hops")
    cap = router.hop_cap
    cfg = dst.config
    reject = cfg.discard == "reject" and bool(cfg.cap_records or cfg.cap_bytes)
    room_n = cfg.cap_records - dst.count if cfg.cap_records else -1
    room_b = cfg.cap_bytes - dst.bytes if cfg.cap_bytes else -1
    # a plain router copies runs of live slots as slices (Rule 3: the stored tails verbatim)
    plain = (spec.filter is None and (cap is None or not hops) and spec.preserve_node
             and spec.preserve_tag and spec.guarantee == "at_least_once" and not reject
             and not cfg.cap_bytes)
    budget, nbytes = limit, 0
    stuck: PreparedRecord | None = None  # the first copy that did not fit (Rule 4)
    while s <= hi and budget > 0 and nbytes < STEP_BYTES and stuck is None:
        seg, i = src.locate(s)
        n = min(len(seg), hi + 1 - seg.base)
        if not seg.live:  # nothing to copy here: count the gap slots, skip the rest
            _gap_spans(ops, src, seg, i, n, cap)
            budget -= 1
            s = seg.base + n
            continue
        flags = seg.flags
        if plain:
            j = min(n, i + budget)
            if flags.count(LIVE, i, j) == j - i:
                base = seg.base
                nodes = seg.nodes[i:j] if seg.nodes is not None else [None] * (j - i)
                tags = seg.tags[i:j] if seg.tags is not None else [None] * (j - i)
                run = _copies(ops, base + i)
                blobs = seg.blobs
                if isinstance(blobs, Tails):  # a bare segment holds the copies' tails as they are
                    run.recs += [PreparedRecord(t, KIND_FIELDS, nd, tg, sz) for t, nd, tg, sz in
                                 zip(blobs.tails(i, j), nodes, tags, seg.sizes[i:j], strict=True)]
                else:
                    run.recs += [PreparedRecord(_tail(b), b[0], nd, tg, sz) for b, nd, tg, sz in
                                 zip(blobs[i:j], nodes, tags, seg.sizes[i:j], strict=True)]
                run.hops += [hops.get(q, 0) + 1 for q in range(base + i, base + j)] if hops else [1] * (j - i)
                nbytes += sum(seg.sizes[i:j])
                budget -= j - i
                s = base + j
                continue
        for k in range(i, n):
            if budget <= 0 or nbytes >= STEP_BYTES:
                break
            seq = seg.base + k
            flag = flags[k]
            budget -= 1
            s = seq + 1
            if flag in GAP_FLAGS:
                _gap_spans(ops, src, seg, k, k + 1, cap)
                continue
            if flag != LIVE:
                continue
            hop = hops.get(seq, 0) if hops else 0
            if (cap is not None and hop >= cap) or not spec.matches(seg.tag(k)):
                skipped += 1
                continue
            rec = copy_of(seg, k, seq, router)
            if cfg.cap_bytes and rec.size > cfg.cap_bytes:  # could never be kept (Rule 4)
                _add_gap(ops, seq, 1, hop + 1)
                continue
            if reject and ((room_n >= 0 and room_n < 1) or (room_b >= 0 and room_b < rec.size)):
                s = seq  # the cursor holds before it (Rule 4)
                stuck = rec
                break
            room_n -= 1
            room_b -= rec.size
            nbytes += rec.size
            run = _copies(ops, seq)
            run.recs.append(rec)
            run.hops.append(hop + 1)
    step = _apply(engine, router, src, dst, ops, skipped, s - 1, stuck, now, held and s > hi)
    if router.cursor > cursor:  # replicas run the same step (engine/routing/routerrepl.py)
        engine.journal.forwarded(router, dst, now, gone)
    return step


def forward_removed(engine: Engine, router: Router, first: int, n: int, flag: int,
                    slot: tuple[int, bytes, int, str | None, str | None] | None, forwarded: bool) -> Step:
    """Recovery only (storage/removed.py): source seqs [first, first + n), right after the
    cursor, that the source no longer holds, handled as they were when they went: `flag`
    and `slot` (ts, blob, size, node, tag of a LIVE record; then n == 1) are the slot as it
    was. `forwarded`: the router had passed it (a copy, a gap or a skip, as in `forward`);
    else an eviction took it unforwarded (a gap if it would have been forwarded: Rule 6)."""
    spec = router.spec
    src, dst = engine.find(spec.source), engine.find(spec.dest)
    if src is None or dst is None:
        return Step(0, 0, 0, None, True)
    now = engine.now()
    ops: list[tuple[int, _Copies | Gap]] = []
    skipped = 0
    if flag in GAP_FLAGS:
        hop = gaphops.hop_of(src, first)
        if gaphops.forwards(hop, router.hop_cap):
            ops.append((first, (n, hop + 1)))
    elif flag == LIVE and slot is not None:
        ts, blob, size, node, tag = slot
        seg = Segment(first)
        seg.append(blob, ts, size, node, tag)
        hops: dict[int, int] | None = src.ext.get("hops")
        hop = hops.get(first, 0) if hops else 0
        if not _would_forward(router, src, seg, 0, hops):
            skipped += forwarded
        elif not forwarded:
            ops.append((first, (1, 1)))
        else:
            rec = copy_of(seg, 0, first, router)
            cap = dst.config.cap_bytes
            if cap and rec.size > cap:
                ops.append((first, (1, hop + 1)))
            else:
                run = _copies(ops, first)
                run.recs.append(rec)
                run.hops.append(hop + 1)
    return _apply(engine, router, src, dst, ops, skipped, first + n - 1, None, now)


def _copies(ops: list[tuple[int, _Copies | Gap]], seq: int) -> _Copies:
    if ops:
        last = ops[-1][1]
        if isinstance(last, _Copies):
            return last
    run = _Copies()
    ops.append((seq, run))
    return run


def _add_gap(ops: list[tuple[int, _Copies | Gap]], seq: int, n: int, hop: int) -> None:
    if ops:
        first, last = ops[-1]
        if isinstance(last, tuple) and last[1] == hop:
            ops[-1] = (first, (last[0] + n, hop))
            return
    ops.append((seq, (n, hop)))


def _apply(engine: Engine, router: Router, src: Topic, dst: Topic, ops: list[tuple[int, _Copies | Gap]],
           skipped: int, scanned_to: int, stuck: PreparedRecord | None, now: int, held: bool = False) -> Step:
    forwarded = gap = 0
    blocked: TopicsError | None = None
    track = _tracks_hops(dst, router)
    for first, op in ops:
        try:
            if isinstance(op, tuple):
                base = engine.derive_gap(dst, router, op[0], now)  # one clock a step (routerrepl)
                gap += op[0]
                if track:
                    gaphops.add(dst, base, *op)
            else:
                base = engine.derive(dst, router, op.recs, now)
                forwarded += len(op.recs)
                if track:
                    dst.ext.setdefault("hops", {}).update(zip(range(base, base + len(op.hops)), op.hops, strict=True))
        except TopicsError as exc:
            blocked = exc
            scanned_to = first - 1
            break
    if stuck is not None and blocked is None:
        try:  # the error a write that does not fit gets from the dest
            dst.check_append([stuck])
            blocked = TopicsError("topic_full", f"topic '{dst.name}' is full (discard: reject)")
        except TopicsError as exc:
            blocked = exc
    if scanned_to > router.cursor:
        router.cursor = scanned_to
    router.forwarded += forwarded
    router.skipped += skipped
    router.source_trimmed += gap
    if blocked is not None:
        _block(router, blocked, now)
    else:
        router.last_error = None
        router.status = "caught_up" if router.cursor >= src.head_seq else "forwarding"
    prune_hops(src)
    if track:
        prune_hops(dst)
    if forwarded or gap:
        engine.notify(dst.name)
    return Step(forwarded, skipped, gap, blocked, blocked is None and (held or router.cursor >= src.head_seq))


def _evidence(blob: bytes, prefix: bytes) -> int | None:
    """The source seq of this router's key in a dest record, or None."""
    if blob[0] == KIND_JSON:
        at = blob.find(b'"' + KEY_FIELD.encode() + b'":"' + prefix)
        if at < 0:
            return None
        start = at + len(KEY_FIELD) + 4 + len(prefix)
        end = blob.index(b'"', start)
        digits = blob[start:end]
    else:
        if KEY_FIELD.encode() not in blob:
            return None
        _, _, pairs = parse_entry(blob)
        values = [v for f, v in zip(pairs[0::2], pairs[1::2], strict=True) if f == KEY_FIELD.encode()]
        if not values or not values[-1].startswith(prefix):
            return None
        digits = values[-1][len(prefix):]
    return int(digits) if digits.isdigit() else None


def resume_from_evidence(engine: Engine, router: Router) -> int | None:
    """exactly_once: find the newest dest record carrying this router's key (scanning back
    from the dest's head) and move the cursor up to its source seq, so no copy the dest
    already holds is appended again. Returns that seq (None: no evidence)."""
    dst = engine.find(router.spec.dest)
    if dst is None or not dst.segs:
        return None
    prefix = f"{router.spec.name}/{router.spec.source}/{router.source_epoch}/".encode()
    for seg in reversed(dst.segs):
        if not seg.live:
            continue
        for k in range(len(seg) - 1, -1, -1):
            blob = seg.blobs[k]
            if blob is None or seg.flags[k] != LIVE:
                continue
            seq = _evidence(blob, prefix)
            if seq is not None:
                if seq > router.cursor:
                    router.cursor = seq
                return seq
    return None
