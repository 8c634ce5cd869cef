"""Command dispatch: one argv -> one reply value (or an awaitable for a blocking command).

Sans-IO: the session (topicsrv/resp/session.py) calls `execute` for each command and
encodes what it returns; nothing here encodes, sends or waits.

Rule 1: checks run in redis-server's order: POST/Host: (Rule 3), unknown command,
authentication (NOAUTH), unknown subcommand, arity, the user's permissions (NOPERM,
topicsrv/resp/acl.py); then the handler parses its own arguments.
Rule 2: every failure becomes an error REPLY: `Err` as is, `TopicsError` via its RESP prefix,
anything unexpected (a bug: in a handler, in encoding its reply, in a commit wait) as
`ERR internal error (logged)` with the traceback in the server log. A client never sees a
traceback, the connection stays open, and no command can end the process.
Rule 3 (cross-protocol scripting, as redis-server's processCommand): a command named `POST`
or `Host:` (any case) is an HTTP request sent to the RESP port: it is not answered, nothing
after it runs, the connection closes, and a warning is logged (at most once a minute); the
same for a TLS handshake or a NUL in an inline line (`security_attack`, protocol.py Rule 4).
Rule 4 (no reply past the output limit): a single reply larger than `client_output_limit`
is replaced by an `-ERR` saying so, the connection staying open (`emit` in session.py); the
commands that can produce one bound their output first (replysize.py): this is the backstop.
Rule 5 (fairness): a command with more than BIG_ARGV arguments gets scheduler turns of its
own before it runs and before its reply is encoded (topicsrv/resp/session.py Rule 5).
Rule 6: over `--max-memory`, a command flagged `denyoom` (inside MULTI: any command queued, as
Redis) is refused after the arity check with Redis's `-OOM` text, before its handler runs
(topicsrv/memory.py); a MemoryError is `-OOM` too. A script's own commands are checked by
the script bridge instead (Redis's scriptVerifyOOM: `allow-oom`, first write only,
topicsrv/resp/commands/scripts.py), and a script's shebang flags by its handler (`Refused`).
Rule 7 (MULTI, topicsrv/resp/multi.py Rule 1): inside MULTI a command that passes the checks
of Rule 1 and Rule 6 is queued (`+QUEUED`) instead of run, and one refused by them (or flagged
`no_multi`, as SHUTDOWN: Redis's "Command not allowed inside a transaction") aborts the
transaction; inside EXEC (`nowait`) a blocking command that would wait is closed unstarted
and answers the null array, its timeout reply (Redis runs blocking commands in MULTI as
non-blocking); a wait that offers `nowait()` (WAIT) answers that instead.
Rule 9 (busy script, topicsrv/scripting/runner.py Rule 2): while a script runs past
busy-reply-threshold, every command not flagged `allow_busy` answers the BUSY text, but the
script's own (`client.script`).
Rule 8: a command that reaches its handler has its latency observed in
`ctx.server.metrics.resp_latency` under its spec name (`xadd`, `xinfo|stream`): the handler's
time, and for an async handler (a blocking read, a commit wait) until its reply is ready. Commands
refused before the handler (unknown, NOAUTH, arity, queued in MULTI) are not observed.
Rule 9 (pub/sub, topicsrv/resp/commands/pubsub.py): a RESP2 client subscribed to anything
may run only SUBSCRIBED_MODE; anything else that passes Rule 1 and Rule 6 is refused with
redis-server's text, after the OOM check and before MULTI queueing, as processCommand does.
Rule 10 (INFO commandstats, `front.cmdstats`, as redis-server's call()/rejectCommand): a
command whose handler ran counts one call and its time (a blocking one when it is done), and
a failed call when it answered an error; a known command refused before its handler (NOAUTH,
arity, NOPERM, BUSY, OOM, subscribed mode, not allowed in MULTI) or by it (`Refused`) counts
a rejected call; an unknown command or subcommand and a command queued by MULTI count nothing
(EXEC counts each queued command when it runs).
Rule 11 (replication, resp/commands/replication.py): on a replica a command flagged `write`
answers `-READONLY` (a script's own included, as on redis-server), and on a primary short of
`min-replicas-to-write` good replicas `-NOREPLICAS`, after the BUSY check; inside MULTI the
refusal aborts the transaction, as Redis's. With `--min-replicas-to-ack N` the reply of a
command that fed the replication backlog waits for N replicas' acknowledgements
(repl/primary.py Rule 6).
Rule 12 (the command table, by name as sent): a command without subcommands is found by the
bytes its client sent (`GET`, `get`) in a dict of the names met, at most _SPECS_MAX of them,
before `lookup` decodes and lowers the name. The table is complete once the command modules
are loaded (nothing registers or renames a command later); a spec's fields may change (a
test's handler), the spec object found stays the same.
Rule 13 (one way to a handler): `invoke` runs a handler once its checks passed, for this
dispatcher and for the `redis.call` bridge (resp/commands/scripts.py Rule 1), which makes the
checks a script's call needs itself and comes here for the rest: latency, commandstats and
errors as replies are counted in one place.
"""

