"""Handlers for topics, writes, diffs and deletes (API.md sections 1-4).

Rule 1: a handler parses its whole request (400s) before it calls the engine, and the engine
validates before it mutates, so a refused request changes nothing.
Rule 2: a write, delete or topic change is acknowledged only after its commit token resolved.
Rule 3: diff bodies are a join of the engine's pre-encoded record bytes; records are never
decoded and re-encoded here. A diff delivers at most `max_bytes` of records (default and
ceiling DIFF_MAX_BYTES, 16 MiB; always at least one record), and a body over PIECE_BYTES is a
`Joined` that goes out in pieces, never copied whole.
Rule 4: a long-poll takes the topic's notifier event BEFORE the engine read and waits on it
only if that read delivered nothing and was caught up, bounded by `wait_ms` (<= 60 s).
Rule 5: a large write yields to other tasks while its records are validated and encoded
(every YIELD_BYTES of input), so one big body cannot hold the event loop for its whole
duration; nothing touches the engine before the whole body was validated (Rule 1).
Rule 6 (keyspace notifications, topicsrv/bus/keyspace.py): a write fires what its XADDs
would (`new` when it created the topic, `xadd` per record; an idempotent replay nothing), a
topic DELETE fires `del`, as DEL; free when notifications are off.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson
import trio

from topicsrv.bus.keyspace import GENERIC, NEW, STREAM, key_bytes
from topicsrv.engine.core import DEFAULT_READ_LIMIT, MAX_READ_LIMIT
from topicsrv.engine.journal import CommitToken
from topicsrv.engine.log import deletes
from topicsrv.engine.log.blobs import pieces
from topicsrv.engine.log.reads import ReadResult
from topicsrv.engine.log.records import PreparedRecord, prepare_json
from topicsrv.errors import TopicsError, invalid
from topicsrv.http import params as p
from topicsrv.http.jsonsplit import loads_write_body
from topicsrv.http.metrics import observe_fsync
from topicsrv.http.protocol import PIECE_BYTES, Joined, Request, Response

if TYPE_CHECKING:
    from topicsrv.context import ServerContext

MAX_WAIT_MS = 60_000
LIST_LIMIT_MAX = 10_000
WRITE_FIELDS = frozenset({"records", "create", "config", "idempotency_key"})
DIFF_FIELDS = frozenset({"from_seq", "limit", "max_bytes", "node", "wait_ms", "epoch"})
DELETE_FIELDS = frozenset({"before_seq", "match"})
DIFF_MAX_BYTES = 16 << 20
YIELD_BYTES = 1 << 20


@dataclass(slots=True)
class Call:
    """One request being served: the server context, the request, path params, start time."""

    ctx: ServerContext
    req: Request
    params: dict[str, str]
    t0: float

    @property
    def topic(self) -> str:
        return self.params["topic"]

    def elapsed_ms(self) -> float:
        return round((time.perf_counter() - self.t0) * 1000.0, 3)


def json_response(call: Call, obj: dict[str, Any], status: int = 200, **perf: Any) -> Response:
    obj["performance"] = {"server_total_ms": call.elapsed_ms(), **perf}
    return Response(status, orjson.dumps(obj))


async def commit(call: Call, token: CommitToken | None) -> float:
    """Wait for durability of a mutation; the fsync time in ms (0 when nothing to wait for).
    Each wait is observed in the fsync histogram of /metrics."""
    if token is None:
        return 0.0
    fsync_ms = float(await token.wait())
    observe_fsync(call.ctx, fsync_ms)
    return round(fsync_ms, 3)


# ---- topics ----------------------------------------------------------------------------


async def get_topic(call: Call) -> Response:
    touch = p.query_bool(call.req.query, "touch", True)
    return json_response(call, call.ctx.engine.state(call.topic, touch=touch))


async def put_topic(call: Call) -> Response:
    body = p.json_object(call.req.body)
    engine = call.ctx.engine
    topic, created, token = engine.put_topic(call.topic, body)
    state = engine.describe(topic)
    await commit(call, token)
    return json_response(call, state, 201 if created else 200)


async def delete_topic(call: Call) -> Response:
    topic, token = call.ctx.engine.delete_topic(call.topic)
    call.ctx.bus.keyspace.notify(GENERIC, b"del", key_bytes(call.topic))  # as DEL (Rule 6)
    await commit(call, token)
    return json_response(call, {"topic": topic.name, "deleted": True, "epoch": topic.epoch})


async def list_topics(call: Call) -> Response:
    q = call.req.query
    prefix = q.get("prefix", "")
    limit = p.query_int(q, "limit", 1, LIST_LIMIT_MAX) or 1000
    after = q.get("after") or None
    items, next_after = call.ctx.engine.list_topics(prefix, limit, after)
    return json_response(call, {"topics": items, "next_after": next_after})


# ---- writes ----------------------------------------------------------------------------


async def write(call: Call) -> Response:
    body = p.object_fields(await loads_write_body(call.req.body), WRITE_FIELDS)
    raw = body.get("records")
    if not isinstance(raw, list) or not raw:
        raise invalid("'records' must be a non-empty array of record objects", field="records")
    create = p.opt_bool(body, "create")
    config = body.get("config")
    if config is not None and not isinstance(config, dict):
        raise invalid("'config' must be an object", field="config")
    header_key = _header_key(call.req)  # checked even when the body has a key: never ignored
    key = p.opt_str(body, "idempotency_key") or header_key
    prepared = await prepare_records(raw)
    del body, raw  # free the parsed body (can be large) before the engine's work
    await trio.lowlevel.checkpoint()
    result, token = call.ctx.engine.write(call.topic, prepared, create=create, config=config,
                                          idempotency_key=key)
    if call.ctx.bus.keyspace.flags and not result.get("duplicate"):
        _notify_write(call, result)
    fsync_ms = await commit(call, token)
    return json_response(call, dict(result), fsync_ms=fsync_ms)


def _notify_write(call: Call, result: Any) -> None:
    """Keyspace events of a write (Rule 6): `new` when it created the topic, then one `xadd`
    per record, as the XADDs it stands for."""
    ks, name = call.ctx.bus.keyspace, key_bytes(call.topic)
    if result.get("created"):
        ks.notify(NEW, b"new", name)
    for _ in range(len(result["seqs"])):
        ks.notify(STREAM, b"xadd", name)


async def prepare_records(raw: list[Any]) -> list[PreparedRecord]:
    """Validate and encode each record, yielding every YIELD_BYTES (Rule 5)."""
    out: list[PreparedRecord] = []
    since_yield = 0
    for i, rec in enumerate(raw):
        try:
            prepared = prepare_json(rec, i)
        except TypeError as exc:  # orjson cannot encode it: nested deeper than 254 levels
            if "Recursion" not in str(exc):
                raise
            raise TopicsError(
                "invalid_json", f"records[{i}] is nested too deeply to store ({exc}); "
                "data may nest at most 254 levels", {"field": f"records[{i}].data"}) from None
        out.append(prepared)
        since_yield += prepared.size + 64
        if since_yield >= YIELD_BYTES:
            since_yield = 0
            await trio.lowlevel.checkpoint()
    return out


def _header_key(req: Request) -> str | None:
    value = req.headers.get("idempotency-key")
    if value is None:
        return None
    if not 0 < len(value) <= 1024:
        raise invalid("Idempotency-Key must be 1-1024 characters", field="Idempotency-Key")
    return value


# ---- diff ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DiffArgs:
    from_seq: int
    limit: int
    max_bytes: int
    nodes: list[str] | None
    wait_ms: int
    epoch: int | None


def parse_diff(body: bytes) -> DiffArgs:
    obj = p.json_object(body, DIFF_FIELDS)
    wait_ms = p.opt_int(obj, "wait_ms", 0, 1 << 53) or 0
    return DiffArgs(
        from_seq=p.opt_int(obj, "from_seq") or 0,
        limit=p.opt_int(obj, "limit", 1, MAX_READ_LIMIT) or DEFAULT_READ_LIMIT,
        max_bytes=min(p.opt_int(obj, "max_bytes", 0, 1 << 53) or DIFF_MAX_BYTES, DIFF_MAX_BYTES),
        nodes=p.nodes(obj.get("node")),
        wait_ms=min(wait_ms, MAX_WAIT_MS),
        epoch=p.opt_int(obj, "epoch"),
    )


def diff_body(topic: str, res: ReadResult, elapsed_ms: float) -> bytes | Joined:
    """The diff response (seeds ordering-and-cursors), records joined as stored; a large one
    as a `Joined`, so it is sent in pieces instead of being copied (Rule 3)."""
    prefix = b'{"topic":' + orjson.dumps(topic) + b',"records":['
    suffix = b"".join((
        b'],"tombstone":',
        b"null" if res.tombstone is None else orjson.dumps(res.tombstone.to_json()),
        b',"next_from_seq":%d,"head_seq":%d,"earliest_seq":%d,"caught_up":%s,"lag":%d'
        % (res.next_from_seq, res.head_seq, res.earliest_seq,
           b"true" if res.caught_up else b"false", res.lag),
        b',"performance":',
        orjson.dumps({"server_total_ms": elapsed_ms, "records_scanned": res.scanned}),
        b"}",
    ))
    body = Joined(prefix, pieces(res.records, b","), b",", suffix)  # a packed run as stored
    return body if len(body) > PIECE_BYTES else body.to_bytes()


async def diff(call: Call) -> Response:
    args = parse_diff(call.req.body)
    ctx = call.ctx
    deadline = trio.current_time() + args.wait_ms / 1000.0
    with ctx.notifier.waiter((call.topic,)) as waiter:
        while True:
            waiter.arm()  # before the read: no append can slip between
            res = ctx.engine.diff(call.topic, args.from_seq, args.limit, max_bytes=args.max_bytes,
                                  nodes=args.nodes, epoch=args.epoch)
            remaining = deadline - trio.current_time()
            if res.records or res.tombstone is not None or not res.caught_up or remaining <= 0:
                break
            await waiter.wait(remaining)
            # A node-filtered append wakes us too; the cursor it advanced is kept for the retry.
            args = _advance(args, res)
    return Response(200, diff_body(call.topic, res, call.elapsed_ms()))


def _advance(args: DiffArgs, res: ReadResult) -> DiffArgs:
    return DiffArgs(res.next_from_seq, args.limit, args.max_bytes, args.nodes, args.wait_ms,
                    args.epoch)


# ---- deletes ---------------------------------------------------------------------------


async def delete_records(call: Call) -> Response:
    body = p.json_object(call.req.body, DELETE_FIELDS)
    before_seq = p.opt_int(body, "before_seq")
    match = deletes.parse_match(body["match"]) if body.get("match") is not None else None
    result, token = call.ctx.engine.delete_records(call.topic, before_seq, match)
    await commit(call, token)
    return json_response(call, dict(result))
