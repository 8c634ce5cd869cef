"""TOPIC.* extension commands (module-style names; API.md section 9).

  TOPIC.CREATE key [TYPE log|queue] [option value ...]   upsert; options are the HTTP config
                                                         fields upper-cased (CAP_RECORDS 1000)
  TOPIC.INFO key                                          the HTTP topic state
  TOPIC.DIFF key from_seq [LIMIT n] [NODE n ...]          one diff read (records as stream entries)
  TOPIC.DELETE key [BEFORE seq] [MATCH EQ|GLOB pattern]   permanent (silent) delete
(TOPIC.CLAIM/ACK/NACK/EXTEND, the lease queue commands, live in queues.py; TOPIC.ROUTER in
routers.py.)

Rule 1: replies are the HTTP JSON objects as RESP3 maps (flat arrays under RESP2); nested
objects nest the same way; JSON null -> null, booleans -> RESP3 booleans (`:1`/`:0` in RESP2).
Rule 2: option values arrive as strings and are converted to the JSON type the engine's
config parser expects (integers, booleans `true|false|yes|no|1|0`, `null`), so both fronts
share one validation and its error texts.
"""

from __future__ import annotations

from typing import Any

from topicsrv.engine.config import parse_config
from topicsrv.engine.core import DEFAULT_READ_LIMIT, MAX_READ_LIMIT
from topicsrv.engine.log import deletes
from topicsrv.engine.log.blobs import joined
from topicsrv.engine.log.reads import FMT_RESP
from topicsrv.resp import replysize
from topicsrv.resp.args import Args
from topicsrv.resp.commands.base import (
    SYNTAX,
    CommandContext,
    Err,
    Raw,
    command,
    committed,
    key_name,
    parse_int,
)

_INT_FIELDS = {"ttl_ms", "cap_records", "cap_bytes", "idempotency_window_ms", "lease_ms",
               "max_deliveries", "claim_jitter_ms", "seq_base", "priority"}
_BOOL_FIELDS = {"durable", "auto_priority", "auto_create", "dedupe_node", "leases_durable"}
_NULLABLE = {"priority", "durability", "dead_letter"}


def _cmd(name: str, arity: int, flags: list[str], summary: str, syntax: str,
         first: int = 1) -> Any:
    return command(name, arity, flags, first, first, 1 if first else 0, "topic", summary,
                   "topicsrv 0.1", syntax=syntax)


def _value(field: str, raw: bytes) -> Any:
    text = raw.decode("utf-8", "surrogateescape")
    if field in _NULLABLE and text.lower() in ("null", "none"):
        return None
    if field in _INT_FIELDS:
        return parse_int(raw, f"ERR value for {field.upper()} is not an integer or out of range")
    if field in _BOOL_FIELDS:
        low = text.lower()
        if low in ("true", "yes", "1"):
            return True
        if low in ("false", "no", "0"):
            return False
        raise Err(f"ERR value for {field.upper()} must be true or false")
    return text


def parse_options(args: list[bytes]) -> dict[str, Any]:
    if len(args) % 2:
        raise Err(SYNTAX)
    body: dict[str, Any] = {}
    a = Args(args)
    while a:
        field = a.next().decode("utf-8", "replace").lower()
        body[field] = _value(field, a.next())
    return body


@_cmd("topic.create", -2, ["write"], "Create a topic or update its config (upsert)",
      "key:key [TYPE:type:string] [(option:string value:string)...]")
def topic_create(ctx: CommandContext, args: list[bytes]) -> Any:
    body = parse_options(args[1:])
    parse_config(body)  # validate before touching anything
    name = key_name(args[0])
    if name not in ctx.engine.topics:  # creating adds data; updating (e.g. a smaller cap) may free it
        ctx.server.memory.check()
    topic, created, token = ctx.engine.put_topic(name, body)
    out = ctx.engine.describe(topic)
    out["created"] = created
    return committed(token, out)


@_cmd("topic.info", 2, ["readonly", "fast"], "Topic state: watermarks, counts, config", "key:key")
def topic_info(ctx: CommandContext, args: list[bytes]) -> Any:
    return ctx.engine.state(key_name(args[0]), touch=False)


def read_args(args: list[bytes], nodes: bool) -> tuple[int, int, list[str] | None]:
    """`key from_seq [LIMIT n]` (and with `nodes`, `[NODE n ...]`) of TOPIC.DIFF and
    TOPIC.ROWS: (from_seq, limit, the node names or None)."""
    from_seq = parse_int(args[1])
    if from_seq < 0:
        raise Err("ERR from_seq must be >= 0")
    limit = DEFAULT_READ_LIMIT
    names: list[str] | None = None
    a = Args(args, 2)
    while a:
        if a.option(b"limit"):
            limit = a.next_int()
            if not 1 <= limit <= MAX_READ_LIMIT:
                raise Err(f"ERR LIMIT must be between 1 and {MAX_READ_LIMIT}")
        elif nodes and a.option(b"node"):  # NODE n [n ...]: the names up to the next keyword
            names = names or []
            while a and a.peek().lower() not in (b"limit", b"node"):
                names.append(a.next_text())
        else:
            raise a.syntax_error()
    return from_seq, limit, names


@_cmd("topic.diff", -3, ["readonly"], "Read the records after from_seq (one diff request)",
      "key:key from_seq:integer [LIMIT:limit:integer] [NODE:node:string...]")
def topic_diff(ctx: CommandContext, args: list[bytes]) -> Any:
    name = key_name(args[0])
    from_seq, limit, nodes = read_args(args, nodes=True)
    result = ctx.engine.diff(name, from_seq, limit, nodes=nodes, fmt=FMT_RESP)
    result = replysize.capped(result, replysize.budget(ctx))  # at most the output limit
    tomb = result.tombstone
    return {
        "topic": name,
        "records": Raw(b"*%d\r\n%b" % (len(result.records), joined(result.records))),
        "seqs": result.seqs,
        "tombstone": None if tomb is None else tomb.to_json(),
        "tombstone_entry": None if tomb is None else Raw(tomb.resp_entry()),
        "next_from_seq": result.next_from_seq,
        "head_seq": result.head_seq,
        "earliest_seq": result.earliest_seq,
        "caught_up": result.caught_up,
        "lag": result.lag,
    }


@_cmd("topic.delete", -2, ["write"], "Permanently delete records (silent: no tombstone)",
      "key:key [BEFORE:seq:integer] [MATCH (EQ|GLOB) pattern:string]")
def topic_delete(ctx: CommandContext, args: list[bytes]) -> Any:
    before: int | None = None
    match: deletes.Match | None = None
    a = Args(args, 1)
    while a:
        if a.option(b"before"):
            before = a.next_int()
        elif a.option(b"match", nargs=2):
            kind, pattern = a.next().lower(), a.next_text()
            if kind == b"eq":
                match = deletes.parse_match(["tag", "Eq", pattern])
            elif kind == b"glob":
                match = deletes.parse_match(["tag", "Glob", pattern])
            else:
                raise Err("ERR MATCH takes EQ or GLOB")
        else:
            raise a.syntax_error()
    if before is None and match is None:
        raise Err("ERR TOPIC.DELETE needs BEFORE seq, MATCH EQ|GLOB pattern, or both")
    result, token = ctx.engine.delete_records(key_name(args[0]), before, match)
    return committed(token, result)
