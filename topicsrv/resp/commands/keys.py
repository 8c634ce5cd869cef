"""Keyspace commands: TYPE EXISTS DEL UNLINK KEYS SCAN (a key is a topic; every topic is a
`stream`).

Rule 1: DEL/UNLINK delete whole topics (like HTTP DELETE): readers of a recreated topic get
the `recreated` tombstone. The reply waits for the storage commit of every delete.
Rule 2: SCAN's cursor is the last returned name encoded as an integer (`0` = start/end), so an
iteration returns every topic that exists throughout it, even while others come and go.
Rule 3: patterns are Redis globs (`*`, `?`, `[a-z]`, `[^x]`, `\\` escapes).
"""

from __future__ import annotations

import re
from functools import lru_cache
from itertools import islice
from typing import Any

from topicsrv.resp.commands.base import (
    SYNTAX,
    CommandContext,
    Err,
    Simple,
    command,
    committed,
    key_name,
    parse_int,
)


def _cmd(name: str, arity: int, flags: list[str], first: int, last: int, summary: str,
         syntax: str, since: str = "1.0.0") -> Any:
    return command(name, arity, flags, first, last, 1 if first else 0, "generic", summary, since,
                   syntax=syntax)


@lru_cache(maxsize=256)
def glob_regex(pattern: bytes) -> re.Pattern[bytes]:
    out = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i : i + 1]
        if c == b"*":
            out.append(b".*")
        elif c == b"?":
            out.append(b".")
        elif c == b"\\" and i + 1 < n:
            i += 1
            out.append(re.escape(pattern[i : i + 1]))
        elif c == b"[":
            j = i + 1
            neg = j < n and pattern[j : j + 1] == b"^"
            if neg:
                j += 1
            parts = []
            while j < n and pattern[j : j + 1] != b"]":
                if pattern[j : j + 1] == b"\\" and j + 1 < n:
                    j += 1
                    parts.append(re.escape(pattern[j : j + 1]))
                elif j + 2 < n and pattern[j + 1 : j + 2] == b"-" and pattern[j + 2 : j + 3] != b"]":
                    lo, hi = sorted((pattern[j], pattern[j + 2]))
                    parts.append(re.escape(bytes([lo])) + b"-" + re.escape(bytes([hi])))
                    j += 2
                else:
                    parts.append(re.escape(pattern[j : j + 1]))
                j += 1
            body = b"".join(parts)
            out.append((b"[^" + body + b"]") if neg else (b"[" + body + b"]" if body else b"(?!)"))
            i = j
        else:
            out.append(re.escape(c))
        i += 1
    return re.compile(b"".join(out) + b"\\Z", re.DOTALL)


def glob_match(pattern: bytes, name: bytes) -> bool:
    if pattern == b"*":
        return True
    return glob_regex(pattern).match(name) is not None


@_cmd("type", 2, ["readonly", "fast"], 1, 1, "Determine the type stored at key", "key:key")
def type_(ctx: CommandContext, args: list[bytes]) -> Any:
    return Simple("stream" if ctx.engine.find(key_name(args[0])) is not None else "none")


@_cmd("exists", -2, ["readonly", "fast"], 1, -1, "Determine if a key exists", "key:key...")
def exists(ctx: CommandContext, args: list[bytes]) -> Any:
    return sum(1 for a in args if ctx.engine.find(key_name(a)) is not None)


def _delete(ctx: CommandContext, args: list[bytes]) -> Any:
    n = 0
    token = None
    for a in args:
        name = key_name(a)
        if ctx.engine.find(name) is not None:
            _, t = ctx.engine.delete_topic(name)
            token = t or token
            n += 1
    return committed(token, n)


@_cmd("del", -2, ["write"], 1, -1, "Delete a key (a whole topic)", "key:key...")
def del_(ctx: CommandContext, args: list[bytes]) -> Any:
    return _delete(ctx, args)


@_cmd("unlink", -2, ["write", "fast"], 1, -1, "Delete a key (a whole topic)", "key:key...",
      since="4.0.0")
def unlink(ctx: CommandContext, args: list[bytes]) -> Any:
    return _delete(ctx, args)


@_cmd("keys", 2, ["readonly"], 0, 0, "Find all keys matching the given pattern", "pattern:pattern")
def keys(ctx: CommandContext, args: list[bytes]) -> Any:
    pat = args[0]
    return [k for k in (n.encode("latin-1") for n in ctx.engine.topics) if glob_match(pat, k)]


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
    i = 1
    while i < len(args):
        opt = args[i].lower()
        if i + 1 >= len(args):
            raise Err(SYNTAX)
        if opt == b"match":
            pattern = args[i + 1]
        elif opt == b"count":
            count = parse_int(args[i + 1])
            if count < 1:
                raise Err(SYNTAX)
        elif opt == b"type":
            kind = args[i + 1].lower()
        else:
            raise Err(SYNTAX)
        i += 2
    after = _cursor_name(cursor)
    topics = ctx.engine.topics
    it = topics.irange(minimum=after, inclusive=(False, False)) if after is not None else iter(topics)
    names = list(islice(it, count + 1))
    nxt = _name_cursor(names[count - 1]) if len(names) > count else b"0"
    names = names[:count]
    found = [n.encode("latin-1") for n in names]
    if pattern is not None:
        found = [k for k in found if glob_match(pattern, k)]
    if kind is not None and kind != b"stream":
        found = []
    return [nxt, found]
