"""XADD coalescing: a run of plain `XADD key * field value ...` to one key, parsed from one
read, goes to the engine as ONE write (one journal call, one listener wake-up).

Rule 1: only the plain form coalesces (argv[2] is `*`: no NOMKSTREAM/MAXLEN/MINID/NODE/TAG,
an even number of field/value items); any other command, another key or an option ends the
run, and a run of one is left to the ordinary dispatcher.
Rule 2: every command still gets its own reply, in order: the id of its record, or the error
its own XADD would have replied (records are prepared one by one first; a bad one is
answered and left out, never failing its neighbours).
Rule 3: the write is atomic: if the engine refuses the batch as a whole (name, limits,
storage), nothing was applied and the run is executed command by command instead, so each
gets exactly the reply it would get alone.
Rule 4: bookkeeping is as for single commands: total_commands, last_cmd, NOAUTH (an
unauthenticated client never coalesces).
Rule 5: an XADD with more than dispatch.BIG_ARGV arguments never coalesces (it takes the
dispatcher's fair path); an unexpected exception answers every command of the run with
`ERR internal error (logged)`, as the dispatcher would (dispatch Rule 2).
"""

from __future__ import annotations

from typing import Any

from topicsrv.engine.records import PreparedRecord, prepare_fields
from topicsrv.errors import TopicsError
from topicsrv.resp import ids
from topicsrv.resp.commands.base import CommandContext, Err, Pending
from topicsrv.resp.dispatch import BIG_ARGV, execute, internal_error

MAX_RUN = 1000


def _plain(argv: list[bytes], key: bytes) -> bool:
    n = len(argv)
    return 5 <= n <= BIG_ARGV and n & 1 == 1 and argv[2] == b"*" and argv[1] == key \
        and (argv[0] == b"XADD" or argv[0] == b"xadd" or argv[0].lower() == b"xadd")


def run_xadds(ctx: CommandContext, cmds: list[list[bytes]], i: int) -> list[Any] | None:
    """Replies for the run of plain XADDs starting at cmds[i], or None (not a run of >= 2)."""
    first = cmds[i]
    key = first[1]
    if not _plain(first, key) or not ctx.client.authenticated or ctx.server.memory.limit:
        return None  # (under a memory limit every XADD is admitted on its own)
    end = min(len(cmds), i + MAX_RUN)
    j = i + 1
    while j < end and _plain(cmds[j], key):
        j += 1
    if j - i < 2:
        return None
    try:
        return _run(ctx, cmds, i, j)
    except Exception:
        err = internal_error(ctx.front, "a coalesced XADD run")
        return [err] * (j - i)


def _run(ctx: CommandContext, cmds: list[list[bytes]], i: int, j: int) -> list[Any]:
    key = cmds[i][1]
    replies: list[Any] = [None] * (j - i)
    recs: list[PreparedRecord] = []
    slots: list[int] = []
    for k in range(i, j):
        try:
            recs.append(prepare_fields(cmds[k][3:]))
            slots.append(k - i)
        except Err as e:
            replies[k - i] = e
        except TopicsError as e:
            replies[k - i] = Err(e.resp_line())
    if recs:
        try:
            result, token = ctx.server.engine.write(key.decode("latin-1"), recs)
        except TopicsError:
            return [execute(ctx, cmds[k]) for k in range(i, j)]  # nothing applied (Rule 3)
        ts, seq = result["ts"], result["first_seq"]
        for slot in slots:
            reply = ids.format_id(ts, seq)
            replies[slot] = reply if token is None else Pending(token, reply)
            seq += 1
    ctx.front.stats.total_commands += j - i
    ctx.client.last_cmd = "xadd"
    return replies
