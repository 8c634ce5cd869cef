"""Keyspace commands: TYPE EXISTS DEL UNLINK KEYS SCAN over both kinds of key (a topic is a
`stream`, topicsrv/engine/keyspace holds the strings); expiry and RENAME/COPY are expire.py's.

Rule 1: DEL/UNLINK delete strings and whole topics (a topic as HTTP DELETE: readers of a
recreated topic get the `recreated` tombstone). The reply waits for the storage commit.
Rule 2: SCAN's cursor is the last returned name encoded as an integer (`0` = start/end), so an
iteration returns every key that exists throughout it, even while others come and go; the
two kinds are merged in byte order. An expired key is never returned (keyspace Rule 3).
Rule 3: patterns are Redis globs (`*`, `?`, `[a-z]`, `[^x]`, `\\` escapes), matched by
topicsrv/engine/glob.py in O(len(pattern) * len(name)): no pattern can stall the server.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import islice
from typing import Any

from topicsrv.engine.glob import PatternTooLong, compile_glob
from topicsrv.engine.keyspace import strings as ops
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


def _matcher(pattern: bytes) -> Callable[[bytes], bool]:
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
    match = _matcher(args[0])
    return [k for k in (n.encode("latin-1") for n in ctx.engine.keyspace.names()) if match(k)]


def _cursor_name(cursor: int) -> str | None:
    if cursor == 0:
        return None
    raw = cursor.to_bytes((cursor.bit_length() + 7) // 8, "big")
    return raw[1:].decode("latin-1") if raw[:1] == b"\x01" else None


def _name_cursor(name: str) -> bytes:
    return str(int.from_bytes(b"\x01" + name.encode("latin-1"), "big")).encode()


@_cmd("scan", -2, ["readonly"], 0, 0, "Incrementally iterate the keys space",
      "cursor:integer [MATCH:pattern:pattern] [COUNT:count:integer] [TYPE:type:string]",
      since="2.8.0")
def scan(ctx: CommandContext, args: list[bytes]) -> Any:
    raw = args[0]
    if not raw.isdigit():
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
    after = _cursor_name(cursor)
    ks = ctx.engine.keyspace
    names = list(islice(ks.names(after), count + 1))
    nxt = _name_cursor(names[count - 1]) if len(names) > count else b"0"
    names = names[:count]
    found = [n.encode("latin-1") for n in names]
    if pattern is not None:
        match = _matcher(pattern)
        found = [k for k in found if match(k)]
    if kind is not None:
        found = [k for k in found if ks.kind(key_name(k)) == kind.decode("latin-1")]
    return [nxt, found]
