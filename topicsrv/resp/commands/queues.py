"""Lease queues over RESP (seeds section 10, API.md 7 and 9): TOPIC.CLAIM ACK NACK EXTEND.

  TOPIC.CLAIM key node [MAX n] [LEASE ms] [BLOCK ms]                  lease up to n jobs to node
  TOPIC.ACK key node seq [seq ...] [LEASEIDS id ...]                  done: the jobs are deleted
  TOPIC.NACK key node [DELAY ms] seq [seq ...] [LEASEIDS id ...]      give back (after ms)
  TOPIC.EXTEND key node [LEASE ms] seq [seq ...] [LEASEIDS id ...]    heartbeat: a new deadline

Rule 1: every claim goes through the Claims service (topicsrv/tasks/claims.py), so RESP
claimers share cohorts, waiting lines and the dead-letter mover with HTTP claimers. A claim on
a greedy queue (claim_jitter_ms 0) is one pass at once (`claim_nowait`); one that found
nothing and may BLOCK returns a `RespBlock` (topicsrv/resp/blocked.py): it waits in the
queue's line of claimers (Claims.line) with no task of its own and is served there, first
come first served, only when there is a job for it. A claim on a coalescing queue returns an
awaitable (session.py Rule 3): it waits for its cohort's window, then (BLOCK) in the line.
Rule 2: a job is the stream entry XREADGROUP would send, `[id, [f, v, ...]]`, with the
lease fields appended by position: `[id, fields, seq, lease_id, deadline, delivery]`, the
same array under RESP2 and RESP3 (as XREADGROUP ... CLAIM appends its fields to an entry).
The entry's bytes are spliced from the engine's blob, never re-encoded; an array, not a map,
because clients parse a RESP3 map several times slower (hiredis: ~2.2 us against ~0.3 us
for a 6-field job, docs/performance.md "Lease queues"). The reply is an array of jobs; no jobs is an empty array, and a BLOCK that
timed out is a null array (`*-1`, RESP3 `_`), as XREADGROUP BLOCK answers. `BLOCK 0` waits
for as long as it takes (in MAX_WAIT_MS long polls).
Rule 3: claimed jobs are sent only once their lease events are committed (`Pending`), and
never past the output limit: the engine leases only the jobs whose records fit the reply
budget (engine/queues/queues.py Rule 4, at least one; the others are never leased), and a reply that
still does not fit (the RESP form is larger than the stored one) gives the jobs past it back
at once (a nack fenced by their lease ids), so a reply is never replaced by an error while
jobs stay leased to a worker that never saw them (replysize.py Rule 2, for claims).
Rule 4: every argument is parsed and checked before the engine runs, so a bad one changes
nothing: integers in Redis's wording (`ERR value is not an integer or out of range`), a
missing key the engine's `ERR topic 'k' does not exist` (as TOPIC.INFO), a log topic
`WRONGTYPE Operation against a key holding the wrong kind of value (not_a_queue: ...)`,
Redis's text plus the HTTP error code (the mirror of XREADGROUP's WRONGTYPE on a queue).
Rule 5: ACK/NACK/EXTEND reply the HTTP result objects (`topic`, `acked`|`released`|
`extended`, ...), with `skipped` as `[seq, reason]` pairs; a seq the node does not hold (or
holds under another lease id) is skipped and named, never an error (engine/queues/queues.py Rule 2).
"""

from __future__ import annotations

import re
from typing import Any, Final

from topicsrv.engine.config import CONFIG_INT_MAX
from topicsrv.engine.journal import CommitToken
from topicsrv.engine.log.reads import FMT_RESP
from topicsrv.engine.queues.queues import MAX_CLAIM, MAX_SEQS, Claimer, Job
from topicsrv.errors import TopicsError
from topicsrv.notify import NOTHING
from topicsrv.resp import replysize
from topicsrv.resp.args import Args
from topicsrv.resp.blocked import RespBlock
from topicsrv.resp.commands.base import (
    NULL_ARRAY,
    WRONGTYPE,
    CommandContext,
    Err,
    Raw,
    command,
    committed,
    key_name,
    parse_int,
)
from topicsrv.tasks.claims import MAX_WAIT_MS, release

EMPTY: Final = Raw(b"*0\r\n")
_LEASE: Final = b":%d\r\n$%d\r\n%b\r\n:%d\r\n:%d\r\n"  # seq, lease_id, deadline, delivery


def _cmd(name: str, arity: int, flags: list[str], summary: str, syntax: str) -> Any:
    return command(name, arity, flags, 1, 1, 1, "topic", summary, "topicsrv 0.1", syntax=syntax)


def _text(b: bytes) -> str:
    return b.decode("utf-8", "surrogateescape")


def _ranged(value: int, name: str, lo: int, hi: int = CONFIG_INT_MAX) -> int:
    if not lo <= value <= hi:
        raise Err(f"ERR {name} must be between {lo} and {hi}")
    return value


