"""TOPIC.ROWS: one read of a topic as columns, for the Spark source (topicsrv/spark).

  TOPIC.ROWS key from_seq [LIMIT n]
    -> [seqs, timestamps, nodes, tags, metas, datas, tombstone, next_from_seq, head_seq]

Rule 1 (the same read): exactly TOPIC.DIFF's read pipeline (engine/log/reads.py: the gate and
its tombstone, TTL, deleted slots skipped; at most one tombstone, before any record), so the
source keeps every loss rule; only the shape differs. No node filter: the source applies its
own (reader.py Rule 3), so an empty page always means "nothing more to read".
Rule 2 (columns): one array per column, a record per position: seqs and timestamps (ms) as
integers, node, tag and meta (the record's meta JSON text) as bulk strings or nil, and `data`
as JSON text by the connector's rule (spark/rows.py Rule 2: the JSON verbatim for a single
`data` field holding JSON that is not a flat object of strings, else an object of the
field/value pairs, else `{"$fields": ...}`). The tombstone is nil or `[ts, gap_from, gap_to,
reason, missed_estimate]`. A client builds each Arrow column from one array without touching
a record in Python (tests/spark: the two renderings of `data` agree).
Rule 3 (the common record read cheaply): a record of one field and no node, tag or meta (what
XADD * f v and the Spark sink's JSON objects of one string write) is read by ONE split of its
blob instead of the item-by-item parse (engine/log/entries.py parse_entry); any other record,
or one whose bytes hold a CR LF, takes the parse. Same columns either way (tests/resp).
"""

from __future__ import annotations

import json
from typing import Any

import orjson

from topicsrv.engine.log.entries import parse_entry
from topicsrv.engine.log.reads import FMT_RESP
from topicsrv.engine.log.records import text_or_base64
from topicsrv.resp import replysize
from topicsrv.resp.commands.base import CommandContext, command, key_name
from topicsrv.resp.commands.topics import read_args

_EXTRAS = (b"$meta", b"$tag", b"$node")  # appended as node, tag, meta: stripped from the end


def _loads(raw: bytes) -> Any:
    """JSON as Python's json reads it (orjson first; json for what orjson refuses: NaN, big
    numbers), None when it is not JSON."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        pass
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        return None


def data_text(pairs: list[bytes]) -> bytes:
    """Rule 2's `data` (spark/rows.py `data_text`, as UTF-8 bytes)."""
    if len(pairs) == 2 and pairs[0] != b"data":  # the common XADD: one field, UTF-8 text
        try:
            return b"{" + orjson.dumps(pairs[0].decode("utf-8")) + b":" + orjson.dumps(
                pairs[1].decode("utf-8")) + b"}"
        except UnicodeDecodeError:
            pass
    if len(pairs) == 2 and pairs[0] == b"data":
        parsed = _loads(pairs[1])
        if parsed is not None or pairs[1].strip() == b"null":
            if not (isinstance(parsed, dict) and parsed and all(isinstance(v, str) for v in parsed.values())):
                return pairs[1]
    keys = pairs[0::2]
    try:
        obj = {k.decode("utf-8"): v.decode("utf-8") for k, v in zip(keys, pairs[1::2], strict=True)}
        if len(obj) == len(keys):
            return orjson.dumps(obj)
    except UnicodeDecodeError:
        pass
    fields = [[text_or_base64(k), text_or_base64(v)] for k, v in zip(keys, pairs[1::2], strict=True)]
    return orjson.dumps({"$fields": fields})


def columns(blobs: Any) -> tuple[list[int], list[int], list[Any], list[Any], list[Any], list[bytes]]:
    """Rule 2 over the records of a read (stream-entry blobs)."""
    seqs: list[int] = []
    tss: list[int] = []
    nodes: list[Any] = []
    tags: list[Any] = []
    metas: list[Any] = []
    datas: list[bytes] = []
    for blob in blobs:
        parts = blob.split(b"\r\n")
        if len(parts) == 9 and parts[3] == b"*2" and parts[5] not in _EXTRAS:
            # Rule 3: `*2 $n id *2 $n field $n value ""`: one field, no label, no CR LF inside
            # (one would add parts), so the parts are the items (5x cheaper than parse_entry)
            ts_b, _, seq_b = parts[2].partition(b"-")
            seqs.append(int(seq_b))
            tss.append(int(ts_b))
            nodes.append(None)
            tags.append(None)
            metas.append(None)
            datas.append(data_text([parts[5], parts[7]]))
            continue
        ts, seq, pairs = parse_entry(blob)
        extra: dict[bytes, bytes] = {}
        for key in _EXTRAS:
            if len(pairs) >= 2 and pairs[-2] == key:
                extra[key] = pairs[-1]
                pairs = pairs[:-2]
        seqs.append(seq)
        tss.append(ts)
        nodes.append(extra.get(b"$node"))
        tags.append(extra.get(b"$tag"))
        metas.append(extra.get(b"$meta"))
        datas.append(data_text(pairs))
    return seqs, tss, nodes, tags, metas, datas


@command("topic.rows", -3, ["readonly"], 1, 1, 1, "topic",
         "Read the records after from_seq as columns (the Spark source's read)", "0.1.0",
         syntax="key:key from_seq:integer [LIMIT:limit:integer]")
def topic_rows(ctx: CommandContext, args: list[bytes]) -> Any:
    name = key_name(args[0])
    from_seq, limit, _ = read_args(args, nodes=False)
    result = ctx.engine.diff(name, from_seq, limit, fmt=FMT_RESP)
    result = replysize.capped(result, replysize.budget(ctx))  # at most the output limit
    tomb = result.tombstone
    seqs, tss, nodes, tags, metas, datas = columns(result.records)
    tombstone = None if tomb is None else [
        tomb.ts, tomb.gap_from, tomb.gap_to, tomb.reason.encode(), tomb.missed_estimate]
    return [seqs, tss, nodes, tags, metas, datas, tombstone, result.next_from_seq, result.head_seq]
