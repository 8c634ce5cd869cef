"""The JSON Schemas of the OpenAPI document (`components.schemas`), as data.

Rule 1: limits and enumerations come from the code that enforces them (the engine's constants,
`STATUS_BY_CODE`, the tombstone reasons), never retyped, so the document follows the server.
Rule 2: request schemas say what the server accepts, no more and no less: unknown fields are
refused (`additionalProperties: false`), and a field the server treats as absent when it is
`null` is nullable. String limits the server counts in UTF-8 bytes are given as `maxLength`
(characters) with the byte limit stated in the description.
Rule 3: response schemas list every field a response has, as required, and no other
(`additionalProperties: false`), except `data` and `detail`, which are free JSON.
Pure data; no I/O.
"""

from __future__ import annotations

from typing import Any

from topicsrv.engine.config import (
    CLAIM_JITTER_MAX_MS,
    CONFIG_INT_MAX,
    DURABILITY_CLASSES,
    SEQ_MAX,
    TOPIC_NAME_RE,
    U64_MAX,
)
from topicsrv.engine.core import DEFAULT_READ_LIMIT, MAX_READ_LIMIT
from topicsrv.engine.log.records import (
    MAX_META_KEYS,
    MAX_NODE_BYTES,
    MAX_RECORDS_PER_WRITE,
    MAX_TAG_BYTES,
)
from topicsrv.engine.log.tombstone import FROM_SEQ_TOO_OLD, REASONS
from topicsrv.engine.queues.queues import MAX_CLAIM, MAX_SEQS
from topicsrv.engine.routing.routers import GUARANTEES, MAX_HOPS
from topicsrv.errors import STATUS_BY_CODE
from topicsrv.tasks.claims import MAX_WAIT_MS as CLAIM_MAX_WAIT_MS

Schema = dict[str, Any]

NAME_PATTERN = f"^{TOPIC_NAME_RE.pattern}$"


def ref(name: str) -> Schema:
    return {"$ref": f"#/components/schemas/{name}"}


def nullable(schema: Schema) -> Schema:
    return {"anyOf": [schema, {"type": "null"}]}


def obj(props: dict[str, Schema], required: tuple[str, ...] | None = None, **extra: Any) -> Schema:
    """A closed object; every property is required unless `required` says otherwise."""
    return {"type": "object", "properties": props,
            "required": list(props if required is None else required),
            "additionalProperties": False, **extra}


def integer(lo: int = 0, hi: int = U64_MAX, description: str | None = None) -> Schema:
    out: Schema = {"type": "integer", "minimum": lo, "maximum": hi}
    if description:
        out["description"] = description
    return out


def string(lo: int = 0, hi: int | None = None, description: str | None = None) -> Schema:
    out: Schema = {"type": "string", "minLength": lo}
    if hi is not None:
        out["maxLength"] = hi
    if description:
        out["description"] = description
    return out


SEQ = integer(description="a record's position in its topic (u64)")
TS = integer(description="milliseconds since the epoch")
MS = integer(0, CONFIG_INT_MAX)
BOOL: Schema = {"type": "boolean"}
NUMBER: Schema = {"type": "number"}
ANY: Schema = {"description": "any JSON value"}
NODE = string(1, MAX_NODE_BYTES, f"a worker's node id, at most {MAX_NODE_BYTES} UTF-8 bytes")
RECORD_NODE = string(0, MAX_NODE_BYTES, f"the writer's node id, at most {MAX_NODE_BYTES} UTF-8 bytes")
TAG = string(0, MAX_TAG_BYTES, f"a tag, at most {MAX_TAG_BYTES} UTF-8 bytes")
META: Schema = {"type": "object", "additionalProperties": {"type": "string"},
                "maxProperties": MAX_META_KEYS,
                "description": "string values; at most 16 KiB encoded"}
SEQ_LIST: Schema = {"type": "array", "items": SEQ}


def _error(codes: list[str] | None = None) -> Schema:
    code: Schema = {"type": "string", "enum": sorted(codes or STATUS_BY_CODE)}
    return obj({"error": obj({"code": code, "message": {"type": "string"},
                              "detail": {"type": "object"}}, ("code", "message"))})


def error_codes(status: int) -> list[str]:
    return sorted(code for code, s in STATUS_BY_CODE.items() if s == status)


MATCH: Schema = {
    "description": 'a tag predicate: "X" (equal), "X*" (prefix), ["tag", "Eq", "X"] or '
                   '["tag", "Glob", "X*"] (the pattern must end with "*")',
    "anyOf": [
        {"type": "string"},
        {"type": "array", "prefixItems": [{"const": "tag"}, {"const": "Eq"}, {"type": "string"}],
         "minItems": 3, "maxItems": 3},
        {"type": "array", "prefixItems": [{"const": "tag"}, {"const": "Glob"},
                                          {"type": "string", "pattern": r"\*$"}],
         "minItems": 3, "maxItems": 3},
    ],
}

