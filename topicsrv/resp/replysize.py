"""Reply size bounds: no single reply may exceed `client_output_limit`.

redis-server (with a hard client-output-buffer-limit) closes the connection of a client
whose reply outgrows it, silently. topicsrv answers instead, so the client learns why:

Rule 1 (ranges are refused): XRANGE/XREVRANGE whose entries would exceed the limit reply
`-ERR reply too large: ...; use COUNT to read the range in pages` and keep the connection.
The range is scanned in pages and the scan stops as soon as the limit is passed, so the
refusal never builds the reply it refuses.
Rule 2 (reads are capped): XREAD, XREADGROUP `>` and TOPIC.DIFF deliver as many entries as
fit (always at least one), like HTTP's `max_bytes`; a reader continues from the last entry
it got, so nothing is skipped. XREADGROUP is capped BEFORE it delivers (a side-effect-free
read decides how many fit), so the PEL only ever holds what the consumer received.
Rule 3: any other reply over the limit is replaced by the same error after encoding
(topicsrv/resp/dispatch.py `emit`): the backstop. Refusals count in INFO stats
(`client_output_limit_refusals`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Final

from topicsrv.engine.log.blobs import Blobs, nbytes
from topicsrv.engine.log.reads import FMT_RESP, ReadResult, read, scan_blobs
from topicsrv.engine.log.topic import Topic
from topicsrv.resp.commands.base import CommandContext, Err

PAGE: Final = 1024  # records per scan page of a range
SLACK: Final = 4096  # bytes kept for array headers, keys and a tombstone entry
GROUP_PRECHECK_OVER: Final = 100  # XREADGROUP COUNT above this (or no COUNT) is sized before delivery


def too_big(ctx: CommandContext, what: str, hint: str = "") -> str:
    """The error text for a reply over client_output_limit (counted in INFO stats)."""
    ctx.front.stats.output_limit_refusals += 1
    limit = ctx.server.config.client_output_limit
    return f"ERR reply too large: {what} exceed client-output-limit ({limit} bytes){hint}"


def budget(ctx: CommandContext) -> int:
    """Bytes of entries one reply may carry."""
    return max(1, ctx.server.config.client_output_limit - SLACK)


def fit(records: Sequence[bytes], room: int) -> int:
    """How many leading records fit in `room` bytes; at least one (a reader must progress)."""
    if nbytes(records) <= room:
        return len(records)
    used = 0
    for k, blob in enumerate(records):
        used += len(blob)
        if used > room:
            return max(k, 1)
    return len(records)


def capped(result: ReadResult, room: int) -> ReadResult:
    """`result` with only the records that fit in `room`; next_from_seq follows the last one."""
    k = fit(result.records, room)
    if k == len(result.records):
        return result
    return replace(result, records=result.records[:k], seqs=result.seqs[:k],
                   next_from_seq=result.seqs[k - 1])


def bounded_range(ctx: CommandContext, topic: Topic, lo: int, hi: int, count: int,
                  reverse: bool) -> Blobs:
    """XRANGE's entries (count 0 = all), or the Rule 1 error."""
    room = budget(ctx)
    now = ctx.engine.now()
    out = Blobs()
    size = 0
    while True:
        want = PAGE if count <= 0 else min(PAGE, count - len(out))
        seqs, blobs = scan_blobs(topic, lo, hi, want, now, reverse=reverse, fmt=FMT_RESP)
        size += nbytes(blobs)
        if size > room:
            raise Err(too_big(ctx, "the entries of this range",
                              "; use COUNT to read the range in pages"))
        out.extend(blobs)
        if len(seqs) < want or (count > 0 and len(out) >= count):
            return out
        if reverse:
            hi = seqs[-1] - 1
        else:
            lo = seqs[-1] + 1


def group_window(ctx: CommandContext, topic: Topic, cursor: int, count: int, room: int) -> int:
    """The COUNT to give an XREADGROUP `>` read from `cursor` so its entries fit in `room`
    (Rule 2). Side-effect free: only reads."""
    if 0 < count <= GROUP_PRECHECK_OVER:
        return count
    limit = count if count > 0 else max(1, topic.head_seq - cursor)
    res = read(topic, cursor, limit, ctx.engine.now(), fmt=FMT_RESP)
    k = fit(res.records, room)
    return k if k < len(res.records) else count
