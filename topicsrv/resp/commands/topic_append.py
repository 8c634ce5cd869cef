"""TOPIC.APPEND: many records in one atomic write under one idempotency key (the Spark sink).

  TOPIC.APPEND key [NOMKSTREAM] [IDMP producer-id idempotent-id] ENTRIES count
      ([NODE node] [TAG tag] npairs field value [field value ...]) ...
    -> {first_id, last_id, count, duplicate}

Rule 1 (one write): the entries get contiguous seqs and one timestamp, or the command fails and
nothing is appended: it is the HTTP POST's batch write (Engine.write of a list of records), each
record validated as XADD's (`prepare_fields`: pairs byte-exact, node/tag limits, record size),
at most MAX_RECORDS_PER_WRITE a command. The topic is created on first write, unless
NOMKSTREAM: then nil, as XADD's. Every argument is parsed before anything is written, so a
malformed entry anywhere refuses the whole command.
Rule 2 (one key for the batch): with IDMP, the pair names the whole batch in the stream's IDMP
table (XADD IDMP's table, docs/resp.md "Idempotent XADD"): a repeat inside the stream's IDMP
window appends nothing and answers the first write's IDs with `duplicate` true. So a client
that resends a batch after a lost reply or a retried task appends it once, and the server
keeps and journals one key per batch instead of one per record (the sink's per-row IDMP cost,
issue 41).
Rule 3 (as N XADDs otherwise): keyspace events as XADD's (`new` once when the key was created,
`xadd` per entry; none for a duplicate); replies after the write is committed at the topic's
class; WRONGTYPE, OOM (denyoom), WATCH, MULTI, scripts, ACL and replicas as any stream write.
The reply is a map (a flat array in RESP2): the first and last entry IDs, the count, and
`duplicate` (a boolean).
"""

from __future__ import annotations

from typing import Any

from topicsrv.bus.keyspace import NEW, STREAM
from topicsrv.engine.log.records import MAX_RECORDS_PER_WRITE, PreparedRecord, prepare_fields
from topicsrv.resp import ids
from topicsrv.resp.args import Args
from topicsrv.resp.commands.base import (
    CommandContext,
    Err,
    command,
    committed,
    key_name,
    parse_int,
    wrong_args,
)
from topicsrv.resp.commands.stream_args import XAdd, _idmp_option

_ENTRIES_ERR = f"ERR ENTRIES count must be between 1 and {MAX_RECORDS_PER_WRITE}"
_PAIRS_ERR = "ERR an entry's npairs must be a positive integer"


def parse_entries(a: Args) -> list[PreparedRecord]:
    """Rule 1: `count` entries of `[NODE node] [TAG tag] npairs field value ...`, to the end."""
    count = a.next_int(_ENTRIES_ERR)
    if not 1 <= count <= MAX_RECORDS_PER_WRITE:
        raise Err(_ENTRIES_ERR)
    records: list[PreparedRecord] = []
    argv = a.argv
    end = len(argv)
    pos = a.pos
    for _ in range(count):
        node: str | None = None
        tag: str | None = None
        head = argv[pos] if pos < end else b""
        while not head.isdigit() and pos + 1 < end and head.lower() in (b"node", b"tag"):
            label = argv[pos + 1].decode("utf-8", "surrogateescape")
            if head.lower() == b"node":
                node = label
            else:
                tag = label
            pos += 2
            head = argv[pos] if pos < end else b""
        npairs = int(head) if head.isdigit() and len(head) < 10 else parse_int(head, _PAIRS_ERR)
        if npairs < 1:
            raise Err(_PAIRS_ERR)
        start = pos + 1
        pos = start + 2 * npairs
        if pos > end:
            raise Err("ERR an entry has fewer field/value pairs than its npairs")
        records.append(prepare_fields(argv[start:pos], node, tag))
    a.pos = pos
    if a:
        raise Err("ERR more arguments than ENTRIES count entries")
    return records


@command("topic.append", -6, ["write", "denyoom"], 1, 1, 1, "topic",
         "Append many records in one atomic write, under one idempotency key",
         "topicsrv 0.1", syntax="key:key [NOMKSTREAM] [IDMP:producer-id:string "
         "idempotent-id:string] ENTRIES count:integer ([NODE:node:string] [TAG:tag:string] "
         "npairs:integer (field:string value:string)...)...")
def topic_append(ctx: CommandContext, args: list[bytes]) -> Any:
    x = XAdd(args[0], [])
    a = Args(args, 1)
    while a and not a.option(b"entries", nargs=0):
        if a.flag(b"nomkstream"):
            x.nomkstream = True
        elif not _idmp_option(a, x):
            raise a.syntax_error()
    if not a:
        raise wrong_args("topic.append")
    if x.idmp is not None and x.idmp[1] is None:
        raise Err("ERR TOPIC.APPEND takes IDMP producer-id idempotent-id (no IDMPAUTO)")
    records = parse_entries(a)
    name = key_name(x.key)
    engine = ctx.engine
    created = engine.find(name) is None
    if x.nomkstream and created:
        return None
    idmp = None if x.idmp is None else (x.idmp[0], x.idmp[1] or b"")
    result, token = engine.write(name, records, idmp=idmp, lean=True)
    planned = result.get("xids")
    if planned:
        first_id, last_id = b"%d-%d" % tuple(planned[0]), b"%d-%d" % tuple(planned[-1])
    else:
        first_id = ids.format_id(result["ts"], result["first_seq"])
        last_id = ids.format_id(result["ts"], result["last_seq"])
    duplicate = bool(result["duplicate"])
    ks = ctx.server.bus.keyspace
    if ks.flags and not duplicate:  # Rule 3
        key = name.encode("latin-1")
        if created:
            ks.notify(NEW, b"new", key)
        for _ in records:
            ks.notify(STREAM, b"xadd", key)
    reply = {"first_id": first_id, "last_id": last_id, "count": len(records),
             "duplicate": duplicate}
    return committed(token, reply)
