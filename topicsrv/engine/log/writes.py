"""The body of `Engine.write`: one atomic append of a batch of prepared records.

Rule 1: `Engine.write` (engine/core.py) is a thin method calling `write` here, so this body
compiles with the hot path (topicsrv/buildinfo.py) while tests can still replace the method
on an instance; core.py and its Engine class stay plain Python.
Rule 2 (engine Rule 2): everything is validated before anything mutates; a refused first
write leaves no topic behind.
Rule 3: per write, not per record: the per-record work is in Topic.append (engine/log/topic.py)
and the journal's frame encoding (storage/codec.py), both compiled.
Rule 4 (lean): a caller that replies with the IDs only (RESP XADD runs: resp/batch.py) asks
for `first_seq`, `last_seq`, `ts`, `duplicate` (and `xids`) alone; the full result's
`earliest_seq` walks the topic's segments and its `seqs` is a list per write. A duplicate
(idempotency hit) returns the full original result either way.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from topicsrv.engine.config import ConfigRequest, check_topic_name, parse_config
from topicsrv.engine.journal import CommitToken
from topicsrv.engine.log import idempotency as idem
from topicsrv.engine.log import xids
from topicsrv.engine.log.records import MAX_RECORDS_PER_WRITE, PreparedRecord
from topicsrv.engine.log.topic import Topic
from topicsrv.errors import TopicsError, invalid, not_found

if TYPE_CHECKING:
    from topicsrv.engine.core import Engine


def write(
    engine: Engine,
    name: str,
    records: list[PreparedRecord],
    create: bool | None,
    config: Any,
    idempotency_key: str | None,
    xid: tuple[int, int | None] | None,
    idmp: tuple[bytes, bytes] | None,
    lean: bool = False,
) -> tuple[dict[str, Any], CommitToken | None]:
    """Engine.write's body (see its docstring)."""
    n = len(records)
    if not n:
        raise invalid("a write needs at least one record")
    if n > MAX_RECORDS_PER_WRITE:
        raise TopicsError(
            "record_too_large",
            f"{n} records in one write; the limit is {MAX_RECORDS_PER_WRITE}",
            {"records": n, "limit": MAX_RECORDS_PER_WRITE},
        )
    req = parse_config(config, "config") if config is not None else None
    found: Topic | None = engine.find(name)
    now: int = engine.clock.now_ms()
    created = False
    if found is None:
        check_topic_name(name)
        if create is False:
            raise not_found(name)
        topic: Topic = engine._create(name, req or ConfigRequest({}, None, None))
        created = True
    else:
        topic = found
    key = idmp
    if key is None and idempotency_key is not None and topic.config.idempotency_window_ms:
        key = (idem.HTTP, idempotency_key.encode("utf-8", "surrogatepass"))
    if key is not None:
        hit = topic.idempotency.get(key[0], key[1], now)
        if hit is not None:
            if key[0] != idem.HTTP:
                topic.idempotency.duplicates += 1
            return idem.result(topic, hit), engine.journal.barrier(topic)
    journal = engine.journal
    try:
        topic.expire(now)
        topic.check_append(records)
        planned = xids.plan(topic, n, xid, now)
        journal.check_writable(topic)
    except TopicsError:
        if created:  # a refused first write leaves no topic behind (Rule 2)
            del engine.topics[name]
            engine.epochs[name] -= 1
        raise
    created_token = journal.topic_upserted(topic) if created else None
    window = 0
    if key is not None:
        window = topic.idempotency.window_ms(key[0], topic.config.idempotency_window_ms)
    first, ts, blobs = topic.append(records, now, planned)
    if window:  # before its APPEND: recovery keeps it only with the records (Table Rule 6)
        hit = idem.Hit(now + window, first, n, ts, topic.earliest_seq, created,
                       None if planned is None else tuple(planned))
        assert key is not None
        topic.idempotency.add(key[0], key[1], hit, now)
        journal.idempotent(topic, {"add": hit.to_json(key[0], key[1])})
    token = journal.appended(topic, first, ts, blobs, records) or created_token
    last = first + n - 1
    size = 0
    for rec in records:
        size += rec.size
    result: dict[str, Any]
    if lean:  # Rule 4
        result = {"first_seq": first, "last_seq": last, "ts": ts, "duplicate": False}
    else:
        result = {
            "topic": name,
            "seqs": list(range(first, last + 1)),
            "first_seq": first,
            "last_seq": last,
            "ts": ts,
            "head_seq": last,
            "earliest_seq": topic.earliest_seq,
            "durability": topic.config.durability,
            "created": created,
            "duplicate": False,
        }
    if planned is not None:
        result["xids"] = planned
    stats = engine.stats
    stats["writes"] += 1
    stats["records_written"] += n
    stats["bytes_written"] += size
    notify(engine, name)
    return result, token


def release(engine: Engine) -> None:
    """Engine.release_changes's body (engine/core.py Rule 3): the held names, in first-change
    order, each told as a write tells it (`notify`), or only to the key listeners when no topic
    of that name changed (Rule 4)."""
    held = engine.held
    engine.held = None
    if not held:
        return
    for name, topic in held.items():
        if topic:
            notify(engine, name)
        else:
            for listener in engine.listeners:
                listener(name)


def notify(engine: Engine, name: str) -> None:
    """Engine._notify's body (engine/core.py Rule 3), here so a write calls it natively."""
    held = engine.held
    if held is not None:
        held[name] = True
        return
    for listener in engine.listeners:
        listener(name)
    for listener in engine.topic_listeners:
        listener(name)
    rl = engine.router_listener
    if rl is not None and (engine.routers or engine.router_workers):  # as Routers.changed's own
        rl(name)  # first test: with no router and no worker it returns at once