from __future__ import annotations

import inspect
import logging
import time
from time import perf_counter
from types import GeneratorType
from typing import Any, Final

from topicsrv.engine.journal import all_of
from topicsrv.errors import TopicsError
from topicsrv.memory import oom_error
from topicsrv.repl.primary import AckToken
from topicsrv.resp import acl
from topicsrv.resp.commands.base import (
    NO_REPLY,
    NULL_ARRAY,
    CommandContext,
    CommandSpec,
    Err,
    Front,
    Pending,
    Refused,
    lookup,
    quote_bytes,
    unknown_subcommand,
    wrong_args,
)
from topicsrv.resp.multi import NOT_QUEUED, QUEUED, ExecReply, Tx

log: Final = logging.getLogger("topicsrv.resp")

NO_AUTH: Final = frozenset({"auth", "hello", "quit", "reset"})
# what a RESP2 client in subscribed mode may run (Rule 9)
SUBSCRIBED_MODE: Final = frozenset({"subscribe", "ssubscribe", "psubscribe", "unsubscribe",
                             "sunsubscribe", "punsubscribe", "ping", "quit", "reset"})
INTERNAL_ERROR: Final = "ERR internal error (logged)"
BIG_ARGV: Final = 4096  # more arguments than this: the command gets scheduler turns of its own
SECURITY_WORDS: Final = frozenset({b"post", b"host:"})
SECURITY_LOG_EVERY: Final = 60.0
SECURITY_WARNING: Final = (
    "Possible SECURITY ATTACK detected. It looks like somebody is sending POST or Host: "
    "commands to Redis. This is likely due to an attacker attempting to use Cross Protocol "
    "Scripting to compromise your Redis instance. Connection aborted."
)


_NOT_AWAITABLE: Final[set[type]] = set()  # reply types seen not to be awaitable (never a generator)
# Rule 12: a command's spec by its name as sent, for commands without subcommands
_SPECS: Final[dict[bytes, CommandSpec]] = {}
_SPECS_MAX: Final = 1024


def find(argv: list[bytes]) -> tuple[CommandSpec | None, int]:
    """`lookup` (commands/base.py), remembering the spec of a command without subcommands
    under its name as sent (Rule 12)."""
    name = argv[0]
    spec = _SPECS.get(name)
    if spec is not None:
        return spec, 1
    spec, used = lookup(argv)
    if spec is not None and used == 1 and not spec.subcommands and len(_SPECS) < _SPECS_MAX:
        _SPECS[name] = spec
    return spec, used


def is_awaitable(value: object) -> bool:
    """`inspect.isawaitable`, remembering by type the answer for the reply types that are not
    awaitable (whether a type is awaitable does not change; only a generator's answer
    depends on the instance). Called twice per command: the ABC check it saves was 5-10% of
    a PING (docs/performance.md, "Compiled hot path")."""
    t = type(value)
    if t in _NOT_AWAITABLE:
        return False
    if inspect.isawaitable(value):
        return True
    if t is not GeneratorType:
        _NOT_AWAITABLE.add(t)
    return False


def internal_error(front: Front, what: str) -> Err:
    """Count and log (with its traceback) the exception being handled; the reply for it."""
    front.stats.unexpected_errors += 1
    log.exception("%s failed (replied %r)", what, INTERNAL_ERROR)
    return Err(INTERNAL_ERROR)


def error_reply(e: TopicsError) -> Err:
    """A TopicsError as a RESP error. A refused key name is shown readably: keys are bytes
    on the wire and reach the engine latin-1 decoded, so the engine's repr() of the name would
    show UTF-8 as mojibake; it is re-rendered from the bytes (UTF-8, `\\xHH` for the rest)."""
    if e.code == "invalid_topic_name" and e.detail and isinstance(e.detail.get("topic"), str):
        name: str = e.detail["topic"]
        try:
            raw = name.encode("latin-1")
        except UnicodeEncodeError:
            return Err(e.resp_line())
        text = e.message.replace(repr(name), quote_bytes(raw), 1)
        return Err(f"{e.resp_prefix} {text}")
    return Err(e.resp_line())


