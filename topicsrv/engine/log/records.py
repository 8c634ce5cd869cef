"""Records: the limits of seeds section 1.2, and encoding each record once, at append.

Rule 1: a record is validated completely before any seq is assigned, so a write that breaks a
limit changes nothing (the same checks serve HTTP and RESP, so the 400s are identical).
Rule 2: the resident store keeps ONE bytes blob per record, in the form it was written in:
  - JSON records (HTTP) are stored as their wire JSON: {"$seq":..,"$ts":..,...,"data":..};
  - field/value records (XADD) are stored as their RESP stream entry: [id, [f, v, ...]].
  The other form is derived at read time by `blob_to_json` / `blob_to_resp`.
Rule 3: blobs embed $seq and $ts, so a read is a join of byte slices, never a re-encode.

The field/value mapping (docs/resp.md): a flat JSON object of strings is the pairs; any other
`data` is one field `data` holding its JSON text; `$node`, `$tag` and `$meta` (JSON text) are
extra trailing pairs, present only when the record has them.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any, Final

import orjson

from topicsrv.engine.log.entries import bulks, bulks_in_slices, encode_entry, parse_entry, with_id
from topicsrv.errors import TopicsError, invalid

MAX_DATA_META_BYTES: Final = 1 << 20
MAX_TAG_BYTES: Final = 256
MAX_NODE_BYTES: Final = 128
MAX_META_BYTES: Final = 16 * 1024
MAX_META_KEYS: Final = 64
MAX_RECORDS_PER_WRITE: Final = 10_000
MAX_WRITE_BODY_BYTES: Final = 64 << 20

KIND_JSON: Final = 0x7B  # '{' : first byte of a JSON blob
KIND_FIELDS: Final = 0x2A  # '*' : first byte of a RESP entry blob

_RECORD_KEYS: Final = frozenset({"data", "tag", "node", "meta"})


class PreparedRecord:
    """A validated record waiting for its seq and ts."""

    __slots__ = ("tail", "kind", "node", "tag", "size")

    def __init__(self, tail: bytes, kind: int, node: str | None, tag: str | None, size: int):
        self.tail = tail
        self.kind = kind
        self.node = node
        self.tag = tag
        self.size = size

    def encode(self, seq: int, ts: int) -> bytes:
        if self.kind == KIND_JSON:
            return b'{"$seq":%d,"$ts":%d%b' % (seq, ts, self.tail)
        return with_id(ts, seq, self.tail)


def too_large(message: str, **detail: Any) -> TopicsError:
    return TopicsError("record_too_large", message, detail or None)


def check_label(value: Any, name: str, limit: int, index: int | None = None) -> str | None:
    """Validate a node or tag: absent/null, or a string of at most `limit` UTF-8 bytes."""
    if value is None:
        return None
    where = f"records[{index}].{name}" if index is not None else name
    if not isinstance(value, str):
        raise invalid(f"{where} must be a string", field=where)
    n = len(value.encode("utf-8", "surrogatepass"))
    if n > limit:
        raise too_large(f"{where} is {n} bytes; the limit is {limit}", field=where, limit=limit)
    return value


def _check_meta(meta: Any, where: str) -> bytes:
    if not isinstance(meta, dict):
        raise invalid(f"{where} must be an object of string values", field=where)
    if len(meta) > MAX_META_KEYS:
        raise too_large(f"{where} has {len(meta)} keys; the limit is {MAX_META_KEYS}", field=where)
    for k, v in meta.items():
        if not isinstance(v, str):
            raise invalid(f"{where}.{k} must be a string", field=where)
    encoded = orjson.dumps(meta)
    if len(encoded) > MAX_META_BYTES:
        raise too_large(
            f"{where} is {len(encoded)} bytes; the limit is {MAX_META_BYTES}", field=where
        )
    return encoded


def prepare_json(rec: Any, index: int = 0) -> PreparedRecord:
    """Validate one record object of an HTTP write body."""
    if not isinstance(rec, dict):
        raise invalid(f"records[{index}] must be an object with a 'data' key")
    if "data" not in rec:
        raise invalid(f"records[{index}] has no 'data' (it may be null, but must be present)")
    extra = rec.keys() - _RECORD_KEYS
    if extra:
        bad = sorted(extra)[0]
        raise invalid(
            f"records[{index}] has unknown field '{bad}' (allowed: data, tag, node, meta)",
            field=bad,
        )
    node = check_label(rec.get("node"), "node", MAX_NODE_BYTES, index)
    tag = check_label(rec.get("tag"), "tag", MAX_TAG_BYTES, index)
    data = orjson.dumps(rec["data"])
    parts = []
    if node is not None:
        parts.append(b',"$node":' + orjson.dumps(node))
    if tag is not None:
        parts.append(b',"$tag":' + orjson.dumps(tag))
    size = len(data)
    meta = rec.get("meta")
    if meta is not None:
        meta_bytes = _check_meta(meta, f"records[{index}].meta")
        size += len(meta_bytes)
        parts.append(b',"meta":' + meta_bytes)
    if size > MAX_DATA_META_BYTES:
        raise too_large(
            f"records[{index}] data+meta is {size} bytes; the limit is {MAX_DATA_META_BYTES}",
            size=size,
            limit=MAX_DATA_META_BYTES,
        )
    parts.append(b',"data":' + data + b"}")
    return PreparedRecord(b"".join(parts), KIND_JSON, node, tag, size)


def prepare_fields(pairs: list[bytes], node: str | None = None, tag: str | None = None) -> PreparedRecord:
    """Validate one XADD record: field/value pairs kept byte-exact."""
    if node is None and tag is None and len(pairs) == 2:  # one field, no label: the common XADD
        f, v = pairs[0], pairs[1]
        size = len(f) + len(v)
        if size <= MAX_DATA_META_BYTES:
            tail = b"*2\r\n$%d\r\n%b\r\n$%d\r\n%b\r\n" % (len(f), f, len(v), v)  # bulks(pairs)
            return PreparedRecord(tail, KIND_FIELDS, None, None, size)
    items, node, tag, size = _fields(pairs, node, tag)
    return PreparedRecord(bulks(items), KIND_FIELDS, node, tag, size)


def prepare_fields_in_slices(pairs: list[bytes], node: str | None, tag: str | None,
                             pause: Callable[[], object]) -> PreparedRecord:
    """`prepare_fields` for a record of very many fields, run in a worker thread: the same
    record, encoded with `pause()` between slices (entries.bulks_in_slices)."""
    items, node, tag, size = _fields(pairs, node, tag)
    return PreparedRecord(bulks_in_slices(items, pause), KIND_FIELDS, node, tag, size)


def _fields(pairs: list[bytes], node: str | None,
            tag: str | None) -> tuple[list[bytes], str | None, str | None, int]:
    """The checks of `prepare_fields`; the items to encode (pairs, then `$node`, `$tag`)."""
    if not pairs or len(pairs) % 2:
        raise invalid("a record needs field/value pairs")
    node = check_label(node, "node", MAX_NODE_BYTES)
    tag = check_label(tag, "tag", MAX_TAG_BYTES)
    size = sum(map(len, pairs))
    if size > MAX_DATA_META_BYTES:
        raise too_large(
            f"the record's fields are {size} bytes; the limit is {MAX_DATA_META_BYTES}",
            size=size,
            limit=MAX_DATA_META_BYTES,
        )
    if node is None and tag is None:
        return pairs, node, tag, size  # encoded as they are (bulks only reads them)
    items = list(pairs)
    if node is not None:
        items += [b"$node", node.encode()]
    if tag is not None:
        items += [b"$tag", tag.encode()]
    return items, node, tag, size


# ---- read-time conversions -------------------------------------------------------------


def text_or_base64(b: bytes) -> Any:
    """Bytes as JSON text, or `{"$base64": ...}` when they are not UTF-8."""
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        return {"$base64": base64.b64encode(b).decode("ascii")}


def fields_to_data(pairs: list[bytes]) -> Any:
    """XADD pairs as HTTP `data`: a flat object when that is lossless, else `$fields`."""
    keys = pairs[0::2]
    try:
        obj = {k.decode("utf-8"): v.decode("utf-8") for k, v in zip(keys, pairs[1::2], strict=True)}
        if len(obj) == len(keys):
            return obj
    except UnicodeDecodeError:
        pass
    return {"$fields": [[text_or_base64(k), text_or_base64(v)] for k, v in zip(keys, pairs[1::2], strict=True)]}


def data_to_fields(data: Any) -> list[bytes]:
    """HTTP `data` as XADD pairs: a flat object of strings maps 1:1, anything else is `data`."""
    if isinstance(data, dict) and data and all(isinstance(v, str) for v in data.values()):
        out: list[bytes] = []
        for k, v in data.items():
            out += [k.encode("utf-8", "surrogatepass"), v.encode("utf-8", "surrogatepass")]
        return out
    return [b"data", orjson.dumps(data)]


def blob_to_json(blob: bytes, node: str | None, tag: str | None) -> bytes:
    if blob[0] == KIND_JSON:
        return blob
    ts, seq, pairs = parse_entry(blob)
    extras = (node is not None) + (tag is not None)
    if extras:
        pairs = pairs[: len(pairs) - 2 * extras]
    out: dict[str, Any] = {"$seq": seq, "$ts": ts}
    if node is not None:
        out["$node"] = node
    if tag is not None:
        out["$tag"] = tag
    out["data"] = fields_to_data(pairs)
    return orjson.dumps(out)


def blob_to_resp(blob: bytes) -> bytes:
    if blob[0] == KIND_FIELDS:
        return blob
    rec = orjson.loads(blob)
    items = data_to_fields(rec["data"])
    if "$node" in rec:
        items += [b"$node", rec["$node"].encode("utf-8", "surrogatepass")]
    if "$tag" in rec:
        items += [b"$tag", rec["$tag"].encode("utf-8", "surrogatepass")]
    if "meta" in rec:
        items += [b"$meta", orjson.dumps(rec["meta"])]
    return encode_entry(rec["$ts"], rec["$seq"], items)