def not_a_queue(name: str) -> Err:
    return Err(f"{WRONGTYPE} (not_a_queue: '{name}' is a log topic; TOPIC.CLAIM, TOPIC.ACK, "
               "TOPIC.NACK and TOPIC.EXTEND need a topic created with TYPE queue)")


def _translate(e: TopicsError) -> Exception:
    """Rule 4: the engine's not_a_queue as WRONGTYPE; any other engine error as it is."""
    if e.code == "not_a_queue" and e.detail:
        return not_a_queue(str(e.detail.get("topic")))
    return e


_SEQS: Final = re.compile(rb"(?:(?:0|[1-9][0-9]{0,17}) )*(?:0|[1-9][0-9]{0,17})")


def _seqs(raw: list[bytes]) -> list[int] | None:
    """Canonical decimal seqs (no LEASEIDS among them) parsed in bulk; None: go one by one."""
    if raw and _SEQS.fullmatch(b" ".join(raw)):
        return list(map(int, raw))
    return None


def _seq(raw: bytes) -> int:
    """A seq argument: a canonical decimal at once, anything else by Redis's strict parser."""
    if raw.isdigit() and len(raw) < 19 and (raw[0] != 0x30 or len(raw) == 1):
        return int(raw)
    value = parse_int(raw)
    if value < 0:
        raise Err(f"ERR seq must be >= 0 (got {value})")
    return value


# ---- TOPIC.CLAIM ------------------------------------------------------------------------------


def render_job(job: Job) -> bytes:
    """Rule 2: one job, the entry blob `*2 $id *n ...` grown to `*6` by its lease fields."""
    lid = job.lease_id.encode()
    return b"*6" + job.blob[2:] + _LEASE % (job.seq, len(lid), lid, job.deadline, job.delivery)


def _reply(ctx: CommandContext, name: str, node: str, jobs: list[Job],
           token: CommitToken | None) -> Any:
    """Rule 3: the jobs that fit in one reply, once committed; the rest go back at once."""
    parts = [render_job(j) for j in jobs]
    room = replysize.budget(ctx)
    keep = replysize.fit(parts, room)
    if keep < len(jobs):
        back = jobs[keep:]
        _, token2 = ctx.engine.nack(name, node, [j.seq for j in back], [j.lease_id for j in back])
        token = token2 or token
        parts = parts[:keep]
    return committed(token, Raw(b"*%d\r\n%b" % (len(parts), b"".join(parts))))


@_cmd("topic.claim", -3, ["write", "blocking"],
      "Lease up to MAX jobs of a queue topic to a worker node (waits up to BLOCK ms for one)",
      "key:key node:string [MAX:max:integer] [LEASE:ms:integer] [BLOCK:ms:integer]")
def topic_claim(ctx: CommandContext, args: list[bytes]) -> Any:
    name = key_name(args[0])
    n, lease_ms, block = 1, None, -1
    a = Args(args, 2)
    while a:
        if a.option(b"max"):
            n = _ranged(a.next_int(), "MAX", 1, MAX_CLAIM)
        elif a.option(b"lease"):
            lease_ms = _ranged(a.next_int(), "LEASE", 1)
        elif a.option(b"block"):
            block = parse_int(a.next(), "ERR timeout is not an integer or out of range")
            if block < 0:
                raise Err("ERR timeout is negative")
        else:
            raise a.syntax_error()
    claimer = Claimer(_text(args[1]), n, lease_ms, FMT_RESP, replysize.budget(ctx))
    try:  # the engine checks the key and the node before anything changes (Rule 4)
        got = ctx.server.claims_service().claim_nowait(name, claimer)  # None: a cohort queue
    except TopicsError as e:
        raise _translate(e) from None
    if got is not None and (got[0] or block < 0):
        return _reply(ctx, name, claimer.node, *got)
    if got is not None:
        return _claim_block(ctx, name, claimer, block)
    return _claim_wait(ctx, name, claimer, block)


def _claim_block(ctx: CommandContext, name: str, claimer: Claimer, block: int) -> RespBlock:
    """BLOCK on a greedy queue: wait in the queue's line (Rule 1); BLOCK 0 = forever."""
    claims = ctx.server.claims_service()

    def attempt() -> Any:
        try:
            jobs, token = claims.claim_now(name, claimer)
        except TopicsError as e:  # the key was deleted or re-created as a log topic meanwhile
            raise _translate(e) from None
        if not jobs:
            return NOTHING
        b.give_back = lambda: release(ctx.engine, name, claimer.node, jobs)
        return _reply(ctx, name, claimer.node, jobs, token)

    b = RespBlock(ctx, attempt, lines=[claims.line(name)], demand=claimer.max,
                  timeout_s=block / 1000 if block > 0 else None)
    return b


