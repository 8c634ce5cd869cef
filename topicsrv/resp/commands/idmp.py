"""Idempotent XADD (Redis 8.6): XCFGSET and the XINFO STREAM idmp fields. `XADD ... IDMP pid
iid | IDMPAUTO pid` itself is parsed in stream_args.py and goes to Engine.write (`idmp`), on the
topic's idempotency table (engine/log/idempotency.py), the one HTTP idempotency keys use.

Rule 1: XCFGSET parses its options before it looks at the key, with Redis's texts: no option
  `ERR At least one parameter (IDMP-DURATION or IDMP-MAXSIZE) is required`, an option without
  a value or an unknown one `ERR syntax error`, a bad number `ERR value is not an integer or
  out of range`, then the ranges (1..86400 seconds, 1..10000 iids), then `ERR no such key`.
Rule 2: a changed value clears every producer's map (Redis); the new settings are journaled
  (a T_IDMP frame, fsync-gated) before the reply, so they survive a crash.
Rule 3: XINFO STREAM (and FULL) reports `idmp-duration`, `idmp-maxsize`, `pids-tracked`,
  `iids-tracked` (live RESP entries after expiry), `iids-added`, `iids-duplicates` (lifetime
  counters) after `recorded-first-entry-id`, as Redis 8.6 does, once the stream used IDMP (an
  IDMP/IDMPAUTO XADD, or XCFGSET away from the defaults). A stream that never did answers as
  Redis 7.0 (9 fields; what Valkey's `XINFO FULL output` and clients that count fields
  expect of the version we report, docs/redis-compatibility.md).
"""

from __future__ import annotations

from typing import Any

from topicsrv.engine.log import idempotency as idem
from topicsrv.engine.log.topic import Topic
from topicsrv.resp.commands.base import (
    SYNTAX,
    CommandContext,
    Err,
    Simple,
    committed,
    key_name,
    parse_int,
)
from topicsrv.resp.commands.base import command as _command

NO_PARAMETER = "ERR At least one parameter (IDMP-DURATION or IDMP-MAXSIZE) is required"
DURATION_RANGE = f"ERR IDMP-DURATION must be between 1 and {idem.DURATION_MAX} seconds"
MAXSIZE_RANGE = f"ERR IDMP-MAXSIZE must be between 1 and {idem.MAXSIZE_MAX} entries"


def parse_xcfgset(args: list[bytes]) -> tuple[int | None, int | None]:
    """`key [IDMP-DURATION seconds] [IDMP-MAXSIZE n]` -> (duration, maxsize) (Rule 1)."""
    if len(args) < 2:
        raise Err(NO_PARAMETER)
    duration: int | None = None
    maxsize: int | None = None
    i = 1
    while i < len(args):
        opt = args[i].lower()
        if opt not in (b"idmp-duration", b"idmp-maxsize") or i + 1 >= len(args):
            raise Err(SYNTAX)
        value = parse_int(args[i + 1])
        if opt == b"idmp-duration":
            if not 1 <= value <= idem.DURATION_MAX:
                raise Err(DURATION_RANGE)
            duration = value
        else:
            if not 1 <= value <= idem.MAXSIZE_MAX:
                raise Err(MAXSIZE_RANGE)
            maxsize = value
        i += 2
    return duration, maxsize


@_command("xcfgset", -2, ["write", "denyoom", "fast"], 1, 1, 1, "stream",
          "Sets the IDMP configuration parameters for a stream.", "8.6.0",
          syntax="key:key [IDMP-DURATION:duration:integer] [IDMP-MAXSIZE:maxsize:integer]",
          complexity="O(1)")
def xcfgset(ctx: CommandContext, args: list[bytes]) -> Any:
    duration, maxsize = parse_xcfgset(args)
    topic = ctx.engine.find(key_name(args[0]))
    if topic is None:
        raise Err("ERR no such key")
    token = ctx.engine.idmp_configure(topic, duration, maxsize)
    return committed(token, Simple("OK"))


def idmp_fields(ctx: CommandContext, topic: Topic) -> dict[str, Any]:
    """The XINFO STREAM idmp fields (Rule 3): none until the stream used IDMP."""
    table = topic.idempotency
    if not table.added and (table.duration_s, table.maxsize) == (idem.DURATION_DEFAULT,
                                                                  idem.MAXSIZE_DEFAULT):
        return {}
    pids, iids = table.stats(ctx.engine.now())
    return {"idmp-duration": table.duration_s, "idmp-maxsize": table.maxsize, "pids-tracked": pids,
            "iids-tracked": iids, "iids-added": table.added, "iids-duplicates": table.duplicates}