_CONFIG_INTS = ("ttl_ms", "cap_records", "cap_bytes", "idempotency_window_ms")
JITTER = integer(0, CLAIM_JITTER_MAX_MS, "a claim's coalescing window")
_CONFIG_BOOLS = ("durable", "auto_priority", "auto_create", "dedupe_node")
PRIORITY = integer(-1000, 1000)


def _config_in() -> Schema:
    props: dict[str, Schema] = {k: MS for k in _CONFIG_INTS}
    props.update({k: BOOL for k in _CONFIG_BOOLS})
    props.update(
        discard={"enum": ["old", "reject"]},
        durability=nullable({"enum": list(DURABILITY_CLASSES)}),
        priority=nullable(PRIORITY),
        type={"enum": ["log", "queue"], "description": "fixed at create"},
        seq_base=integer(1, SEQ_MAX, "the first seq (create only)"),
        lease_ms=integer(1, CONFIG_INT_MAX),
        dead_letter=nullable(ref("TopicName")),
        leases_durable=BOOL,
    )
    props.update(max_deliveries=MS, claim_jitter_ms=JITTER)
    return obj(props, (), description="topic config fields; the queue fields need type 'queue'")


def _config_out() -> Schema:
    props: dict[str, Schema] = {k: MS for k in _CONFIG_INTS}
    props.update({k: BOOL for k in _CONFIG_BOOLS})
    props.update(discard={"enum": ["old", "reject"]}, durability={"enum": list(DURABILITY_CLASSES)},
                 priority=nullable(PRIORITY))
    queue = {"lease_ms": integer(1, CONFIG_INT_MAX), "max_deliveries": MS, "dead_letter":
             nullable(ref("TopicName")), "claim_jitter_ms": MS, "leases_durable": BOOL}
    return obj({**props, **queue}, tuple(props), description="the queue fields on queues only")


def _topic_state() -> Schema:
    queue = obj({"ready": MS, "in_flight": MS, "delayed": MS, "dead_lettered": MS,
                 "oldest_ready_age_ms": MS})
    props: dict[str, Schema] = {
        "topic": ref("TopicName"), "type": {"enum": ["log", "queue"]}, "epoch": integer(),
        "head_seq": SEQ, "earliest_seq": SEQ, "evict_floor": SEQ, "next_seq": SEQ,
        "count": integer(), "bytes": integer(), "config": ref("TopicConfigState"),
        "durability": {"enum": list(DURABILITY_CLASSES)}, "effective_priority": {"type": "integer"},
        "priority_components": obj({k: {"type": "integer"} for k in ("manual", "auto", "age")}),
        "last_write_ts": nullable(TS), "last_read_ts": nullable(TS),
        "queue": queue, "performance": ref("Performance"),
    }
    return obj(props, tuple(k for k in props if k != "queue"))


def _record(extra: dict[str, Schema] | None = None) -> Schema:
    props: dict[str, Schema] = {"$seq": SEQ, "$ts": TS, "$node": {"type": "string"},
                                "$tag": {"type": "string"}, "meta": META, "data": ANY}
    return obj({**props, **(extra or {})},
               ("$seq", "$ts", "data", *(extra or {})))


def _skipped() -> Schema:
    return {"type": "array", "items": obj({"seq": SEQ, "reason": {
        "enum": ["not_held", "not_holder", "stale_lease"]}})}


def _lease_request(extra: dict[str, Schema]) -> Schema:
    props: dict[str, Schema] = {
        "node": NODE, "seqs": {"type": "array", "items": SEQ, "minItems": 1, "maxItems": MAX_SEQS},
        "lease_ids": nullable({"type": "array", "items": {"type": "string"},
                               "description": "one per seq, in the order of seqs"}),
        **extra}
    return obj(props, ("node", "seqs"))


def _router_state() -> Schema:
    props: dict[str, Schema] = {
        "name": ref("TopicName"), "source": ref("TopicName"), "dest": ref("TopicName"),
        "preserve_node": BOOL, "preserve_tag": BOOL,
        "filter": nullable({"type": "array", "minItems": 3, "maxItems": 3,
                            "items": {"type": "string"}}),
        "allow_cycle": BOOL, "max_hops": nullable(integer(1, MAX_HOPS)),
        "hop_cap": nullable(integer()), "guarantee": {"enum": list(GUARANTEES)},
        "create_dest": BOOL, "created_ts": TS, "cursor": SEQ, "source_epoch": integer(),
        "lag": integer(), "forwarded": integer(), "skipped": integer(),
        "source_trimmed": integer(), "retries": integer(),
        "status": {"enum": ["caught_up", "forwarding", "blocked"]},
        "last_error": nullable(obj({"code": {"type": "string"}, "message": {"type": "string"},
                                    "since_ts": TS})),
        "performance": ref("Performance"),
    }
    return obj(props, tuple(k for k in props if k != "performance"))


