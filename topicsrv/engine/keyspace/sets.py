"""Set operations on the keyspace (Redis 7's @set family). Each command's mutation is ONE
keyspace operation of physical set changes (ops.py "S": the members added, then the members
removed; "c" of kind "set" for the *STORE commands), committed once: a journal frame, WATCH
and waiters told (space.py Rule 2).

Rule 1: a change carries results, never commands: SPOP journals the members it removed, a
*STORE the members it computed, so replay draws no random numbers and computes nothing. A
change carries the server's encoding limits at the time (set-max-intset-entries,
set-max-listpack-entries/-value), so replay converts at the same change (setvalue.py Rule 2).
Rule 2: every key a command reads is type-checked before anything changes or is answered, as
Redis (a missing key is an empty set; SMOVE checks the destination too); a set is deleted by
the change that removes its last member (space.py Rule 6).
Rule 3 (results' order): SINTER walks the smallest set in its own order; SUNION, SDIFF and
the *STORE commands build their result as Redis does (a new set, intset while it can be), so
an all-integer result of at most set-max-intset-entries members answers sorted, as Redis.
Rule 4 (SRANDMEMBER/SPOP counts, as Redis): a negative SRANDMEMBER count draws |count|
members independently; a count reaching the set's size answers (SPOP: removes) the whole
set in its order; any other count answers that many distinct members drawn uniformly.
"""

from __future__ import annotations

from typing import Any, Final

from topicsrv.engine.journal import Group, all_of
from topicsrv.engine.keyspace.colls import LIMIT_CAP
from topicsrv.engine.keyspace.scanorder import page
from topicsrv.engine.keyspace.setvalue import Limits, SetValue, limits_of
from topicsrv.engine.keyspace.space import Keyspace

SET: Final = SetValue.KIND
Token = Any  # engine/journal.py's CommitToken | None


def get(ks: Keyspace, name: str) -> SetValue | None:
    """The set value of `name`, None if there is no key (WRONGTYPE for another kind)."""
    sv: SetValue | None = ks.coll(name, SET)
    return sv


def get_all(ks: Keyspace, names: list[str]) -> list[SetValue | None]:
    """Rule 2: every key looked up and type-checked before the command does anything."""
    return [get(ks, n) for n in names]


def limits(ks: Keyspace) -> Limits:
    """The server's limits (Rule 1), capped to the journal's 31 bits."""
    return (min(ks.set_intset, LIMIT_CAP), min(ks.set_entries, LIMIT_CAP),
            min(ks.set_value, LIMIT_CAP))


def change(ks: Keyspace, name: str, adds: list[bytes], dels: list[bytes]) -> Any:
    return ("S", name, adds, dels, limits(ks))


def sadd(ks: Keyspace, name: str, members: list[bytes]) -> tuple[int, Token]:
    """SADD: how many members are new."""
    sv = get(ks, name)
    new = [m for m in dict.fromkeys(members) if sv is None or m not in sv]
    if not new:
        return 0, None
    return len(new), ks.commit([change(ks, name, new, [])], True)


def srem(ks: Keyspace, name: str, members: list[bytes]) -> tuple[int, Token]:
    """SREM: how many of `members` were there; the key goes with its last member."""
    sv = get(ks, name)
    if sv is None:
        return 0, None
    gone = [m for m in dict.fromkeys(members) if m in sv]
    if not gone:
        return 0, None
    return len(gone), ks.commit([change(ks, name, [], gone)])


def smove(ks: Keyspace, src: str, dst: str, member: bytes) -> tuple[int, bool, Token]:
    """SMOVE: (1 if moved, whether the destination gained it, token), as Redis's smoveCommand
    (a missing source answers 0 before the types are checked)."""
    sv = get(ks, src)
    if sv is None:
        return 0, False, None
    dv = get(ks, dst)
    if src == dst:
        return int(member in sv), False, None
    if member not in sv:
        return 0, False, None
    added = dv is None or member not in dv
    op = [change(ks, src, [], [member])]
    if added:
        op.append(change(ks, dst, [member], []))
    return 1, added, ks.commit(op, True)