def security_attack(ctx: CommandContext, what: str = "") -> None:
    """Count a cross-protocol attack (Rule 3; protocol.py Rule 4: `what` says which) and log it,
    at most once every SECURITY_LOG_EVERY seconds per front; the client closes."""
    front, client = ctx.front, ctx.client
    front.stats.security_attacks += 1
    client.close_after_reply = True
    now = time.monotonic()
    if now - front.security_logged_at > SECURITY_LOG_EVERY:
        front.security_logged_at = now
        text = f"Possible SECURITY ATTACK detected: {what}. Connection aborted." if what else \
            SECURITY_WARNING
        log.warning("%s (client %d, %s)", text, client.id, client.addr)


def _security_warning(ctx: CommandContext) -> Any:
    security_attack(ctx)
    return NO_REPLY


def _text(b: bytes) -> str:
    return b.decode("utf-8", "surrogateescape")


def unknown_command(argv: list[bytes]) -> Err:
    args = ""
    for a in argv[1:]:
        if len(args) >= 128:
            break
        args += f"'{_text(a[: 128 - len(args)])}' "
    return Err(f"ERR unknown command '{_text(argv[0][:128])}', with args beginning with: {args}")


def execute(ctx: CommandContext, argv: list[bytes], nowait: bool = False) -> Any:
    """Run one command; returns a reply value or an awaitable (async handlers). `nowait`
    (inside EXEC): a blocking command that would wait answers its timeout reply instead
    (Rule 7). Never raises (Rule 2)."""
    try:
        if 4 <= len(argv[0]) <= 5 and argv[0].lower() in SECURITY_WORDS:
            return _security_warning(ctx)
        return _execute(ctx, argv, nowait)
    except Exception:
        return internal_error(ctx.front, f"command {_text(argv[0][:64])!r}")


def _refuse(tx: Tx | None, err: Err) -> Err:
    """A command refused before it runs; inside MULTI it aborts the transaction (Rule 7)."""
    if tx is not None and tx.multi:
        tx.aborted = True
    return err


def count_call(front: Front, name: str, seconds: float, n: int, failed: int) -> None:
    """INFO commandstats: `n` calls of `name` that took `seconds` in all, `failed` of them
    answered an error (Rule 10)."""
    st = front.cmdstats.get(name)
    if st is None:
        st = front.cmdstats[name] = [0.0, 0.0, 0.0, 0.0]
    st[0] += n
    st[1] += seconds
    st[3] += failed


def count_rejected(front: Front, name: str) -> None:
    """INFO commandstats: one rejected call of `name` (Rule 10)."""
    st = front.cmdstats.get(name)
    if st is None:
        st = front.cmdstats[name] = [0.0, 0.0, 0.0, 0.0]
    st[2] += 1


def _reject(front: Front, name: str, tx: Tx | None, err: Err) -> Err:
    """A known command refused before its handler: a rejected call (Rule 10). A refused EXEC
    ends the transaction with `EXECABORT ... because of: <the refusal>` (redis-server's
    rejectCommand -> execCommandAbort: a BUSY script never sees half a transaction)."""
    count_rejected(front, name)
    if name == "exec" and tx is not None and tx.multi:
        tx.end()
        text = err.text[4:] if err.text.startswith("ERR ") else err.text  # Redis's texts built
        return Err(f"EXECABORT Transaction discarded because of: {text}")  # without a code
    return _refuse(tx, err)


