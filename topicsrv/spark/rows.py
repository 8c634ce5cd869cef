"""The row shape of the `topics` source and how RESP entries become Arrow record batches.

Rule 1: one schema for batch and streaming reads (SCHEMA_DDL); record rows have
kind="record" and null gap columns, tombstone rows have kind="tombstone", seq = gap_to (the
position to resume after), the gap columns set, and null node/tag/meta/data.
Rule 2: `data` is JSON text. A record whose RESP form is the single pair `data` holding JSON
that is not a non-empty flat object of strings is the inverse of topicsrv's HTTP->RESP
mapping, so its `data` is that JSON verbatim; any other pairs become a JSON object of the
pairs (or `{"$fields": [[k, v], ...]}` when field names repeat or bytes are not UTF-8, the
same view the HTTP API gives; non-UTF-8 text is `{"$base64": ...}`). This mirrors
topicsrv.engine.log.records.fields_to_data on purpose: the connector ships to Spark workers
without the server's modules (docs/spark.md, "Running on a cluster"); a test checks that the
two agree.
Rule 3: rows are built column-wise into Arrow batches; no per-row Python objects beyond
the column lists. From TOPIC.ROWS pages (client.py Rule 5) each column is one Arrow array
built from the reply's list: the only per-record Python is a record's meta, when it has one.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from topicsrv.spark.client import Columns, Entry, Tombstone

SCHEMA_DDL = (
    "topic string, seq long, ts timestamp, node string, tag string, "
    "meta map<string,string>, data string, kind string, gap_from long, gap_to long, "
    "reason string"
)

ARROW_SCHEMA = pa.schema([
    ("topic", pa.string()),
    ("seq", pa.int64()),
    ("ts", pa.timestamp("us", tz="UTC")),
    ("node", pa.string()),
    ("tag", pa.string()),
    ("meta", pa.map_(pa.string(), pa.string())),
    ("data", pa.string()),
    ("kind", pa.string()),
    ("gap_from", pa.int64()),
    ("gap_to", pa.int64()),
    ("reason", pa.string()),
])

KIND_RECORD = "record"
KIND_TOMBSTONE = "tombstone"


def _dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def _flat_strings(obj: Any) -> bool:
    return isinstance(obj, dict) and bool(obj) and all(isinstance(v, str) for v in obj.values())


def _jsonable_text(b: bytes) -> Any:
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        return {"$base64": base64.b64encode(b).decode("ascii")}


def data_text(pairs: list[bytes]) -> str:
    """The `data` column (JSON text) of a record's field/value pairs."""
    if len(pairs) == 2 and pairs[0] == b"data":
        try:
            parsed = json.loads(pairs[1])
        except ValueError:
            parsed = None
        else:
            if not _flat_strings(parsed):
                return pairs[1].decode("utf-8")
    keys = pairs[0::2]
    try:
        obj = {k.decode("utf-8"): v.decode("utf-8") for k, v in zip(keys, pairs[1::2], strict=True)}
        if len(obj) == len(keys):
            return _dumps(obj)
    except UnicodeDecodeError:
        pass
    fields = [[_jsonable_text(k), _jsonable_text(v)] for k, v in zip(keys, pairs[1::2], strict=True)]
    return _dumps({"$fields": fields})


def _meta_items(meta: str | None) -> list[tuple[str, str]] | None:
    if meta is None:
        return None
    try:
        obj = json.loads(meta)
    except ValueError:
        return [("$raw", meta)]
    if not isinstance(obj, dict):
        return [("$raw", meta)]
    return [(str(k), v if isinstance(v, str) else _dumps(v)) for k, v in obj.items()]


def to_batch(topic: str, items: Iterable[Entry | Tombstone]) -> pa.RecordBatch:
    """An Arrow batch of ARROW_SCHEMA rows for `items` of one topic."""
    cols: dict[str, list[Any]] = {name: [] for name in ARROW_SCHEMA.names}
    for item in items:
        cols["topic"].append(topic)
        cols["ts"].append(item.ts * 1000)
        if isinstance(item, Tombstone):
            cols["seq"].append(item.gap_to)
            for name in ("node", "tag", "meta", "data"):
                cols[name].append(None)
            cols["kind"].append(KIND_TOMBSTONE)
            cols["gap_from"].append(item.gap_from)
            cols["gap_to"].append(item.gap_to)
            cols["reason"].append(item.reason)
        else:
            cols["seq"].append(item.seq)
            cols["node"].append(item.node)
            cols["tag"].append(item.tag)
            cols["meta"].append(_meta_items(item.meta))
            cols["data"].append(data_text(item.pairs))
            cols["kind"].append(KIND_RECORD)
            cols["gap_from"].append(None)
            cols["gap_to"].append(None)
            cols["reason"].append(None)
    arrays = [pa.array(cols[f.name], type=f.type) for f in ARROW_SCHEMA]
    return pa.RecordBatch.from_arrays(arrays, schema=ARROW_SCHEMA)


def _meta_column(metas: list[Any]) -> pa.Array:
    if not any(m is not None for m in metas):
        return pa.nulls(len(metas), ARROW_SCHEMA.field("meta").type)
    items = [None if m is None else _meta_items(m.decode("utf-8", "surrogateescape")) for m in metas]
    return pa.array(items, type=ARROW_SCHEMA.field("meta").type)


def columns_batch(topic: str, cols: Columns) -> pa.RecordBatch:
    """An Arrow batch of ARROW_SCHEMA rows from one TOPIC.ROWS page of records (Rule 3)."""
    n = len(cols)
    ts = pc.multiply(pa.array(cols.tss, pa.int64()), 1000).cast(ARROW_SCHEMA.field("ts").type)
    arrays = [
        pa.array([topic] * n, pa.string()),
        pa.array(cols.seqs, pa.int64()),
        ts,
        pa.array(cols.nodes, pa.binary()).cast(pa.string()),
        pa.array(cols.tags, pa.binary()).cast(pa.string()),
        _meta_column(cols.metas),
        pa.array(cols.datas, pa.binary()).cast(pa.string()),
        pa.array([KIND_RECORD] * n, pa.string()),
        pa.nulls(n, pa.int64()),
        pa.nulls(n, pa.int64()),
        pa.nulls(n, pa.string()),
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=ARROW_SCHEMA)