async def _claim_wait(ctx: CommandContext, name: str, claimer: Claimer, block: int) -> Any:
    """Rule 2: long polls until jobs come or BLOCK ms passed (-1: no BLOCK, 0: forever)."""
    claims = ctx.server.claims_service()
    left = max(block, 0)
    try:
        while True:
            wait = MAX_WAIT_MS if block == 0 else min(left, MAX_WAIT_MS)
            jobs, token = await claims.claim(name, claimer, wait)
            left -= wait
            if jobs:
                return _reply(ctx, name, claimer.node, jobs, token)
            if block < 0:
                return EMPTY
            if block > 0 and left <= 0:
                return NULL_ARRAY
    except TopicsError as e:  # the key was deleted or re-created as a log topic meanwhile
        raise _translate(e) from None


# ---- TOPIC.ACK / NACK / EXTEND -------------------------------------------------------------------


def _lease_args(args: list[bytes], opt: bytes | None) -> tuple[
        str, str, list[int], list[str] | None, int | None, bool]:
    """`key node [OPT ms] seq [seq ...] [LEASEIDS id ...]` -> (name, node, seqs, lease ids, ms,
    canonical: the seqs are args[-len(seqs):], canonical decimals parsed in bulk)."""
    ms: int | None = None
    a = Args(args, 2)
    if opt is not None and a.option(opt):
        value = a.next_int()
        ms = _ranged(value, "DELAY", 0) if opt == b"delay" else _ranged(value, "LEASE", 1)
    fast = _seqs(args[a.pos:])
    if fast is not None:
        return key_name(args[0]), _text(args[1]), _checked(fast), None, ms, True
    seqs: list[int] = []
    while a and a.peek().lower() != b"leaseids":
        seqs.append(_seq(a.next()))
    if not seqs:
        raise Err("ERR at least one seq is required")
    lease_ids: list[str] | None = None
    if a:
        a.next()
        lease_ids = [_text(x) for x in a.rest()]
        if len(lease_ids) != len(seqs):
            raise Err(f"ERR LEASEIDS names {len(lease_ids)} lease ids for {len(seqs)} seqs: "
                      "give one per seq, in the same order")
    return key_name(args[0]), _text(args[1]), _checked(seqs), lease_ids, ms, False


def _checked(seqs: list[int]) -> list[int]:
    if len(seqs) > MAX_SEQS:
        raise Err(f"ERR too many seqs: {len(seqs)}; the limit is {MAX_SEQS}")
    return seqs


def _ints(seqs: list[int], raw: list[bytes]) -> Raw:
    """An array of the integers `seqs`, spliced from their canonical decimal arguments `raw`
    (the same numbers, as the bulk parse matched them) instead of encoded one by one."""
    return Raw(b"*%d\r\n:%b\r\n" % (len(seqs), b"\r\n:".join(raw)) if seqs else b"*0\r\n")


def _skipped(result: dict[str, Any]) -> list[list[Any]]:
    return [[s["seq"], s["reason"]] for s in result["skipped"]]


@_cmd("topic.ack", -4, ["write", "fast"],
      "Acknowledge claimed jobs: each job the node holds is deleted; the others are skipped",
      "key:key node:string seq:integer... [LEASEIDS lease_id:string...]")
def topic_ack(ctx: CommandContext, args: list[bytes]) -> Any:
    name, node, seqs, lease_ids, _, canonical = _lease_args(args, None)
    try:
        result, token = ctx.engine.ack(name, node, seqs, lease_ids)
    except TopicsError as e:
        raise _translate(e) from None
    acked: Any = result["acked"]
    if canonical and len(acked) == len(seqs):  # all acked, in argument order
        acked = _ints(acked, args[len(args) - len(seqs):])
    return committed(token, {"topic": name, "acked": acked, "skipped": _skipped(result)})


@_cmd("topic.nack", -4, ["write", "fast"],
      "Give claimed jobs back to the queue, claimable again at once or after DELAY ms",
      "key:key node:string [DELAY:ms:integer] seq:integer... [LEASEIDS lease_id:string...]")
def topic_nack(ctx: CommandContext, args: list[bytes]) -> Any:
    name, node, seqs, lease_ids, delay, _ = _lease_args(args, b"delay")
    try:
        result, token = ctx.engine.nack(name, node, seqs, lease_ids, delay or 0)
    except TopicsError as e:
        raise _translate(e) from None
    return committed(token, {"topic": name, "released": result["released"],
                             "skipped": _skipped(result), "ready_at": result["ready_at"]})


@_cmd("topic.extend", -4, ["write", "fast"],
      "Extend the leases of claimed jobs: a new deadline LEASE ms from now (default the queue's)",
      "key:key node:string [LEASE:ms:integer] seq:integer... [LEASEIDS lease_id:string...]")
def topic_extend(ctx: CommandContext, args: list[bytes]) -> Any:
    name, node, seqs, lease_ids, lease_ms, _ = _lease_args(args, b"lease")
    try:
        result, token = ctx.engine.extend(name, node, seqs, lease_ids, lease_ms)
    except TopicsError as e:
        raise _translate(e) from None
    return committed(token, {"topic": name, "extended": result["extended"],
                             "deadlines": result["deadlines"], "skipped": _skipped(result)})
