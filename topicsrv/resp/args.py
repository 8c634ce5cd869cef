"""The argument cursor: redis-server's option loops, written once for every RESP command.

A handler walks its arguments the way redis-server's loops do (`for (; i < c->argc; i++) {
int moreargs = c->argc-1-i; if (!strcasecmp(opt,"COUNT") && moreargs) ...`):

    a = Args(args, 3)
    while a:
        if a.option(b"count"):       # COUNT followed by at least one more argument
            count = a.next_int()
        elif a.flag(b"justid"):
            justid = True
        else:
            raise a.syntax_error()   # `ERR syntax error`

Rule 1: names match case-insensitively. `option(*names, nargs=1)` matches only when `nargs`
  more arguments follow the name (Redis's `moreargs`); otherwise the name is left where it is,
  so it falls through to the caller's error exactly as in redis-server.
Rule 2: the value readers raise Redis's texts: `next_int` `ERR value is not an integer or out
  of range` (or the text the caller passes), `next_id` `ERR Invalid stream ID specified as
  stream command argument`.
Rule 3: the cursor never reads past the end: a missing value is an `ERR syntax error` reply,
  never an IndexError.
"""

from __future__ import annotations

from topicsrv.resp import ids
from topicsrv.resp.commands.base import NOT_INT, SYNTAX, Err, parse_int


class Args:
    """A cursor over a command's arguments (the command name already removed)."""

    __slots__ = ("argv", "pos")

    def __init__(self, argv: list[bytes], pos: int = 0) -> None:
        self.argv = argv
        self.pos = pos

    def __bool__(self) -> bool:
        return self.pos < len(self.argv)

    @property
    def remaining(self) -> int:
        return len(self.argv) - self.pos

    def peek(self) -> bytes:
        """The current argument as given (an empty bytes past the end)."""
        return self.argv[self.pos] if self.pos < len(self.argv) else b""

    def option(self, *names: bytes, nargs: int = 1) -> bytes | None:
        """If the current argument is one of `names` (lower case) and `nargs` more follow,
        step past it and return its lower-case name; else None, without moving (Rule 1)."""
        if self.pos + nargs >= len(self.argv):
            return None
        opt = self.argv[self.pos].lower()
        if opt in names:
            self.pos += 1
            return opt
        return None

    def flag(self, *names: bytes) -> bytes | None:
        """An option without a value (`NOACK`, `JUSTID`)."""
        return self.option(*names, nargs=0)

    def next(self) -> bytes:
        if self.pos >= len(self.argv):
            raise Err(SYNTAX)
        arg = self.argv[self.pos]
        self.pos += 1
        return arg

    def next_text(self) -> str:
        """The next argument as text; undecodable bytes survive (surrogateescape)."""
        return self.next().decode("utf-8", "surrogateescape")

    def next_int(self, error: str = NOT_INT) -> int:
        return parse_int(self.next(), error)

    def next_id(self, missing_seq: int = 0) -> ids.StreamId:
        return ids.parse_id(self.next(), missing_seq)

    def rest(self) -> list[bytes]:
        """Every argument left; the cursor moves to the end."""
        out = self.argv[self.pos:]
        self.pos = len(self.argv)
        return out

    @staticmethod
    def syntax_error() -> Err:
        return Err(SYNTAX)
