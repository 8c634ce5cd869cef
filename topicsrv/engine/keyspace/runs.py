"""A pipelined run of collection writes applied as ONE keyspace operation, in one loop
(resp/batch_colls.py), as a run of SETs is (strings.put): no per-command commit.

Rule 1 (the commands' own changes): each step computes, from the value as the run's earlier
steps left it, the change its command's own operation computes (lists.push, lists.pop,
hashes.hset, sets.sadd, zsets.zadd, zsets.pop_from: the same tuple), applies it at once (as
colls.apply would) and appends it to the run's operation, in command order. `finish` journals
that operation once (space.py Rule 9), so recovery and replicas replay the changes the
commands would have made one by one. A step that changes nothing appends nothing.
Rule 2 (each command's reply and error): a step returns its command's reply; a key of
another kind raises WRONGTYPE for that command only, before anything of it is applied.
Rule 3 (the command's own path inside the run): a step returns SLOW for what it leaves to its
command's handler (a hash with field deadlines: hashexpiry reaps first); the caller runs
that handler, whose commit lands in the same gathered operation (space.py Rule 9), in order.
Rule 4 (told once): every key the run changed is told to WATCH and waiters once, by `finish`
(space.py `tell`): no other client runs inside a run, a WATCH is judged at its EXEC and the
notifier only marks waiters ready, so they are served after the run as before.
Rule 5 (one clock reading): lazy expiry and the access stamp (OBJECT IDLETIME) read the clock
once, at `begin`. An expired key is deleted by its own commit, gathered in order (Rule 3).
Rule 6: `begin` raises what storage's `check_writable` raises before anything is applied
(the caller then runs the commands one by one); a checkpoint reading the keyspace sees
every change before it is applied (`saving.before`, space.py `apply`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from mypy_extensions import mypyc_attr

from topicsrv.engine.keyspace import colls as colls_mod
from topicsrv.engine.keyspace import hashes, sets, zsets
from topicsrv.engine.keyspace.colls import HASH, LIST, SET, ZSET
from topicsrv.engine.keyspace.hashvalue import HashValue
from topicsrv.engine.keyspace.host import tell, told
from topicsrv.engine.keyspace.quicklist import ListValue
from topicsrv.engine.keyspace.setvalue import SetValue
from topicsrv.engine.keyspace.space import Keyspace, wrongtype
from topicsrv.engine.keyspace.zsetvalue import ZsetValue


class Slow:
    """Rule 3's answer: this command goes to its handler."""

    __slots__ = ()


SLOW: Final = Slow()


