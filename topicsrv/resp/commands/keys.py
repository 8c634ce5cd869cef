"""Keyspace commands: TYPE EXISTS DEL UNLINK KEYS SCAN over both kinds of key (a topic is a
`stream`, topicsrv/engine/keyspace holds the strings); expiry and RENAME/COPY are expire.py's.

Rule 1: DEL/UNLINK delete strings and whole topics (a topic as HTTP DELETE: readers of a
recreated topic get the `recreated` tombstone). The reply waits for the storage commit.
Rule 2: SCAN walks both kinds of key in one stable 64-bit hash order, its cursor an unsigned
64-bit integer (a hash; `0` = start/end): an iteration returns every key that exists
throughout it, even while others come and go (engine/keyspace/scanorder.py). An expired key
is never returned (keyspace Rule 3). KEYS lists in byte order.
Rule 3: patterns are Redis globs (`*`, `?`, `[a-z]`, `[^x]`, `\\` escapes), matched by
topicsrv/engine/glob.py in O(len(pattern) * len(name)): no pattern can stall the server.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from topicsrv.engine.glob import PatternTooLong, compile_glob
from topicsrv.engine.keyspace import strings as ops
from topicsrv.engine.keyspace.scanorder import U64
from topicsrv.resp.args import Args
from topicsrv.resp.commands.base import (
    CommandContext,
    Err,
    Simple,
    command,
    committed,
    key_name,
    kind_of,
)


def _cmd(name: str, arity: int, flags: list[str], first: int, last: int, summary: str,
         syntax: str, since: str = "1.0.0") -> Any:
    return command(name, arity, flags, first, last, 1 if first else 0, "generic", summary, since,
                   syntax=syntax)


def matcher(pattern: bytes) -> Callable[[bytes], bool]:
    """Redis's KEYS/SCAN: `*` alone is "every key"; anything else is a linear-time glob."""
    if pattern == b"*":
        return lambda name: True
    try:
        return compile_glob(pattern).match
    except PatternTooLong as e:
        raise Err(f"ERR {e}") from None


@_cmd("type", 2, ["readonly", "fast"], 1, 1, "Determine the type stored at key", "key:key")
def type_(ctx: CommandContext, args: list[bytes]) -> Any:
    return Simple(kind_of(ctx, args[0]) or "none")


@_cmd("exists", -2, ["readonly", "fast"], 1, -1, "Determine if a key exists", "key:key...")
def exists(ctx: CommandContext, args: list[bytes]) -> Any:
    return sum(1 for a in args if kind_of(ctx, a) is not None)


def _delete(ctx: CommandContext, args: list[bytes]) -> Any:
    n, token = ops.delete(ctx.engine.keyspace, [key_name(a) for a in args])
    return committed(token, n)


@_cmd("del", -2, ["write"], 1, -1, "Delete a key (a string, or a whole topic)", "key:key...")
def del_(ctx: CommandContext, args: list[bytes]) -> Any:
    return _delete(ctx, args)


@_cmd("unlink", -2, ["write", "fast"], 1, -1, "Delete a key (a string, or a whole topic)",
      "key:key...", since="4.0.0")
def unlink(ctx: CommandContext, args: list[bytes]) -> Any:
    return _delete(ctx, args)


@_cmd("keys", 2, ["readonly"], 0, 0, "Find all keys matching the given pattern", "pattern:pattern")
def keys(ctx: CommandContext, args: list[bytes]) -> Any:
    match = matcher(args[0])
    return [k for k in (n.encode("latin-1") for n in ctx.engine.keyspace.names()) if match(k)]


@_cmd("scan", -2, ["readonly"], 0, 0, "Incrementally iterate the keys space",
      "cursor:integer [MATCH:pattern:pattern] [COUNT:count:integer] [TYPE:type:string]",
      since="2.8.0")
def scan(ctx: CommandContext, args: list[bytes]) -> Any:
    raw = args[0]
    if not raw.isdigit() or len(raw) > 20 or int(raw) > U64:
        raise Err("ERR invalid cursor")
    cursor = int(raw)
    pattern: bytes | None = None
    count = 10
    kind: bytes | None = None
    a = Args(args, 1)
    while a:
        opt = a.option(b"match", b"count", b"type")
        if opt == b"match":
            pattern = a.next()
        elif opt == b"count":
            count = a.next_int()
            if count < 1:
                raise a.syntax_error()
        elif opt == b"type":
            kind = a.next().lower()
        else:
            raise a.syntax_error()
    ks = ctx.engine.keyspace
    nxt, names = ks.scan(cursor, count)
    found = [n.encode("latin-1") for n in names]
    if pattern is not None:
        match = matcher(pattern)
        found = [k for k in found if match(k)]
    if kind is not None:
        found = [k for k in found if ks.kind(key_name(k)) == kind.decode("latin-1")]
    return [str(nxt).encode(), found]
