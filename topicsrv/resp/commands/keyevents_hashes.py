"""Keyspace notifications of the hash commands (class `h`, topicsrv/bus/keyspace.py), as
redis-server 7.0 fires them (compat/test_keyspace_events.py replays a script on both servers).

Rule 1: as the list events (keyevents_lists.py Rule 1): an event fires only when the command
wrote, `new` first for a key the command created, nothing at all while notifications are off.
Rule 2 (the events): HSET/HMSET/HSETNX `hset` (one per command; an HSETNX of an existing
field fires nothing); HDEL `hdel`, then `del` when the command removed the last field;
HINCRBY `hincrby`; HINCRBYFLOAT `hincrbyfloat`.
"""

from __future__ import annotations

from topicsrv.bus.keyspace import HASH
from topicsrv.resp.commands import hashes  # noqa: F401 (registers the commands)
from topicsrv.resp.commands.keyevents_lists import edit
from topicsrv.resp.commands.keyevents_strings import Fire, _wrap

EVENTS: dict[str, Fire] = {
    "hset": edit(b"hset", klass=HASH), "hmset": edit(b"hset", klass=HASH),
    "hsetnx": edit(b"hset", klass=HASH), "hdel": edit(b"hdel", klass=HASH),
    "hincrby": edit(b"hincrby", klass=HASH), "hincrbyfloat": edit(b"hincrbyfloat", klass=HASH),
}

for _name, _fire in EVENTS.items():
    _wrap(_name, _fire)