# outside the cyclic GC (docs/decisions.md): it refers to its keyspace, which never refers back
@mypyc_attr(acyclic=True)
class Run:
    __slots__ = ("ks", "op", "names", "now", "second", "writes")

    def __init__(self, ks: Keyspace) -> None:
        self.ks = ks
        self.op: list[Any] = []
        self.names: dict[str, None] = {}
        self.now = ks.clock.now_ms()
        self.second: Any = colls_mod.shared(self.now // 1000)  # one int object (colls Rule 4)
        self.writes = 0


def begin(ks: Keyspace) -> Run:
    """Rule 6, then the run's operation is gathered (space.py Rule 9)."""
    ks.host.journal.check_writable(None)
    run = Run(ks)
    ks.gathered = run.op
    return run


def finish(run: Run) -> Any:
    """The run's operation journaled once (its commit token), the keys told (Rule 4)."""
    ks = run.ks
    ks.stats["string_writes"] += run.writes
    token = ks.journal_gathered()
    if run.names and told(ks.host):
        tell(ks.host, run.names)
    return token


def _value(run: Run, name: str, kind: str, stamp: bool = True) -> Any:
    """The value of kind `kind` at `name` (stamped: Rule 5, unless the caller stamps it
    itself), None if there is no key; WRONGTYPE for another kind (Rule 2). As Keyspace.coll,
    at the run's clock reading."""
    ks = run.ks
    if ks.expiry.deadlines and ks.expire_if_due(name, run.now):
        return None
    value = ks.colls.get(name)
    if value is not None:
        if value.KIND != kind:
            raise wrongtype(name)
        if stamp:
            value.second = run.second
        return value
    if name in ks.strings or name in ks.host.topics:
        raise wrongtype(name)
    return None


def _changed(run: Run, name: str, ch: Any) -> None:
    """Rule 1: `ch`, about to be applied, joins the run's operation."""
    ks = run.ks
    saving = ks.saving
    if saving is not None:
        saving.before(ch)
    run.op.append(ch)
    run.names[name] = None
    run.writes += 1


def _target(run: Run, name: str, value: Any, ch: Any, make: Callable[[Keyspace], Any]) -> Any:
    """`ch` joins the run (Rule 1); the value it changes, a new empty one (`make(ks)`) added at
    `name` when there is no key."""
    _changed(run, name, ch)
    if value is None:
        value = make(run.ks)
        colls_mod.add(run.ks, name, value)
        value.second = run.second
    return value


def _gone(run: Run, name: str, value: Any) -> None:
    if not len(value):
        colls_mod.drop(run.ks, name)


def _new_list(ks: Keyspace) -> ListValue:
    return ListValue(ks.list_fill)


def _new_hash(ks: Keyspace) -> HashValue:
    return HashValue()


def _new_set(ks: Keyspace) -> SetValue:
    return SetValue()


def _new_zset(ks: Keyspace) -> ZsetValue:
    return ZsetValue()


# ---- lists (lists.push, lists.pop) -----------------------------------------------------------

def push(run: Run, name: str, values: list[bytes], left: bool) -> int:
    """LPUSH/RPUSH: the new length."""
    ks = run.ks
    lv: ListValue | None = _value(run, name, LIST)
    n = 0 if lv is None else len(lv)
    fill = ks.list_fill
    ch = ("L", name, 0, 0, values[::-1], fill) if left else ("L", name, n, 0, values, fill)
    lv = _target(run, name, lv, ch, _new_list)
    old = lv.nbytes
    if left:
        for v in values:
            lv.push_head(v)
    else:
        for v in values:
            lv.push_tail(v)
    ks.nbytes += lv.nbytes - old
    return n + len(values)


def pop(run: Run, name: str, left: bool) -> bytes | None:
    """LPOP/RPOP without a count: the element, None when there is no key."""
    ks = run.ks
    lv: ListValue | None = _value(run, name, LIST)
    if lv is None:
        return None
    n = len(lv)
    _changed(run, name, ("L", name, 0 if left else n - 1, 1, [], ks.list_fill))
    old = lv.nbytes
    out = lv.pop_head() if left else lv.pop_tail()
    ks.nbytes += lv.nbytes - old
    _gone(run, name, lv)
    return out


# ---- hashes and sets (hashes.hset, sets.sadd) -----------------------------------------------

def hset(run: Run, name: str, pairs: list[tuple[bytes, bytes]]) -> Any:
    """HSET: how many fields are new; SLOW for a hash with field deadlines (Rule 3)."""
    ks = run.ks
    hv: HashValue | None = _value(run, name, HASH)
    if hv is not None and hv.ttls is not None:
        return SLOW
    ch = hashes.change(ks, name, pairs, [])
    if len(pairs) == 1:  # HashValue.set tells whether its field is new: no look-up first
        hv = _target(run, name, hv, ch, _new_hash)
        old = hv.nbytes
        added = 1 if hv.set(pairs[0][0], pairs[0][1], (ch[4], ch[5])) else 0
    else:
        added = hashes.new_fields(hv, pairs)
        hv = _target(run, name, hv, ch, _new_hash)
        old = hv.nbytes
        hv.set_many(pairs, (ch[4], ch[5]))
    ks.nbytes += hv.nbytes - old
    return added


def sadd(run: Run, name: str, members: list[bytes]) -> int:
    """SADD: how many members are new."""
    ks = run.ks
    sv: SetValue | None = _value(run, name, SET, False)  # stamped below, with the add
    if len(members) == 1:
        new = members if sv is None or members[0] not in sv else []
    else:
        new = [m for m in dict.fromkeys(members) if sv is None or m not in sv]
    if not new:
        if sv is not None:
            sv.second = run.second
        return 0
    ch = sets.change(ks, name, new, [])
    sv = _target(run, name, sv, ch, _new_set)
    old = sv.nbytes
    sv.add_many(new, ch[4], run.second, True)  # the access and the add: one new run
    ks.nbytes += sv.nbytes - old
    return len(new)


# ---- sorted sets (zsets.zadd without options, zsets.pop_from of one) ------------------------

def zadd(run: Run, name: str, pairs: list[tuple[float, bytes]]) -> int:
    """ZADD without options: how many members are new."""
    ks = run.ks
    zv: ZsetValue | None = _value(run, name, ZSET)
    seen: dict[bytes, float] = {}
    fresh: set[bytes] = set()  # members absent from the value: set() need not look again
    added = 0
    for score, member in pairs:
        cur = seen.get(member)
        if cur is None and zv is not None:
            cur = zv.score(member)
        if cur is None:
            added += 1
            seen[member] = score
            fresh.add(member)
        elif score != cur:
            seen[member] = score
    if not seen:
        return added
    members = list(seen.items())
    ch = zsets.change(ks, name, members, [])
    zv = _target(run, name, zv, ch, _new_zset)
    old = zv.nbytes
    limits = (ch[4], ch[5])
    for m, score in members:
        zv.set(m, score, limits, m in fresh)
    ks.nbytes += zv.nbytes - old
    return added


def zpop(run: Run, name: str, top: bool) -> list[Any]:
    """ZPOPMIN/ZPOPMAX without a count: [member, score], [] when there is no key."""
    ks = run.ks
    zv: ZsetValue | None = _value(run, name, ZSET)
    if zv is None:
        return []
    member, score = zv.end(top)
    _changed(run, name, zsets.change(ks, name, [], [member]))
    old = zv.nbytes
    zv.drop_end(top, member)
    ks.nbytes += zv.nbytes - old
    _gone(run, name, zv)
    return [member, score]
