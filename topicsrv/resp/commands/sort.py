"""SORT and SORT_RO (engine/keyspace/sort.py), and their keyspace notifications.

Rule 1 (arguments, as redis-server parses them, left to right): ASC, DESC, ALPHA, `LIMIT
offset count` (integers, else Redis's not-an-integer error), `BY pattern`, `GET pattern`
(repeatable), and for SORT only `STORE destination`; anything else, or an option missing its
arguments, is a syntax error, reported before the key is looked at.
Rule 2 (replies): an array of the rows (nil for a GET that found nothing); with STORE the
number of rows stored.
Rule 3 (notifications): with STORE, `sortstore` (class `l`) on the destination when rows were
stored (`new` first when it did not exist), `del` (class `g`) when none were and it existed.
"""

from __future__ import annotations

from typing import Any

from topicsrv.bus.keyspace import GENERIC, LIST, NEW, Notifications
from topicsrv.engine.keyspace import sort as ops
from topicsrv.resp.commands.base import (
    SYNTAX,
    CommandContext,
    Err,
    command,
    committed,
    key_name,
    looked_up,
    parse_int,
)
from topicsrv.resp.commands.keyevents_strings import Handler, _exists, _run, _wrap

_SYNTAX = ("key:key [BY pattern:pattern] [LIMIT offset:integer count:integer] "
           "[GET pattern:pattern...] [(ASC|DESC)] [ALPHA]")


def parse(args: list[bytes], readonly: bool, in_script: bool) -> ops.SortSpec:
    """Rule 1 (args[0] is the key)."""
    spec = ops.SortSpec(in_script=in_script)
    j, n = 1, len(args)
    while j < n:
        word = args[j].lower()
        left = n - j - 1
        if word == b"asc":
            spec.desc = False
        elif word == b"desc":
            spec.desc = True
        elif word == b"alpha":
            spec.alpha = True
        elif word == b"limit" and left >= 2:
            spec.offset, spec.count = parse_int(args[j + 1]), parse_int(args[j + 2])
            j += 2
        elif word == b"store" and left >= 1 and not readonly:
            spec.store = key_name(args[j + 1])
            j += 1
        elif word == b"by" and left >= 1:
            spec.by = args[j + 1]
            j += 1
        elif word == b"get" and left >= 1:
            spec.gets.append(args[j + 1])
            j += 1
        else:
            raise Err(SYNTAX)
        j += 1
    return spec


def _sort(ctx: CommandContext, args: list[bytes], readonly: bool) -> Any:
    spec = parse(args, readonly, ctx.client.script)
    ks = ctx.engine.keyspace
    name = key_name(args[0])
    looked_up(ctx, ks.kind(name) is not None)
    out, token = ops.result(ks, name, spec)
    return committed(token, out)


@command("sort", -2, ["write", "denyoom", "movablekeys"], 1, 1, 1, "generic",
         "Sort the elements in a list, set or sorted set, optionally storing the result",
         "1.0.0", syntax=_SYNTAX + " [STORE destination:key]")
def sort(ctx: CommandContext, args: list[bytes]) -> Any:
    return _sort(ctx, args, False)


@command("sort_ro", -2, ["readonly", "movablekeys"], 1, 1, 1, "generic",
         "Sort the elements in a list, set or sorted set. Read-only variant of SORT.", "7.0.0",
         syntax=_SYNTAX)
def sort_ro(ctx: CommandContext, args: list[bytes]) -> Any:
    return _sort(ctx, args, True)


def _fire(ctx: CommandContext, ks: Notifications, inner: Handler, args: list[bytes]) -> Any:
    """Rule 3."""
    try:
        dst = parse(args, False, ctx.client.script).store
    except Err:
        dst = None
    if dst is None:
        return inner(ctx, args)
    key = dst.encode("latin-1")
    existed = _exists(ctx, key) or dst in ctx.engine.topics
    reply, wrote = _run(ctx, inner, args)
    stored = reply.reply if hasattr(reply, "reply") else reply
    if type(reply) is Err:
        return reply
    if stored:
        if not existed:
            ks.notify(NEW, b"new", key)
        ks.notify(LIST, b"sortstore", key)
    elif existed and (wrote or not _exists(ctx, key)):
        ks.notify(GENERIC, b"del", key)
    return reply


_wrap("sort", _fire)