def spop(ks: Keyspace, name: str, count: int | None) -> tuple[Any, Token]:
    """SPOP: one member (None: no key) or, with `count`, a list (Rule 4)."""
    sv = get(ks, name)
    if sv is None:
        return (None if count is None else []), None
    if count is None:
        m = sv.pick()
        return m, ks.commit([change(ks, name, [], [m])])
    if count == 0:
        return [], None
    out = sv.members() if count >= len(sv) else sv.sample(count)
    return out, ks.commit([change(ks, name, [], out)])


def srandmember(sv: SetValue, count: int) -> list[bytes]:
    """SRANDMEMBER with a count (Rule 4)."""
    if count < 0:
        return sv.picks(-count)
    if count >= len(sv):
        return sv.members()
    return sv.sample(count)


# ---- the algebra (Rule 3) -------------------------------------------------------------------

def inter(ks: Keyspace, names: list[str], limit: int = 0) -> list[bytes]:
    """SINTER's members (at most `limit`, 0: all), in the smallest set's order."""
    sets = get_all(ks, [*names])
    if any(s is None for s in sets):
        return []
    ordered = sorted(sets, key=len)  # type: ignore[arg-type]
    first, rest = ordered[0], ordered[1:]
    assert first is not None
    out = []
    for m in first:
        if all(m in s for s in rest):  # type: ignore[operator]
            out.append(m)
            if len(out) == limit:
                break
    return out


def union(ks: Keyspace, names: list[str]) -> SetValue:
    """SUNION's members, as the set Redis builds of them (Rule 3)."""
    result = SetValue()
    lim = limits(ks)
    for s in get_all(ks, names):
        if s is not None:
            result.add_many(s, lim)
    return result


def diff(ks: Keyspace, names: list[str]) -> SetValue:
    """SDIFF's members: the first set's without any later set's, as the set Redis's
    sunionDiffGenericCommand builds (its algorithm 2 adds the whole first set before it
    removes, so the result's encoding is the one Redis gets)."""
    sets = get_all(ks, names)
    first = sets[0]
    lim = limits(ks)
    result = SetValue()
    if first is None or any(s is first for s in sets[1:]):
        return result
    rest = [s for s in sets[1:] if s is not None]
    one = len(first) * (1 + len(rest)) // 2
    two = len(first) + sum(len(s) for s in rest)
    if one <= two:
        result.add_many([m for m in first if not any(m in s for s in rest)], lim)
    else:
        result.add_many(first, lim)
        for s in rest:
            result.remove_many(list(s))
            if not len(result):
                break
    return result


def store(ks: Keyspace, dst: str, result: SetValue | list[bytes]) -> tuple[int, Token]:
    """A *STORE: the result (a list: built as Redis builds it) put whole at `dst`, its
    encoding kept (setvalue.limits_of), replacing a key of any kind and its TTL; or `dst`
    deleted when the result is empty."""
    sv = SetValue.of(result, limits(ks)) if isinstance(result, list) else result
    if not len(sv):
        if not ks.owns(dst) and dst not in ks.host.topics:
            return 0, None
        with Group(ks.host.journal):
            tokens = _drop_topic(ks, dst)
            if ks.owns(dst):
                tokens.append(ks.commit([("d", dst)]))
        return 0, all_of(tokens)
    with Group(ks.host.journal):
        tokens = _drop_topic(ks, dst)
        tokens.append(ks.commit([("c", dst, SET, sv.members(), 0, limits_of(sv))], True))
    return len(sv), all_of(tokens)


def _drop_topic(ks: Keyspace, name: str) -> list[Any]:
    """A topic at a *STORE's destination is replaced (as strings.put does)."""
    if name not in ks.host.topics:
        return []
    ks.host.journal.check_writable(None)
    return [ks.host.delete_topic(name)[1]]


def scan(sv: SetValue, cursor: int, count: int) -> tuple[int, list[bytes]]:
    """SSCAN's page from `cursor`: an intset or a small set answers whole with cursor 0, as
    Redis's; a Table pages in the stable hash order of its members (as hashes.scan)."""
    if sv.table is None:
        return 0, sv.members()
    return page([sv.scan_index()], cursor, count)
