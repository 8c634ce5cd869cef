"""XADD coalescing: a run of plain `XADD key * field value ...` to one key, parsed from one
read, goes to the engine as ONE write (one journal call, one listener wake-up).

Rule 1: only the plain form `XADD key * field value ...` coalesces, as the XADD parser
defines it (commands/stream_args.plain_pairs, the fast path of parse_xadd): any other
command, another key or an option ends the run, and a run of one is left to the ordinary
dispatcher.
Rule 2: every command still gets its own reply, in order: the id of its record, or the error
its own XADD would have replied (records are prepared one by one first; a bad one is
answered and left out, never failing its neighbours).
Rule 3: the write is atomic: if the engine refuses the batch as a whole (name, limits,
storage), nothing was applied and the run is executed command by command instead, so each
gets exactly the reply it would get alone.
Rule 4: bookkeeping is as for single commands: total_commands, last_cmd, NOAUTH and NOPERM
(an unauthenticated client, or one logged in as another user than `default`, never coalesces:
the dispatcher refuses each of its XADDs), and the `xadd` latency histogram (one observation
per XADD, each the run's time divided by its length), INFO commandstats (n calls, the refused
records as failed calls).
Rule 5: an XADD with more than dispatch.BIG_ARGV arguments never coalesces (it takes the
dispatcher's fair path); an unexpected exception answers every command of the run with
`ERR internal error (logged)`, as the dispatcher would (dispatch Rule 2).
Rule 6: under --max-memory the run is admitted as a whole (its bytes counted once); over the
limit it does not coalesce, so each XADD is refused on its own with -OOM.
"""

from __future__ import annotations

from time import perf_counter
from typing import Any

from topicsrv.engine.records import PreparedRecord, prepare_fields
from topicsrv.errors import TopicsError
from topicsrv.resp import acl, ids
from topicsrv.resp.commands.base import CommandContext, Err, Pending
from topicsrv.resp.commands.stream_args import plain_pairs
from topicsrv.resp.dispatch import BIG_ARGV, count_call, execute, internal_error

MAX_RUN = 1000


def _plain(argv: list[bytes], key: bytes) -> list[bytes] | None:
    """The field/value pairs if argv is a plain XADD to `key` (Rule 1), else None."""
    if not 2 <= len(argv) <= BIG_ARGV or argv[1] != key or not (
            argv[0] == b"XADD" or argv[0] == b"xadd" or argv[0].lower() == b"xadd"):
        return None
    return plain_pairs(argv, 1)


def run_xadds(ctx: CommandContext, cmds: list[list[bytes]], i: int) -> list[Any] | None:
    """Replies for the run of plain XADDs starting at cmds[i], or None (not a run of >= 2)."""
    first = cmds[i]
    client = ctx.client
    if len(first) < 5 or not client.authenticated or client.user != acl.DEFAULT or \
            client.pubsub is not None or ctx.server.bus.keyspace.flags:
        return None  # each XADD on its own: subscribed mode, keyspace events (keyevents.py)
    key = first[1]
    end = min(len(cmds), i + MAX_RUN)
    run: list[list[bytes]] = []
    for j in range(i, end):
        pairs = _plain(cmds[j], key)
        if pairs is None:
            break
        run.append(pairs)
    if len(run) < 2:
        return None
    memory = ctx.server.memory
    if memory.limit and memory.over(sum(len(a) for argv in cmds[i:i + len(run)] for a in argv)):
        return None  # over --max-memory: each XADD is refused on its own (-OOM)
    try:
        return _run(ctx, key, run, cmds[i:i + len(run)])
    except Exception:
        err = internal_error(ctx.front, "a coalesced XADD run")
        return [err] * len(run)


def _run(ctx: CommandContext, key: bytes, run: list[list[bytes]],
         argvs: list[list[bytes]]) -> list[Any]:
    t0 = perf_counter()
    replies: list[Any] = [None] * len(run)
    recs: list[PreparedRecord] = []
    slots: list[int] = []
    for k, pairs in enumerate(run):
        try:
            recs.append(prepare_fields(pairs))
            slots.append(k)
        except Err as e:
            replies[k] = e
        except TopicsError as e:
            replies[k] = Err(e.resp_line())
    if recs:
        try:
            result, token = ctx.server.engine.write(key.decode("latin-1"), recs)
        except TopicsError:  # nothing applied (Rule 3)
            return [execute(ctx, argv) for argv in argvs]
        ts, seq = result["ts"], result["first_seq"]
        planned = result.get("xids")  # an ID-mapped topic (engine/xids.py)
        for k, slot in enumerate(slots):
            reply = b"%d-%d" % planned[k] if planned else ids.format_id(ts, seq)
            replies[slot] = reply if token is None else Pending(token, reply)
            seq += 1
    n = len(run)
    ctx.front.stats.total_commands += n
    ctx.client.last_cmd = "xadd"
    # each XADD of the run is observed with an equal share of its time (Rule 4)
    dt = perf_counter() - t0
    ctx.server.metrics.resp_latency.observe("xadd", dt / n, n)
    count_call(ctx.front, "xadd", dt, n, n - len(slots))
    return replies

