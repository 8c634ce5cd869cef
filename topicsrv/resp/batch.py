"""Coalescing: a run of plain `XADD key * field value ...` to one key, parsed from one read,
goes to the engine as ONE write (one journal call, one listener wake-up); a run of plain SETs
is one keyspace operation, a run of GETs skips the per-command dispatch (Rules 7-9, below).

Rule 1: only the plain form `XADD key * field value ...` coalesces, as the XADD parser
defines it (commands/stream_args.plain_pairs, the fast path of parse_xadd): any other
command, another key or an option ends the run. A plain XADD alone (a run of one: every P1
request) takes the same path, as a plain SET or GET does (Rule 10): the XADD handler's option
parsing, its NOMKSTREAM/IDMP/trim branches and its keyspace events are moot for the plain
form under the guards of Rule 9.
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
from typing import Any, Final

from topicsrv.engine.keyspace import strings
from topicsrv.engine.log.records import PreparedRecord, prepare_fields
from topicsrv.errors import TopicsError
from topicsrv.resp import acl, ids
from topicsrv.resp.commands.base import CommandContext, Err, Pending, Simple
from topicsrv.resp.commands.stream_args import plain_pairs
from topicsrv.resp.dispatch import BIG_ARGV, count_call, execute, internal_error

MAX_RUN: Final = 1000
OK: Final = Simple("OK")


def argv_lists(queued: list[tuple[bytes, ...]]) -> list[list[bytes]]:
    """EXEC's queue (tuples: resp/multi.py Rule 5) as the argv lists the dispatcher takes.
    Here because this module is compiled: the same comprehension interpreted was a fifth of a
    300,000-command EXEC's stall (issue 23 item 7)."""
    return [list(a) for a in queued]


def _plain(argv: list[bytes], key: bytes) -> list[bytes] | None:
    """The field/value pairs if argv is a plain XADD to `key` (Rule 1), else None."""
    if not 2 <= len(argv) <= BIG_ARGV or argv[1] != key or not (
            argv[0] == b"XADD" or argv[0] == b"xadd" or argv[0].lower() == b"xadd"):
        return None
    return plain_pairs(argv, 1)


def run_xadds(ctx: CommandContext, cmds: list[list[bytes]], i: int) -> list[Any] | None:
    """Replies for the run of plain XADDs starting at cmds[i] (one or more), or None (not a
    plain XADD, or a guard says no)."""
    first = cmds[i]
    if len(first) < 5 or not plain_client(ctx):
        return None  # each XADD on its own (Rules 4 and 9)
    key = first[1]
    end = min(len(cmds), i + MAX_RUN)
    run: list[list[bytes]] = []
    for j in range(i, end):
        pairs = _plain(cmds[j], key)
        if pairs is None:
            break
        run.append(pairs)
    if not run:
        return None
    if over_memory(ctx, cmds[i:i + len(run)]):
        return None  # each XADD is refused on its own (-OOM)
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
            result, token = ctx.server.engine.write(key.decode("latin-1"), recs, lean=True)
        except TopicsError:  # nothing applied (Rule 3)
            return [execute(ctx, argv) for argv in argvs]
        ts, seq = result["ts"], result["first_seq"]
        planned = result.get("xids")  # an ID-mapped topic (engine/log/xids.py)
        for k, slot in enumerate(slots):
            reply = b"%d-%d" % planned[k] if planned else ids.format_id(ts, seq)
            replies[slot] = reply if token is None else Pending(token, reply)
            seq += 1
    account(ctx, "xadd", len(run), t0, len(run) - len(slots))
    return replies



# ---- SET / GET runs (the string part) ------------------------------------------------------
#
# Rule 7: a run of plain `SET key value` (no option) from one read is ONE keyspace operation:
# one journal frame (an MSET of the run's pairs, applied in order, so a key set twice keeps
# its last value), one commit token shared by the replies, each `+OK` on its own. The run is
# all or nothing: a crash keeps the whole frame or none of it, and a write storage refuses
# (nothing applied) runs command by command instead (Rule 3). WATCH sees every key (the
# operation notifies each change), a SET over a topic replaces it as alone (strings.put).
# Rule 8: a run of `GET key` answers each from the keyspace in order (its value, nil, or its
# own WRONGTYPE), skipping only the dispatcher's per-command checks.
# Rule 10: a plain SET or GET alone (a run of one: every P1 request) takes the same path: the
# dispatcher's checks it skips are the ones the guards of Rule 9 make moot, and the SET
# handler's option parsing and type lookup are not needed for `SET key value` (strings.put
# replaces a topic itself).
# Rule 9: the guards of Rules 4 and 6 apply to all three runs (`plain_client`,
# `over_memory`), and a BUSY script stops them, XADD runs included (a run written past the
# threshold would land in the middle of the script); keyspace notifications on (Redis's `m`,
# `$` and `t` events) disable them.


