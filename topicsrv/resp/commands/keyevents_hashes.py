"""Keyspace notifications of the hash commands (class `h`, topicsrv/bus/keyspace.py), as
redis-server 7.0 fires them (compat/test_keyspace_events.py replays a script on both servers).

Rule 1: as the list events (keyevents_lists.py Rule 1): an event fires only when the command
wrote, `new` first for a key the command created, nothing at all while notifications are off.
Rule 2 (the events): HSET/HMSET/HSETNX `hset` (one per command; an HSETNX of an existing
field fires nothing); HDEL `hdel`, then `del` when the command removed the last field;
HINCRBY `hincrby`; HINCRBYFLOAT `hincrbyfloat`.
Rule 3 (field expiry, Redis 7.4): HEXPIRE/HPEXPIRE/HEXPIREAT/HPEXPIREAT `hexpire` when a
field's TTL was set, or `hdel` (then `del` if the hash went) when a deadline not in the future
deleted fields; HPERSIST `hpersist` when a TTL was removed. Expired fields fire `hexpired`
(then `del`) from the keyspace itself (bus/keyspace.py `hash_fields_expired`), lazily or by
the active cycle.
"""

from __future__ import annotations

from typing import Any

from topicsrv.bus.keyspace import GENERIC, HASH, Notifications
from topicsrv.resp.commands import hashes, hashes_expire  # noqa: F401 (registers the commands)
from topicsrv.resp.commands.base import CommandContext
from topicsrv.resp.commands.keyevents_lists import edit
from topicsrv.resp.commands.keyevents_strings import Fire, Handler, _gone, _run, _value, _wrap

EVENTS: dict[str, Fire] = {
    "hset": edit(b"hset", klass=HASH), "hmset": edit(b"hset", klass=HASH),
    "hsetnx": edit(b"hset", klass=HASH), "hdel": edit(b"hdel", klass=HASH),
    "hincrby": edit(b"hincrby", klass=HASH), "hincrbyfloat": edit(b"hincrbyfloat", klass=HASH),
}

for _name, _fire in EVENTS.items():
    _wrap(_name, _fire)


def _field_ttl(event: bytes) -> Fire:
    """HEXPIRE*/HPERSIST (Rule 3): the event when a field's TTL changed; a field deleted by a
    past deadline is `hdel` (and `del` when it was the last), as Redis 7.4's
    hashTypeSetExDone."""

    def fire(ctx: CommandContext, ks: Notifications, inner: Handler, args: list[bytes]) -> Any:
        reply, wrote = _run(ctx, inner, args)
        results = _value(reply)
        if wrote and isinstance(results, list):
            key = args[0]
            if 2 in results and event == b"hexpire":
                ks.notify(HASH, b"hdel", key)
                if _gone(ctx, key):
                    ks.notify(GENERIC, b"del", key)
            elif 1 in results:
                ks.notify(HASH, event, key)
        return reply

    return fire


TTL_EVENTS: dict[str, Fire] = {
    "hexpire": _field_ttl(b"hexpire"), "hpexpire": _field_ttl(b"hexpire"),
    "hexpireat": _field_ttl(b"hexpire"), "hpexpireat": _field_ttl(b"hexpire"),
    "hpersist": _field_ttl(b"hpersist"),
}

for _name, _fire in TTL_EVENTS.items():
    _wrap(_name, _fire)