def schemas() -> dict[str, Schema]:
    """`components.schemas` of the document."""
    perf = obj({"server_total_ms": NUMBER, "fsync_ms": NUMBER, "records_scanned": integer()},
               ("server_total_ms",))
    tombstone = obj({"gap_from": SEQ, "gap_to": SEQ,
                     "reason": {"enum": sorted(REASONS)},
                     "missed_estimate": integer(), "earliest_seq": SEQ, "head_seq": SEQ,
                     "variant": {"const": FROM_SEQ_TOO_OLD}},  # SSE at connect only
                    ("gap_from", "gap_to", "reason", "missed_estimate", "earliest_seq",
                     "head_seq"))
    job_fields: dict[str, Schema] = {"lease_id": {"type": "string"}, "deadline": TS,
                                     "delivery": integer(1)}
    return {
        "Error": _error(),
        "TopicName": {"type": "string", "pattern": NAME_PATTERN},
        "Performance": perf,
        "Health": obj({"status": {"const": "ok"}, "version": {"type": "string"},
                       "uptime_s": NUMBER, "performance": ref("Performance")}),
        "Ready": obj({"ready": {"const": True},
                      "build": {"type": "string", "description": "whether the hot path runs "
                                "compiled or as pure Python (docs/performance.md)"},
                      "keyspace_durability": {"enum": ["fsync", "disk", "memory", "none"],
                                              "description": "the class of every string key "
                                              "and key TTL (serve --keyspace-durability; none: "
                                              "no storage)"},
                      "damaged": {"type": "array", "description": "files of the data dir found "
                                  "damaged at startup that the server runs without (functions.json), "
                                  "until `repair` replaced them; empty when none",
                                  "items": obj({"file": {"type": "string"},
                                                "problem": {"type": "string"},
                                                "repair": {"type": "string"}})},
                      "role": {"enum": ["master", "replica"],
                               "description": "replication role (docs/replication.md)"},
                      "primary": {"type": "string", "description": "a replica's primary, its "
                                  "RESP host:port"},
                      "master_link_status": {"enum": ["up", "down"],
                                             "description": "a replica's link to its primary"},
                      "repl_offset": {"type": "integer", "description": "the replication "
                                      "offset a replica applied"},
                      "performance": ref("Performance")},
                     ("ready", "build", "keyspace_durability", "damaged", "role", "performance")),
        # the status page's data (http/status.py): its inner shape is documented in
        # http-api.md and may grow, so only the top-level parts are fixed here
        "StatusSnapshot": {"type": "object",
                           "required": ["version", "generated_ms", "server", "storage", "topics",
                                        "others", "routers", "routers_total"],
                           "properties": {
                               "version": {"type": "string"}, "generated_ms": TS,
                               "server": {"type": "object"},
                               "storage": {"type": ["object", "null"]},
                               "topics": {"type": "array", "items": {"type": "object"}},
                               "others": {"type": "object"},
                               "routers": {"type": "array", "items": {"type": "object"}},
                               "routers_total": integer()}},
        "TopicConfig": _config_in(),
        "TopicConfigState": _config_out(),
        "TopicState": _topic_state(),
        "TopicList": obj({
            "topics": {"type": "array", "items": obj({
                "topic": ref("TopicName"), "type": {"enum": ["log", "queue"]},
                "head_seq": SEQ, "earliest_seq": SEQ, "count": integer()})},
            "next_after": nullable(ref("TopicName")), "performance": ref("Performance")}),
        "TopicDeleted": obj({"topic": ref("TopicName"), "deleted": {"const": True},
                             "epoch": integer(), "performance": ref("Performance")}),
        "RecordIn": obj({"data": ANY, "tag": nullable(TAG), "node": nullable(RECORD_NODE),
                         "meta": nullable(META)}, ("data",)),
        "WriteRequest": obj({
            "records": {"type": "array", "items": ref("RecordIn"), "minItems": 1,
                        "maxItems": MAX_RECORDS_PER_WRITE},
            "create": nullable(BOOL), "config": nullable(ref("TopicConfig")),
            "idempotency_key": nullable(string(1, 1024))}, ("records",)),
        "WriteResult": obj({
            "topic": ref("TopicName"), "seqs": SEQ_LIST, "first_seq": SEQ, "last_seq": SEQ,
            "ts": TS, "head_seq": SEQ, "earliest_seq": SEQ,
            "durability": {"enum": list(DURABILITY_CLASSES)}, "created": BOOL,
            "duplicate": BOOL, "performance": ref("Performance")}),
        "DiffRequest": obj({
            "from_seq": nullable(SEQ),
            "limit": nullable(integer(1, MAX_READ_LIMIT, f"default {DEFAULT_READ_LIMIT}")),
            "max_bytes": nullable(integer(0, 1 << 53, "0 or absent: 16 MiB (the ceiling)")),
            "node": nullable({"anyOf": [{"type": "string", "maxLength": MAX_NODE_BYTES},
                                        {"type": "array", "items": {
                                            "type": "string", "maxLength": MAX_NODE_BYTES}}]}),
            "wait_ms": nullable(integer(0, 1 << 53, "long poll; capped at 60000")),
            "epoch": nullable(integer())}, ()),
        "Record": _record(),
        "Tombstone": tombstone,
        "WatchRecord": _record({"topic": ref("TopicName")}),
        "WatchTombstone": {**tombstone, "properties": {**tombstone["properties"],
                                                       "topic": ref("TopicName")},
                           "required": [*tombstone["required"], "topic"]},
        "DiffResult": obj({
            "topic": ref("TopicName"), "records": {"type": "array", "items": ref("Record")},
            "tombstone": nullable(ref("Tombstone")), "next_from_seq": SEQ, "head_seq": SEQ,
            "earliest_seq": SEQ, "caught_up": BOOL, "lag": integer(),
            "performance": ref("Performance")}),
        "Match": MATCH,
        "DeleteRequest": {**obj({"before_seq": nullable(SEQ), "match": nullable(ref("Match"))},
                                ()),
                          "anyOf": [{"required": ["before_seq"],
                                     "properties": {"before_seq": {"type": "integer"}}},
                                    {"required": ["match"],
                                     "properties": {"match": {"not": {"type": "null"}}}}]},
        "DeleteResult": obj({"topic": ref("TopicName"), "deleted": integer(),
                             "earliest_seq": SEQ, "head_seq": SEQ, "count": integer(),
                             "bytes": integer(), "performance": ref("Performance")}),
        "ClaimRequest": obj({"node": NODE, "max": nullable(integer(1, MAX_CLAIM)),
                             "lease_ms": nullable(integer(1, CONFIG_INT_MAX)),
                             "wait_ms": nullable(integer(0, CLAIM_MAX_WAIT_MS))}, ("node",)),
        "Job": _record(job_fields),
        "PushedJob": _record({**job_fields, "topic": ref("TopicName")}),
        "ClaimResult": obj({"topic": ref("TopicName"),
                            "jobs": {"type": "array", "items": ref("Job")},
                            "performance": ref("Performance")}),
        "AckRequest": _lease_request({}),
        "AckResult": obj({"topic": ref("TopicName"), "acked": SEQ_LIST, "skipped": _skipped(),
                          "performance": ref("Performance")}),
        "NackRequest": _lease_request({"delay_ms": nullable(MS)}),
        "NackResult": obj({"topic": ref("TopicName"), "released": SEQ_LIST,
                           "skipped": _skipped(), "ready_at": TS,
                           "performance": ref("Performance")}),
        "ExtendRequest": _lease_request({"lease_ms": nullable(integer(1, CONFIG_INT_MAX))}),
        "ExtendResult": obj({"topic": ref("TopicName"), "extended": SEQ_LIST,
                             "deadlines": {"type": "array", "items": TS},
                             "skipped": _skipped(), "performance": ref("Performance")}),
        "RouterSpec": obj({
            "source": ref("TopicName"), "dest": ref("TopicName"), "preserve_node": BOOL,
            "preserve_tag": BOOL, "filter": nullable(ref("Match")), "allow_cycle": BOOL,
            "max_hops": nullable(integer(1, MAX_HOPS)), "guarantee": {"enum": list(GUARANTEES)},
            "create_dest": BOOL}, ("source", "dest")),
        "RouterState": _router_state(),
        "RouterList": obj({"routers": {"type": "array", "items": ref("RouterState")},
                           "performance": ref("Performance")}),
        "RouterDeleted": obj({"router": ref("TopicName"), "deleted": {"const": True},
                              "performance": ref("Performance")}),
        "PublishResult": obj({"receivers": integer(), "performance": ref("Performance")}),
        "ChannelMessage": obj({"channel": {"type": "string"},
                               "pattern": {"type": ["string", "null"]}, "message": ANY}),
    }


def error_schema(status: int) -> Schema:
    """The error envelope restricted to the codes of one status."""
    return _error(error_codes(status))
