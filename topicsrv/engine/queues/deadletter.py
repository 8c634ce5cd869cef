"""Dead-letter moves (seeds 10.7; queues Rule 3): a job delivered too often leaves its queue
for the `dead_letter` topic, and a crash never loses it nor copies it twice.

Rule 1: the copy is a JSON record: `data`, `tag`, `node` and `meta` verbatim (a field/value
record becomes its HTTP `data` object) plus `meta.$dead_letter_*` provenance.
Rule 2: the job is deleted from the queue only once the copy is durable: `move` records a
`d` event and returns a `Move` whose barrier the mover (tasks/claims.py) awaits before
calling `finish_moves`. Without storage (or into an ephemeral topic) the delete is at once.
Rule 3: after a crash, `resolve_moves` judges each move still recorded: the copy is found by
its provenance (finish: delete the job) or not (the job returns to the freelist, delivery
count kept, to be moved again).
Rule 4: a copy the dead-letter topic refuses (full with discard "reject", a 507) leaves the
job in the queue, counted as delayed, tried again DEAD_LETTER_RETRY_MS later.
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

from topicsrv.engine.journal import CommitToken
from topicsrv.engine.log.entries import parse_entry
from topicsrv.engine.log.records import KIND_JSON, fields_to_data, prepare_json
from topicsrv.engine.log.topic import Topic
from topicsrv.engine.queues import leases
from topicsrv.engine.queues.leases import Event, QueueState, state_of
from topicsrv.errors import TopicsError

if TYPE_CHECKING:
    from topicsrv.engine.core import Engine

log = logging.getLogger("topicsrv.queues")

DEAD_LETTER_REASON = "max_deliveries"
DEAD_LETTER_RETRY_MS = 1000  # a refused dead-letter copy is tried again after this (Rule 4)


@dataclass(slots=True)
class Move:
    """A dead-letter copy waiting to be durable before its job leaves the queue (Rule 3)."""

    queue: Topic
    seq: int
    token: CommitToken


def _record(blob: bytes, node: str | None, tag: str | None) -> dict[str, Any]:
    """The record as an HTTP write object (data, tag, node, meta), whatever form it was stored in."""
    if blob[0] == KIND_JSON:
        obj = orjson.loads(blob)
        return {"data": obj.get("data"), "tag": obj.get("$tag"), "node": obj.get("$node"),
                "meta": dict(obj.get("meta") or {})}
    _, _, pairs = parse_entry(blob)
    extras = (node is not None) + (tag is not None)
    if extras:
        pairs = pairs[: len(pairs) - 2 * extras]
    return {"data": fields_to_data(pairs), "tag": tag, "node": node, "meta": {}}


def move(engine: Engine, topic: Topic, qs: QueueState, seq: int, rec: tuple[bytes, str | None, str | None],
                 now: int, events: list[Event], moves: list[Move]) -> bool:
    """Rule 3: copy the job to its dead-letter topic. False when the copy was refused (the job
    then stays on the freelist and the refusal is counted)."""
    dl = topic.config.dead_letter
    assert dl is not None
    obj = _record(*rec)
    obj["meta"].update({
        "$dead_letter_topic": topic.name,
        "$dead_letter_seq": str(seq),
        "$dead_letter_deliveries": str(qs.deliveries.get(seq, 0)),
        "$dead_letter_reason": DEAD_LETTER_REASON,
        "$dead_letter_ts": str(now),
    })
    try:
        prepared = prepare_json({k: v for k, v in obj.items() if v is not None or k == "data"})
        result, token = engine.write(dl, [prepared], create=True)
    except TopicsError as exc:
        qs.stats["dead_letter_errors"] += 1
        log.warning("queue %s: job %d could not be dead-lettered to '%s' (%s: %s); it stays in "
                    "the queue", topic.name, seq, dl, exc.code, exc.message)
        return False
    ev: Event = ["d", seq, dl, result["first_seq"], now]
    leases.apply(qs, ev)
    events.append(ev)
    barrier = engine.journal.barrier(engine.get(dl)) or token
    if barrier is None:
        _delete_moved(engine, topic, qs, [seq])
    else:
        moves.append(Move(topic, seq, barrier))
    return True


def _delete_moved(engine: Engine, topic: Topic, qs: QueueState, seqs: list[int]) -> CommitToken | None:
    for seq in seqs:
        qs.moving.pop(seq, None)
        qs.deliveries.pop(seq, None)
    _, token = engine.delete_seqs(topic.name, seqs)
    return token


def finish_moves(engine: Engine, moves: list[Move]) -> None:
    """The copies of `moves` are durable: delete their jobs from the queue (Rule 3)."""
    by_topic: dict[int, tuple[Topic, list[int]]] = {}
    for m in moves:
        if engine.topics.get(m.queue.name) is not m.queue:
            continue  # the queue was deleted meanwhile
        by_topic.setdefault(id(m.queue), (m.queue, []))[1].append(m.seq)
    for topic, seqs in by_topic.values():
        _delete_moved(engine, topic, state_of(topic), seqs)


def resolve_moves(engine: Engine, pending: Collection[str] = ()) -> tuple[int, int]:
    """After recovery: finish the dead-letter moves a crash interrupted (Rule 3). A job whose
    copy is in its dead-letter topic (checked by provenance) is deleted now; one whose copy
    did not survive goes back on the freelist, delivery count kept, to be moved again.
    `pending` names the topics whose records are not recovered yet (memory class: they come
    back after readiness): a move into one stays pending (the job is in transit: neither
    claimable nor gone) until a later call judges it. Returns (finished, returned)."""
    finished = returned = 0
    now = engine.now()
    for topic in list(engine.topics.values()):
        qs = topic.ext.get(leases.EXT_KEY) if topic.type == "queue" else None
        if not qs or not qs.moving or topic.name in pending:
            continue
        done: list[int] = []
        for seq, (dl, dl_seq) in list(qs.moving.items()):
            if dl in pending:
                continue
            if topic.record_at(seq) is None:
                leases.forget(qs, seq)
                continue
            if _has_copy(engine, dl, dl_seq, topic.name, seq):
                done.append(seq)
            else:
                qs.moving.pop(seq, None)
                qs._free(seq, now)
                qs.stats["dead_lettered"] = max(0, qs.stats["dead_lettered"] - 1)
                returned += 1
        if done:
            _delete_moved(engine, topic, qs, done)
            finished += len(done)
    return finished, returned


def _has_copy(engine: Engine, dl: str, dl_seq: int, queue: str, seq: int) -> bool:
    target = engine.find(dl)
    rec = target.record_at(dl_seq) if target is not None else None
    if rec is None:
        return False
    meta = _record(*rec)["meta"]
    return bool(meta.get("$dead_letter_topic") == queue and meta.get("$dead_letter_seq") == str(seq))
