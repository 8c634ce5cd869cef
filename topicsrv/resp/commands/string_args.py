"""Argument parsing of the string commands' expiry options (SET, GETEX), as redis-server's
parseExtendedStringArgumentsOrReply and getExpireMillisecondsOrReply.

Rule 1: every option is read before any number is parsed, so a syntax error (conflicting or
unknown options, a missing value) answers `ERR syntax error` before a bad number does.
Rule 2: a TTL becomes an absolute Unix-ms deadline here; a non-positive or overflowing one
answers `ERR invalid expire time in '<cmd>' command`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from topicsrv.resp.commands.base import SYNTAX, Err, parse_int

I64_MAX: Final = (1 << 63) - 1
UNITS: Final = {b"ex": (1000, False), b"px": (1, False), b"exat": (1000, True), b"pxat": (1, True)}


@dataclass(slots=True)
class SetOptions:
    nx: bool = False
    xx: bool = False
    get: bool = False
    keepttl: bool = False
    persist: bool = False
    deadline: int = 0  # absolute Unix ms; 0 = none


def deadline_of(raw: bytes, scale: int, absolute: bool, now: int, cmd: str) -> int:
    """Rule 2."""
    n = parse_int(raw)
    invalid = Err(f"ERR invalid expire time in '{cmd}' command")
    if n <= 0 or n > I64_MAX // scale:
        raise invalid
    ms = n * scale
    if not absolute:
        if ms > I64_MAX - now:
            raise invalid
        ms += now
    return ms


def parse_set(args: list[bytes], pos: int, now: int, cmd: str) -> SetOptions:
    """SET's options (cmd "set") or GETEX's (cmd "getex"), Rule 1."""
    o = SetOptions()
    unit: bytes | None = None
    value = b""
    is_set = cmd == "set"
    i = pos
    while i < len(args):
        opt = args[i].lower()
        nxt = i + 1 < len(args)
        if is_set and opt == b"nx" and not o.xx:
            o.nx = True
        elif is_set and opt == b"xx" and not o.nx:
            o.xx = True
        elif is_set and opt == b"get":
            o.get = True
        elif is_set and opt == b"keepttl" and unit is None:
            o.keepttl = True
        elif not is_set and opt == b"persist" and unit is None:
            o.persist = True
        elif opt in UNITS and unit is None and not o.keepttl and not o.persist and nxt:
            unit = opt
            value = args[i + 1]
            i += 1
        else:
            raise Err(SYNTAX)
        i += 1
    if unit is not None:
        scale, absolute = UNITS[unit]
        o.deadline = deadline_of(value, scale, absolute, now, cmd)
    return o
