"""Topic configuration: the field table of API.md section 1 and its upsert rules.

Rule 1: validation is total and happens before anything changes; an unknown field, a wrong type
or an out-of-range value is a 400 that names the field.
Rule 2: `type` (and `seq_base`) are fixed at create; changing them is 409
topic_exists_incompatible with `detail.reason`.
Rule 3: the durability class is derived, never stored twice: an explicit `durability` wins,
otherwise `durable` picks fsync/disk (seeds section 2.2).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any

from topicsrv.errors import TopicsError, invalid

TOPIC_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,254}")
DURABILITY_CLASSES = ("ephemeral", "memory", "disk", "fsync")
U64_MAX = (1 << 64) - 1
I64_MAX = (1 << 63) - 1
# The highest seq a record can get: `next_seq` (one above the head) must still fit in a signed
# 64-bit integer, the widest a RESP integer reply may be (redis-cli, redis-py and hiredis refuse
# more), so every seq and watermark a client sees is a plain integer (issue 23).
SEQ_MAX = I64_MAX - 1
# Larger than any sane config number, small enough that arithmetic on it stays exact.
CONFIG_INT_MAX = (1 << 53) - 1
# Every claim on a queue waits its claim_jitter_ms (a coalescing window): bounded like a long
# poll, so a typo cannot hang every claim and job stream of the queue for ages.
CLAIM_JITTER_MAX_MS = 60_000


def check_topic_name(name: str) -> str:
    if not isinstance(name, str) or not TOPIC_NAME_RE.fullmatch(name):
        raise TopicsError(
            "invalid_topic_name",
            f"invalid topic name {name!r}: 1-255 characters of [A-Za-z0-9._:-], "
            "starting with a letter or digit",
            {"topic": name if isinstance(name, str) else repr(name)},
        )
    return name


def _int(body: dict[str, Any], key: str, lo: int, hi: int = CONFIG_INT_MAX) -> int:
    v = body[key]
    if not isinstance(v, int) or isinstance(v, bool):
        raise invalid(f"'{key}' must be an integer", field=key)
    if not lo <= v <= hi:
        raise invalid(f"'{key}' must be between {lo} and {hi}", field=key)
    return v


def _bool(body: dict[str, Any], key: str) -> bool:
    v = body[key]
    if not isinstance(v, bool):
        raise invalid(f"'{key}' must be true or false", field=key)
    return v


def _choice(body: dict[str, Any], key: str, choices: tuple[str, ...]) -> str:
    v = body[key]
    if v not in choices:
        raise invalid(f"'{key}' must be one of {', '.join(choices)}", field=key)
    return str(v)


@dataclass(frozen=True, slots=True)
class TopicConfig:
    ttl_ms: int = 0
    cap_records: int = 0
    cap_bytes: int = 0
    discard: str = "old"
    durable: bool = False
    durability_explicit: str | None = None
    priority: int | None = None
    auto_priority: bool = True
    auto_create: bool = True
    idempotency_window_ms: int = 0
    dedupe_node: bool = True
    # queue-only (type "queue"); carried so the queue layer can build on them
    lease_ms: int = 30_000
    max_deliveries: int = 0
    dead_letter: str | None = None
    claim_jitter_ms: int = 0
    leases_durable: bool = False

    # the resolved class (Rule 3), set once by __post_init__: every write reads it, and as a
    # property it was an interpreted call each time (not an __init__ argument, not compared,
    # not persisted: engine/restore.py keeps only the init fields)
    durability: str = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        explicit = self.durability_explicit
        cls = explicit if explicit is not None else "fsync" if self.durable else "disk"
        object.__setattr__(self, "durability", cls)

    def to_json(self, topic_type: str) -> dict[str, Any]:
        out: dict[str, Any] = {
            "ttl_ms": self.ttl_ms,
            "cap_records": self.cap_records,
            "cap_bytes": self.cap_bytes,
            "discard": self.discard,
            "durable": self.durability == "fsync",
            "durability": self.durability,
            "priority": self.priority,
            "auto_priority": self.auto_priority,
            "auto_create": self.auto_create,
            "idempotency_window_ms": self.idempotency_window_ms,
            "dedupe_node": self.dedupe_node,
        }
        if topic_type == "queue":
            out.update(
                lease_ms=self.lease_ms,
                max_deliveries=self.max_deliveries,
                dead_letter=self.dead_letter,
                claim_jitter_ms=self.claim_jitter_ms,
                leases_durable=self.leases_durable,
            )
        return out


LOG_FIELDS = frozenset(
    {
        "ttl_ms", "cap_records", "cap_bytes", "discard", "durable", "durability", "priority",
        "auto_priority", "auto_create", "idempotency_window_ms", "dedupe_node",
    }
)
QUEUE_FIELDS = frozenset({"lease_ms", "max_deliveries", "dead_letter", "claim_jitter_ms", "leases_durable"})
CREATE_FIELDS = frozenset({"type", "seq_base"})


@dataclass(frozen=True, slots=True)
class ConfigRequest:
    """A validated PUT body (or inline write config): only the fields the client sent."""

    changes: dict[str, Any]
    topic_type: str | None
    seq_base: int | None


def parse_config(body: Any, where: str = "body") -> ConfigRequest:
    if body is None:
        body = {}
    if not isinstance(body, dict):
        raise invalid(f"{where} must be a JSON object of config fields")
    unknown = body.keys() - LOG_FIELDS - QUEUE_FIELDS - CREATE_FIELDS
    if unknown:
        bad = sorted(unknown)[0]
        raise invalid(f"unknown config field '{bad}'", field=bad)
    topic_type = None
    if "type" in body:
        topic_type = _choice(body, "type", ("log", "queue"))
    queue_given = body.keys() & QUEUE_FIELDS
    if queue_given and topic_type == "log":
        bad = sorted(queue_given)[0]
        raise invalid(f"'{bad}' applies only to topics of type 'queue'", field=bad)
    seq_base = _int(body, "seq_base", 1, SEQ_MAX) if "seq_base" in body else None
    ch: dict[str, Any] = {}
    for key in ("ttl_ms", "cap_records", "cap_bytes", "idempotency_window_ms", "lease_ms",
                "max_deliveries", "claim_jitter_ms"):
        if key in body:
            ch[key] = _int(body, key, 1 if key == "lease_ms" else 0,
                           CLAIM_JITTER_MAX_MS if key == "claim_jitter_ms" else CONFIG_INT_MAX)
    for key in ("durable", "auto_priority", "auto_create", "dedupe_node", "leases_durable"):
        if key in body:
            ch[key] = _bool(body, key)
    if "discard" in body:
        ch["discard"] = _choice(body, "discard", ("old", "reject"))
    if "durability" in body:
        ch["durability_explicit"] = (
            None if body["durability"] is None else _choice(body, "durability", DURABILITY_CLASSES)
        )
    elif "durable" in body:
        ch["durability_explicit"] = None  # a bare `durable` re-derives the class
    if "priority" in body:
        p = body["priority"]
        if p is not None and (not isinstance(p, int) or isinstance(p, bool)):
            raise invalid("'priority' must be an integer or null", field="priority")
        if p is not None and not -1000 <= p <= 1000:
            raise invalid("'priority' must be between -1000 and 1000", field="priority")
        ch["priority"] = p
    if "dead_letter" in body:
        dl = body["dead_letter"]
        ch["dead_letter"] = None if dl is None else check_topic_name(dl)
    return ConfigRequest(ch, topic_type, seq_base)


def apply(config: TopicConfig, req: ConfigRequest) -> TopicConfig:
    return replace(config, **req.changes) if req.changes else config


def check_queue_fields(req: ConfigRequest, topic_type: str) -> None:
    if topic_type != "queue":
        bad = sorted(req.changes.keys() & QUEUE_FIELDS)
        if bad:
            raise invalid(f"'{bad[0]}' applies only to topics of type 'queue'", field=bad[0])
