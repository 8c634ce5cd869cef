"""Keyspace notifications, as Redis's `notify-keyspace-events` (notify.c).

A command that changes a key calls `notify(klass, event, key)` once the change is made; when
the class is enabled the bus publishes `event` on `__keyspace@0__:<key>` (flag K) and `key`
on `__keyevent@0__:<event>` (flag E), to the subscribers connected then (bus Rule 1).

Rule 1 (zero cost when off): the default is "" (nothing enabled); `notify` is one attribute
read and one AND before it returns. Callers need not guard it.
Rule 2: the flag letters are Redis's: K E g $ l s h z x e t d m n, and A (= g$lshzxetd).
Classes for value types topicsrv does not have (l s h z d) are accepted and kept, so a
CONFIG GET shows what was set, as redis-server renders it (`flags_text`).
Rule 3: nothing is published unless K or E is set as well as the event's class, as Redis.
Rule 4 (the entry point for the keyspace): strings (`$`), generic commands (`g`: del, expire,
rename_from/rename_to, ...), expiry (`x`: `expired`) and `new` (`n`) call the same `notify`
with their class constant; streams use `STREAM` (`xadd`, `xtrim`, `xdel`, `xgroup-create`,
`xgroup-createconsumer`, `xgroup-delconsumer`, `xgroup-destroy`, `xgroup-setid`, `xsetid`).
The string and generic command events are in resp/commands/keyevents_strings.py; `expired`
comes from the keyspace itself (engine/keyspace/space.py `on_expired`, wired to `expired`
below), so lazy and active expiry both fire it, whichever front caused the lookup.
Rule 5: an engine key name (str) is published as the bytes the RESP front decoded it from
(latin-1); a name only HTTP could spell (beyond latin-1) as UTF-8.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from topicsrv.bus.bus import Bus

KEYSPACE = 1 << 0
KEYEVENT = 1 << 1
GENERIC = 1 << 2
STRING = 1 << 3
LIST = 1 << 4
SET = 1 << 5
HASH = 1 << 6
ZSET = 1 << 7
EXPIRED = 1 << 8
EVICTED = 1 << 9
STREAM = 1 << 10
KEY_MISS = 1 << 11
LOADED = 1 << 12  # Redis's module "loaded" class: never set from the config string
MODULE = 1 << 13
NEW = 1 << 14
ALL = GENERIC | STRING | LIST | SET | HASH | ZSET | EXPIRED | EVICTED | STREAM | MODULE

LETTERS = {"A": ALL, "g": GENERIC, "$": STRING, "l": LIST, "s": SET, "h": HASH, "z": ZSET,
           "x": EXPIRED, "e": EVICTED, "K": KEYSPACE, "E": KEYEVENT, "t": STREAM, "m": KEY_MISS,
           "d": MODULE, "n": NEW}
# the order redis-server renders the classes in (keyspaceEventsFlagsToString)
_CLASS_ORDER = (("g", GENERIC), ("$", STRING), ("l", LIST), ("s", SET), ("h", HASH),
                ("z", ZSET), ("x", EXPIRED), ("e", EVICTED), ("t", STREAM), ("d", MODULE),
                ("n", NEW))

KEYSPACE_PREFIX = b"__keyspace@0__:"
KEYEVENT_PREFIX = b"__keyevent@0__:"


def parse_flags(text: str) -> int:
    """The flags of a notify-keyspace-events string; ValueError for an unknown letter."""
    flags = 0
    for ch in text:
        bit = LETTERS.get(ch)
        if bit is None:
            raise ValueError("Invalid event class character. Use 'Ag$lshzxeKEtmdn'.")
        flags |= bit
    return flags


def flags_text(flags: int) -> str:
    """`flags` as redis-server's CONFIG GET shows them."""
    out = []
    if flags & ALL == ALL:
        out.append("A")  # redis-server 7.0 drops `n` here: `An` reads back as `A`
    else:
        out.extend(ch for ch, bit in _CLASS_ORDER if flags & bit)
    if flags & KEYSPACE:
        out.append("K")
    if flags & KEYEVENT:
        out.append("E")
    if flags & KEY_MISS:
        out.append("m")
    return "".join(out)


def key_bytes(name: str) -> bytes:
    """A key name as published (Rule 5)."""
    try:
        return name.encode("latin-1")
    except UnicodeEncodeError:
        return name.encode("utf-8", "surrogatepass")


class Notifications:
    """The keyspace-notification switch of one bus (`bus.keyspace`)."""

    __slots__ = ("bus", "flags")

    def __init__(self, bus: Bus) -> None:
        self.bus = bus
        self.flags = 0

    def notify(self, klass: int, event: bytes, key: bytes) -> None:
        """`event` happened to `key` (Rules 1 and 3)."""
        flags = self.flags
        if not flags & klass:
            return
        if flags & KEYSPACE:
            self.bus.publish(KEYSPACE_PREFIX + key, event)
        if flags & KEYEVENT:
            self.bus.publish(KEYEVENT_PREFIX + event, key)

    def hash_fields_expired(self, name: str, gone: bool) -> None:
        """The keyspace's `on_hexpired` hook: fields of hash `name` expired; `gone`: the hash
        went with them (Redis 7.4: `hexpired`, then `del`)."""
        if self.flags:
            key = key_bytes(name)
            self.notify(HASH, b"hexpired", key)
            if gone:
                self.notify(GENERIC, b"del", key)

    def expired(self, name: str) -> None:
        """The keyspace's `on_expired` hook: `name` expired (lazily or by the active cycle)."""
        if self.flags & EXPIRED:
            self.notify(EXPIRED, b"expired", key_bytes(name))