def _execute(ctx: CommandContext, argv: list[bytes], nowait: bool) -> Any:
    front = ctx.front
    front.stats.total_commands += 1
    spec, used = find(argv)
    client = ctx.client
    tx = client.tx
    if spec is None:
        return _refuse(tx, unknown_command(argv))
    base = spec.name.partition("|")[0]
    if not client.authenticated and base not in NO_AUTH:
        return _reject(front, spec.name, tx, Err("NOAUTH Authentication required."))
    if spec.subcommands and used == 1 and (len(argv) > 1 or spec.handler is None):
        if len(argv) == 1:
            return _reject(front, spec.name, tx, wrong_args(spec.name))
        return _refuse(tx, unknown_subcommand(spec.name, argv[1]))
    n = len(argv)
    if (spec.arity > 0 and n != spec.arity) or n < -spec.arity:
        return _reject(front, spec.name, tx, wrong_args(spec.name))
    if client.user != acl.DEFAULT and not acl.permitted(client.user, spec):
        return _reject(front, spec.name, tx, Err(acl.noperm(spec)))
    busy = ctx.server.busy
    if busy is not None and "allow_busy" not in spec.flags and not client.script:
        return _reject(front, spec.name, tx, Err(busy))
    if "write" in spec.flags:  # Rule 11
        refusal = write_refused(ctx)
        if refusal is not None:
            return _reject(front, spec.name, tx, Err(refusal))
    client.last_cmd = spec.name
    memory = ctx.server.memory
    if memory.limit and not client.script and ("denyoom" in spec.flags or tx is not None
                                               and tx.multi and base not in NOT_QUEUED) \
            and memory.over(sum(map(len, argv))):
        return _reject(front, spec.name, tx, Err(oom_error().resp_line()))
    if client.pubsub is not None and client.protocol == 2 and base not in SUBSCRIBED_MODE \
            and client.subscribed():
        return _reject(front, spec.name, tx, Err(f"ERR Can't execute '{spec.name}': only (P|S)SUBSCRIBE / "
                               "(P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this "
                               "context"))
    if tx is not None:
        if tx.multi and base not in NOT_QUEUED:
            if "no_multi" in spec.flags:
                return _reject(front, spec.name, tx, Err("ERR Command not allowed inside a transaction"))
            full = tx.queue(argv, "denyoom" in spec.flags)
            return QUEUED if full is None else Err(full)
        if base == "reset":
            tx.end()
            client.tx = None
    return invoke(ctx, spec, argv[used:], tx, nowait)


def write_refused(ctx: CommandContext) -> str | None:
    """Rule 11: the error a write gets on this server now (READONLY, NOREPLICAS), or None;
    the usual server, a primary without min-replicas-to-write, answers without a call."""
    repl = ctx.server.repl
    if repl.master is None and not repl.min_replicas_to_write:
        return None
    from topicsrv.resp.commands.replication import write_refusal  # it imports this module

    return write_refusal(ctx)


def invoke(ctx: CommandContext, spec: CommandSpec, args: list[bytes], tx: Tx | None,
           nowait: bool) -> Any:
    """Rule 13: run `spec`'s handler on `args` (the arguments after the command's name) once
    every check passed: its reply (errors as replies, Rule 2), latency and commandstats
    counted (Rules 8, 10), synchronous replication waited for (Rule 11)."""
    front = ctx.front
    client = ctx.client
    handler = spec.handler
    assert handler is not None
    t0 = perf_counter()
    sync_acks = ctx.server.repl.min_replicas_to_ack
    fed = ctx.server.primary.offset if sync_acks else 0
    try:
        result = handler(ctx, args)
    except Refused as e:
        return _reject(front, spec.name, tx, Err(e.text))
    except Err as e:
        result = e
    except TopicsError as e:
        result = error_reply(e)
    except MemoryError:
        log.error("command %s ran out of memory", spec.name)
        result = Err(oom_error().resp_line())
    except Exception:
        result = internal_error(front, f"command {spec.name}")
    else:
        if spec.is_async or is_awaitable(result):
            if nowait and ("blocking" in spec.flags or hasattr(result, "nowait")):
                now = getattr(result, "nowait", None)  # WAIT's count (repl/primary.py AckWait)
                close = getattr(result, "close", None)  # a coroutine, or a waiting Block
                if close is not None:
                    close()
                result = NULL_ARRAY if now is None else now()
            else:
                guarded = getattr(result, "guarded", None)
                if guarded is not None:  # a Block counts its call when it ends (resp/blocked.py)
                    return guarded(ctx, spec.name, t0)
                from topicsrv.resp.awaits import guard  # awaits imports this module

                return guard(result, ctx, spec.name, t0)
    dt = perf_counter() - t0
    ctx.server.metrics.resp_latency.observe(spec.name, dt)
    count_call(front, spec.name, dt, 1, 1 if isinstance(result, Err) else 0)
    if sync_acks and not nowait and not client.script and ctx.server.primary.offset > fed \
            and ctx.server.repl.master is None:  # Rule 11: synchronous replication
        result = _after_acks(ctx, result, sync_acks)
    return result


def _after_acks(ctx: CommandContext, reply: Any, n: int) -> Any:
    """Rule 11: `reply` goes out once n replicas acknowledged everything fed so far (EXEC's:
    each element waits, as each waits for its own commit)."""
    primary = ctx.server.primary
    ack = AckToken(primary, n, primary.offset)

    def one(r: Any) -> Any:
        if isinstance(r, Err):
            return r
        if isinstance(r, Pending):
            return Pending(all_of([r.token, ack]), r.reply)
        return Pending(ack, r)

    if type(reply) is ExecReply:
        return ExecReply([one(r) for r in reply])
    return one(reply)

