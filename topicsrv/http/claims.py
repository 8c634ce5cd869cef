"""Queue routes (API.md section 7): claim, ack, nack and extend a queue's jobs.

Rule 1: a handler refuses unknown body fields and checks every field's type and range (400
`invalid_request` naming the field) before the engine runs; the engine then refuses a missing
topic (404) or a log topic (409 `not_a_queue`) before it changes anything. A refused request
changes nothing.
Rule 2: claims go through the Claims service (topicsrv/tasks/claims.py), never the engine
directly, so HTTP claimers, pushed workers (/v0/work) and RESP claimers share cohorts, long
polls and the dead-letter mover.
Rule 3: an answer waits for its commit token (leases log and, for an ack, the delete of the
job), like a write. A claim whose client leaves before its answer (a long poll cancelled, the
commit wait interrupted) gives its leases back at once, fenced by their lease ids: the client
never saw those jobs.
Rule 4: the jobs array is a join of `Job.to_json()` bytes (the stored record JSON plus the
lease fields); records are never decoded and re-encoded here. A claim answers at most
CLAIM_MAX_BYTES (16 MiB, as a diff) of records, always at least one job; the jobs past it
are not leased (engine/queues/queues.py Rule 4), so `max` is an upper bound, not a promise.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import orjson

from topicsrv.engine.config import CONFIG_INT_MAX
from topicsrv.engine.log.reads import FMT_JSON
from topicsrv.engine.queues import queues
from topicsrv.engine.queues.queues import Claimer, Job
from topicsrv.http import params as p
from topicsrv.http.handlers import Call, commit, json_response
from topicsrv.http.protocol import Response
from topicsrv.tasks.claims import MAX_WAIT_MS, release

if TYPE_CHECKING:
    pass

log = logging.getLogger("topicsrv.http")

CLAIM_FIELDS = frozenset({"node", "max", "lease_ms", "wait_ms"})
ACK_FIELDS = frozenset({"node", "seqs", "lease_ids"})
NACK_FIELDS = ACK_FIELDS | {"delay_ms"}
EXTEND_FIELDS = ACK_FIELDS | {"lease_ms"}


def _opt(obj: dict[str, Any], key: str, lo: int, hi: int = CONFIG_INT_MAX) -> int | None:
    """An optional integer field (absent or null = None), checked like the engine checks it."""
    value = obj.get(key)
    return None if value is None else queues.check_int(value, key, lo, hi)


def _lease_body(call: Call, allowed: frozenset[str]) -> dict[str, Any]:
    obj = p.json_object(call.req.body, allowed)
    queues.check_node(obj.get("node"))
    queues.check_seqs(obj.get("seqs"), obj.get("lease_ids"))
    return obj


async def claim(call: Call) -> Response:
    obj = p.json_object(call.req.body, CLAIM_FIELDS)
    node = queues.check_node(obj.get("node"))
    count = _opt(obj, "max", 1, queues.MAX_CLAIM)
    lease_ms = _opt(obj, "lease_ms", 1)
    wait_ms = _opt(obj, "wait_ms", 0, MAX_WAIT_MS) or 0
    name = call.topic
    engine = call.ctx.engine
    jobs: list[Job] = []
    try:
        jobs, token = await call.ctx.claims_service().claim(
            name, Claimer(node, 1 if count is None else count, lease_ms, FMT_JSON,
                          queues.CLAIM_MAX_BYTES), wait_ms)
        fsync_ms = await commit(call, token)
    except BaseException:
        if jobs:  # Rule 3: the client will not see them
            release(engine, name, node, jobs)
        raise
    perf = orjson.dumps({"server_total_ms": call.elapsed_ms(), "fsync_ms": fsync_ms})
    body = b"".join((b'{"topic":', orjson.dumps(name), b',"jobs":[',
                     b",".join(j.to_json() for j in jobs), b'],"performance":', perf, b"}"))
    return Response(200, body)


async def ack(call: Call) -> Response:
    obj = _lease_body(call, ACK_FIELDS)
    result, token = call.ctx.engine.ack(call.topic, obj["node"], obj["seqs"], obj.get("lease_ids"))
    fsync_ms = await commit(call, token)
    return json_response(call, result, fsync_ms=fsync_ms)


async def nack(call: Call) -> Response:
    obj = _lease_body(call, NACK_FIELDS)
    delay_ms = _opt(obj, "delay_ms", 0) or 0
    result, token = call.ctx.engine.nack(call.topic, obj["node"], obj["seqs"],
                                         obj.get("lease_ids"), delay_ms)
    fsync_ms = await commit(call, token)
    return json_response(call, result, fsync_ms=fsync_ms)


async def extend(call: Call) -> Response:
    obj = _lease_body(call, EXTEND_FIELDS)
    lease_ms = _opt(obj, "lease_ms", 1)
    result, token = call.ctx.engine.extend(call.topic, obj["node"], obj["seqs"],
                                           obj.get("lease_ids"), lease_ms)
    fsync_ms = await commit(call, token)
    return json_response(call, result, fsync_ms=fsync_ms)
