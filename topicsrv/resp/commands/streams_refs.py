"""Redis 8.2's reference-aware deletes: XDELEX and XACKDEL (`KEEPREF | DELREF | ACKED`).

Rule 1: every argument is parsed (Redis's texts: `Number of IDs must be a positive integer`,
  `The `numids` parameter must match the number of arguments`, `syntax error`, invalid IDs)
  before the key is looked up; a missing key (XACKDEL: or group) answers -1 per ID.
Rule 2: the delete itself is `Engine.delete_refs` (engine/groups/grouprefs.py): records go through
  the same journaled, silent delete as XDEL (no tombstone), the PEL changes (the ack, DELREF)
  as XACK's do.
Rule 3: the `IDS numids id...` block and the policy may come in either order; the policy at
  most once.
"""

from __future__ import annotations

from typing import Any

from topicsrv.engine import groups as eg
from topicsrv.engine.groups import grouprefs
from topicsrv.resp import ids
from topicsrv.resp.args import Args
from topicsrv.resp.commands.base import CommandContext, Err, committed, key_name, parse_int
from topicsrv.resp.commands.group_args import command, stream, text

NUMIDS = "ERR Number of IDs must be a positive integer"
NUMIDS_MISMATCH = "ERR The `numids` parameter must match the number of arguments"


def parse_ref_args(args: list[bytes], start: int) -> tuple[str, list[bytes]]:
    """`[KEEPREF | DELREF | ACKED] IDS numids id...` from args[start]: (policy, raw IDs)."""
    policy: bytes | None = None
    raw: list[bytes] | None = None
    a = Args(args, start)
    while a:
        if raw is None and a.option(b"ids"):
            n = parse_int(a.next(), NUMIDS)
            if n < 1:
                raise Err(NUMIDS)
            if n > a.remaining:
                raise Err(NUMIDS_MISMATCH)
            raw = [a.next() for _ in range(n)]
        elif policy is None and (p := a.flag(b"keepref", b"delref", b"acked")):
            policy = p
        else:
            raise a.syntax_error()
    if raw is None:
        raise a.syntax_error()
    for r in raw:  # every ID is validated before anything is touched
        ids.parse_id(r, 0)
    return (policy or b"keepref").decode(), raw


def _run(ctx: CommandContext, key: bytes, policy: str, raw: list[bytes],
         group: eg.Group | None) -> Any:
    name = key_name(key)
    topic = ctx.engine.find(name)
    assert topic is not None
    seqs = [ids.record_seq(r, topic) for r in raw]
    codes, token = ctx.engine.delete_refs(name, seqs, policy, group)
    return committed(token, codes)


@command("xdelex", -5, ["write", "fast"], 1, 1, 1,
         "Deletes one or multiple entries from the stream.",
         "key:key [(KEEPREF|DELREF|ACKED)] IDS:numids:integer id:string...", "8.2.0")
def xdelex(ctx: CommandContext, args: list[bytes]) -> Any:
    policy, raw = parse_ref_args(args, 1)
    if stream(ctx, args[0]) is None:
        return [grouprefs.NOT_FOUND] * len(raw)
    return _run(ctx, args[0], policy, raw, None)


@command("xackdel", -6, ["write", "fast"], 1, 1, 1,
         "Acknowledges and deletes one or multiple messages for a stream consumer group.",
         "key:key group:string [(KEEPREF|DELREF|ACKED)] IDS:numids:integer id:string...", "8.2.0")
def xackdel(ctx: CommandContext, args: list[bytes]) -> Any:
    policy, raw = parse_ref_args(args, 2)
    topic = stream(ctx, args[0])
    group = eg.find(topic, text(args[1]))
    if group is None:
        return [grouprefs.NOT_FOUND] * len(raw)
    return _run(ctx, args[0], policy, raw, group)