def _run_of(cmds: list[list[bytes]], i: int, lower: bytes, upper: bytes, argc: int) -> int:
    """How many commands from cmds[i] are `<name> ...` with exactly `argc` arguments."""
    end = min(len(cmds), i + MAX_RUN)
    j = i
    while j < end:
        argv = cmds[j]
        if len(argv) != argc:
            break
        name = argv[0]
        if name != upper and name != lower and name.lower() != lower:
            break
        j += 1
    return j - i


def plain_client(ctx: CommandContext) -> bool:
    """Rules 4 and 9: a client whose commands the dispatcher would check one by one (NOAUTH,
    NOPERM, subscribed mode, keyspace events, a BUSY script) never coalesces."""
    client = ctx.client
    server = ctx.server
    repl = server.repl
    return client.authenticated and client.user == acl.DEFAULT and client.pubsub is None and \
        not server.bus.keyspace.flags and server.busy is None and repl.master is None and \
        not repl.min_replicas_to_write and not repl.min_replicas_to_ack


def over_memory(ctx: CommandContext, run: list[list[bytes]]) -> bool:
    """Rule 6: the run's bytes counted once against --max-memory."""
    memory = ctx.server.memory
    return bool(memory.limit) and memory.over(sum(len(a) for argv in run for a in argv))


def run_strings(ctx: CommandContext, cmds: list[list[bytes]], i: int) -> list[Any] | None:
    """Replies for the run of plain SETs or GETs starting at cmds[i] (Rules 7-10), or None
    (not a plain SET or GET, or a guard says no)."""
    argv = cmds[i]
    argc = len(argv)
    if argc == 3:
        n = _run_of(cmds, i, b"set", b"SET", 3)
    elif argc == 2:
        n = _run_of(cmds, i, b"get", b"GET", 2)
    else:
        return None
    if n == 0 or not plain_client(ctx):
        return None
    run = cmds[i:i + n]
    if argc == 3 and over_memory(ctx, run):
        return None  # each SET is refused on its own (-OOM)
    try:
        return _sets(ctx, run) if argc == 3 else _gets(ctx, run)
    except Exception:
        err = internal_error(ctx.front, "a coalesced SET/GET run")
        return [err] * n


def account(ctx: CommandContext, name: str, n: int, t0: float, failed: int) -> None:
    """Rule 4: n commands counted as if run alone, each observed with an equal share of the
    run's time."""
    dt = perf_counter() - t0
    ctx.front.stats.total_commands += n
    ctx.client.last_cmd = name
    ctx.server.metrics.resp_latency.observe(name, dt / n, n)
    count_call(ctx.front, name, dt, n, failed)


def _sets(ctx: CommandContext, run: list[list[bytes]]) -> list[Any]:
    t0 = perf_counter()
    ks = ctx.engine.keyspace
    pairs = [(argv[1].decode("latin-1"), argv[2]) for argv in run]
    if ks.expiry.deadlines:  # a due key expires first (counted, journaled) as SET's lookup does
        now = ks.clock.now_ms()
        for name, _ in pairs:
            ks.expire_if_due(name, now)
    try:
        token = strings.put(ks, pairs)
    except TopicsError:  # storage refused it (Rule 7)
        return [execute(ctx, argv) for argv in run]
    n = len(run)
    ks.stats["string_writes"] += n - 1  # one per SET, as when run alone
    reply: Any = OK if token is None else Pending(token, OK)
    account(ctx, "set", n, t0, 0)
    return [reply] * n


def _gets(ctx: CommandContext, run: list[list[bytes]]) -> list[Any]:
    t0 = perf_counter()
    replies = ctx.engine.keyspace.get_many([argv[1].decode("latin-1") for argv in run])
    failed = misses = 0
    for k, reply in enumerate(replies):
        if reply is None:
            misses += 1
        elif type(reply) is TopicsError:
            replies[k] = Err(reply.resp_line())
            failed += 1
    stats = ctx.front.stats  # INFO keyspace_hits / misses (commands/strings.py Rule 4)
    stats.keyspace_misses += misses
    stats.keyspace_hits += len(run) - misses
    account(ctx, "get", len(run), t0, failed)
    return replies
