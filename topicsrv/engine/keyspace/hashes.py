"""Hash operations on the keyspace (Redis 7's @hash family). Each command's mutation is ONE
keyspace operation of one physical hash change (ops.py "H": the pairs set, then the fields
deleted), committed once: a journal frame, WATCH and waiters told (space.py Rule 2).

Rule 1: a change carries results, never commands: HINCRBY and HINCRBYFLOAT journal the new
value, so replay needs no arithmetic (ops.py Rule 1). The change carries the server's listpack
limits at the time (hash-max-listpack-entries/-value), so a replay converts the value to a
dict at the same change (hashvalue.py Rule 3).
Rule 2: a key that holds another kind answers WRONGTYPE before anything changes; a hash is
deleted by the change that removes its last field (space.py Rule 6).
Rule 3 (HSCAN's cursor): a packed (listpack) hash answers every field in one page with cursor
0, as Redis; a dict-encoded one pages in a stable 64-bit hash order of its fields
(scanorder.py Rule 2 over hashvalue.py's `scan_index`): the cursor is the hash of the next
field, so a field present for the whole scan is returned, whatever comes and goes.
Rule 4 (HRANDFIELD): a positive count answers distinct fields (the whole hash, in its order,
when the count reaches its length), a negative one may repeat fields, as Redis.
Rule 5 (field TTLs, hashexpiry.py): `get` reaps the hash's due fields first, so no command
sees an expired field; HSET/HSETNX/HMSET clear the TTL of the fields they set, HINCRBY and
HINCRBYFLOAT keep it (Redis 7.4's HASH_SET_KEEP_TTL: their change re-sets the deadline).
"""

from __future__ import annotations

import random
from typing import Any

from topicsrv.engine.keyspace import hashexpiry, values
from topicsrv.engine.keyspace.colls import LIMIT_CAP
from topicsrv.engine.keyspace.hashvalue import HashValue
from topicsrv.engine.keyspace.scanorder import page
from topicsrv.engine.keyspace.space import HASH, Keyspace
from topicsrv.engine.keyspace.strings import error

Token = Any  # engine/journal.py's CommitToken | None
Pair = tuple[bytes, bytes]
_random = random.Random()


def get(ks: Keyspace, name: str) -> HashValue | None:
    """The hash value of `name`, None if there is no key (WRONGTYPE for another kind); its
    due fields reaped first (Rule 5)."""
    hv: HashValue | None = ks.coll(name, HASH)
    if hv is not None and hv.ttls is not None and hashexpiry.reap_if_due(ks, name):
        return None
    return hv


def change(ks: Keyspace, name: str, sets: list[Pair], dels: list[bytes]) -> Any:
    """The change, with the server's limits (Rule 1), capped to the journal's 31 bits (no
    hash has 2^31 fields, no value is 2 GB: the cap changes nothing)."""
    return ("H", name, sets, dels, min(ks.hash_entries, LIMIT_CAP),
            min(ks.hash_value, LIMIT_CAP))


def new_fields(hv: HashValue | None, pairs: list[Pair]) -> int:
    """How many distinct fields of `pairs` the hash `hv` (None: no key) lacks."""
    if len(pairs) == 1:
        return 1 if hv is None or pairs[0][0] not in hv else 0
    seen: set[bytes] = set()
    added = 0
    for f, _ in pairs:
        if f not in seen and (hv is None or f not in hv):
            added += 1
        seen.add(f)
    return added


def hset(ks: Keyspace, name: str, pairs: list[Pair], nx: bool = False) -> tuple[int, Token]:
    """HSET/HMSET: how many fields are new. `nx` (HSETNX, one pair): set only a new field."""
    hv = get(ks, name)
    added = new_fields(hv, pairs)
    if nx and not added:
        return 0, None
    return added, ks.commit([change(ks, name, pairs, [])], True)


