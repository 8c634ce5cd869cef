"""Stream entries as the engine stores them: `<ts>-<seq>` IDs and RESP entry blobs.

A field/value record (XADD) is stored as its RESP stream entry `[<ts>-<seq>, [f, v, ...]]`,
already encoded, so an XREAD is a join of stored bytes (records.py Rule 3). This module is the
one place that writes and reads that layout; the RESP front's `resp/ids.py` builds positions
(`-`, `+`, `$`, time positions) on top of `format_id` / `split_id`.

Rule 1: an entry ID is `<ts>-<seq>`, both decimal, the ms part first (API.md section 9).
Rule 2: a blob is canonical RESP2: `*2`, the ID as a bulk string, then one `*n` array of bulk
  strings. `parse_entry` reads exactly what `encode_entry` writes (no general RESP parser,
  no hiredis: the engine imports no protocol library).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable


def format_id(ts: int, seq: int) -> bytes:
    """The entry ID `b"<ts>-<seq>"`."""
    return b"%d-%d" % (ts, seq)


def split_id(ident: bytes) -> tuple[int, int]:
    """(ts, seq) of an ID this server wrote (a missing seq part reads as 0)."""
    ts, _, seq = ident.partition(b"-")
    return int(ts), int(seq or 0)


def bulk(b: bytes) -> bytes:
    """One RESP bulk string."""
    return b"$%d\r\n%b\r\n" % (len(b), b)


def bulks(items: Iterable[bytes]) -> bytes:
    """A RESP array of bulk strings."""
    parts = [bulk(x) for x in items]
    return b"*%d\r\n%b" % (len(parts), b"".join(parts))


def bulks_in_slices(items: list[bytes], pause: Callable[[], object], every: int = 4096) -> bytes:
    """`bulks(items)`, calling `pause()` after each slice of `every` items: a worker thread
    passes `time.sleep(0)`, which lets the event loop's thread take the GIL. Compiled code
    never gives the GIL up on its own (the interpreter does every 5 ms), so without the
    pauses a thread encoding 1M fields stalls every client for the whole encoding."""
    parts: list[bytes] = []
    for i in range(0, len(items), every):
        parts += [bulk(x) for x in items[i : i + every]]
        pause()
    return b"*%d\r\n%b" % (len(parts), b"".join(parts))


def with_id(ts: int, seq: int, tail: bytes) -> bytes:
    """An entry blob from its pre-encoded pairs array `tail` (the XADD hot path, so
    format_id's one line is written out here)."""
    return b"*2\r\n$%d\r\n%d-%d\r\n%b" % (digits(ts) + 1 + digits(seq), ts, seq, tail)


def digits(n: int) -> int:
    """len(str(n)) for n >= 0, without the string."""
    d = 1
    while n >= 10:
        n //= 10
        d += 1
    return d


def cut_tails(buf: bytes, offs: list[int], live: bytes, prefix: int) -> list[bytes]:
    """The pairs arrays of the entry blobs packed in `buf` (blob k is buf[offs[k]:offs[k+1]]),
    b"" for a slot whose `live` byte is 0; `prefix` is the length of every blob's ID prefix,
    or -1 when they differ (each is then read from its blob). columns.strip's loop, compiled;
    like a zip, it stops at the shorter of the slots and `live`."""
    out: list[bytes] = []
    a = offs[0]
    for k in range(min(len(offs) - 1, len(live))):
        b = offs[k + 1]
        if not live[k]:
            out.append(b"")
        elif prefix >= 0:
            out.append(buf[a + prefix:b])
        else:
            out.append(buf[a + tail_start(buf[a:b]):b])
        a = b
    return out


def tail_start(blob: bytes) -> int:
    """Where the pairs array of an entry blob starts: the length of its ID prefix."""
    end = blob.index(b"\r\n", 5)  # b"*2\r\n$" precedes the ID's length
    return end + 4 + int(blob[5:end])


def rebuild(ts: Iterable[int], seqs: Iterable[int], starts: Iterable[int], ends: Iterable[int],
            buf: bytes, width: int = 0) -> list[bytes | None]:
    """Entry blobs from their pairs arrays `buf[a:b]` (None for an empty span): `with_id` over
    whole columns, the format written out. `width`: every ID has that many bytes, so one
    format per record does (~0.4 us a record; segments Rule 7 makes a bare segment whole
    with this)."""
    if width:
        fmt = b"*2\r\n$%d\r\n%%d-%%d\r\n%%b" % width
        return [fmt % (t, s, buf[a:b]) if b > a else None
                for t, s, a, b in zip(ts, seqs, starts, ends, strict=True)]
    out: list[bytes | None] = []
    append = out.append
    for t, s, a, b in zip(ts, seqs, starts, ends, strict=True):
        if a == b:
            append(None)
            continue
        ident = b"%d-%d" % (t, s)
        append(b"*2\r\n$%d\r\n%b\r\n%b" % (len(ident), ident, buf[a:b]))
    return out


def encode_entry(ts: int, seq: int, items: Iterable[bytes]) -> bytes:
    """The entry blob `[<ts>-<seq>, [items...]]`."""
    return with_id(ts, seq, bulks(items))


def parse_entry(blob: bytes) -> tuple[int, int, list[bytes]]:
    """(ts, seq, items) of an entry blob, items including any `$node`/`$tag` extras.

    One loop with no call per item: this runs for every XADD-written record an HTTP diff or
    SSE watch delivers (records.blob_to_json)."""
    find = blob.index
    end = find(b"\r\n", 5)  # b"*2\r\n$" precedes the ID's length
    start = end + 2
    stop = start + int(blob[5:end])
    ident = blob[start:stop]
    pos = stop + 3  # past b"\r\n*"
    end = find(b"\r\n", pos)
    n = int(blob[pos:end])
    pos = end + 3  # past b"\r\n$"
    items: list[bytes] = []
    append = items.append
    for _ in range(n):
        end = find(b"\r\n", pos)
        start = end + 2
        stop = start + int(blob[pos:end])
        append(blob[start:stop])
        pos = stop + 3
    ts, seq = split_id(ident)
    return ts, seq, items