def hdel(ks: Keyspace, name: str, fields: list[bytes]) -> tuple[int, Token]:
    """HDEL: how many of `fields` existed; the key goes with its last field."""
    hv = get(ks, name)
    if hv is None:
        return 0, None
    gone = list(dict.fromkeys(f for f in fields if f in hv))
    if not gone:
        return 0, None
    return len(gone), ks.commit([change(ks, name, [], gone)])


def incr_by(ks: Keyspace, name: str, field: bytes, delta: int) -> tuple[int, Token]:
    """HINCRBY: the new value (Rule 1: journaled as the value)."""
    hv = get(ks, name)
    old = hv.get(field) if hv is not None else None
    cur = 0
    if old is not None:
        parsed = values.parse_i64(old)
        if parsed is None:
            raise error("hash value is not an integer")
        cur = parsed
    new = cur + delta
    if not values.I64_MIN <= new <= values.I64_MAX:
        raise error("increment or decrement would overflow")
    return new, ks.commit(_keep_ttl(hv, field, change(ks, name, [(field, str(new).encode())],
                                                       [])), True)


def incr_by_float(ks: Keyspace, name: str, field: bytes, incr: bytes) -> tuple[bytes, Token]:
    """HINCRBYFLOAT on x87 long doubles, printed as Redis's ld2string (values.py Rule 2)."""
    by = values.parse_ld(incr)
    if by is None:
        raise error("value is not a valid float")
    if isinstance(by, float):  # "inf": Redis refuses it before looking the key up
        raise error("value is NaN or Infinity")
    hv = get(ks, name)
    old = hv.get(field) if hv is not None else None
    cur = values.parse_ld(old) if old is not None else values.parse_ld(b"0")
    if cur is None:
        raise error("hash value is not a float")
    total = values.add_ld(cur, by)
    if total is None:
        raise error("increment would produce NaN or Infinity")
    text = values.format_ld(total)
    return text, ks.commit(_keep_ttl(hv, field, change(ks, name, [(field, text)], [])), True)


def _keep_ttl(hv: HashValue | None, field: bytes, ch: Any) -> list[Any]:
    """The change of HINCRBY/HINCRBYFLOAT, then the field's deadline again (Rule 5)."""
    deadline = 0 if hv is None else hv.ttl(field)
    return [ch, ("h", ch[1], [(field, deadline)])] if deadline else [ch]


def random_fields(hv: HashValue, count: int) -> list[Pair]:
    """HRANDFIELD's pairs for `count` (Rule 4)."""
    if count < 0:
        items = list(hv.items())
        return _random.choices(items, k=-count)
    if count >= len(hv):
        return list(hv.items())
    return _random.sample(list(hv.items()), count)


def random_field(hv: HashValue) -> bytes:
    """HRANDFIELD without a count: one field."""
    return random_fields(hv, -1)[0][0]


def scan(hv: HashValue, cursor: int, count: int) -> tuple[int, list[Pair]]:
    """HSCAN's page from `cursor`: (the next cursor, the pairs) (Rule 3)."""
    table = hv.table
    if table is None:
        return 0, list(hv.items())
    nxt, fields = page([hv.scan_index()], cursor, count)
    return nxt, [(f, table[f]) for f in fields]


def expire_fields(ks: Keyspace, name: str, deadline: int, cond: str | None,
                  fields: list[bytes]) -> tuple[list[int], Token]:
    """HEXPIRE and its variants at absolute `deadline` (hashexpiry.py Rule 4)."""
    return hashexpiry.expire_fields(ks, get(ks, name), name, deadline, cond, fields)


def persist_fields(ks: Keyspace, name: str, fields: list[bytes]) -> tuple[list[int], Token]:
    return hashexpiry.persist_fields(ks, get(ks, name), name, fields)


def field_times(ks: Keyspace, hv: HashValue | None, fields: list[bytes], relative: bool,
                millis: bool) -> list[int]:
    return hashexpiry.field_times(ks, hv, fields, relative, millis)
