"""COMMAND GETKEYS / GETKEYSANDFLAGS / LIST: keys found from key specs, as redis-server 7.0.

Rule 1: a command's key specs are Redis 7's: `begin_search` (an argument index, or a keyword
searched from `startfrom`) then `find_keys` (a range: `lastkey` relative to the begin
(-1 = the last argument), `keystep`, `limit`; or `keynum`: the key count at an offset, then
the keys). Plain commands derive theirs from first/last/step (server.py's COMMAND INFO);
the movable ones (key positions depend on the arguments: XREAD's STREAMS, EVAL's and
LMPOP's numkeys) are listed in MOVABLE and carry the `movablekeys` flag.
Rule 2: GETKEYS answers in redis-server's order of checks: `Invalid command specified`
(unknown), `The command has no key arguments`, `Invalid number of arguments specified for
command` (the named command's arity), then the keys; no key found is `Invalid arguments
specified for command`, or an empty array for a `no_mandatory_keys` command (EVAL).
Rule 3: GETKEYSANDFLAGS gives each key its spec's flags, except SET, whose flags vary with
its arguments (Redis's setGetKeys: `RW access update` with a GET option, else `OW update`).
Rule 4: COMMAND LIST names every command and subcommand (`client|list`); FILTERBY ACLCAT
keeps those in the category, PATTERN those whose full name matches (case-insensitively),
MODULE none (there are no modules).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from topicsrv.engine.glob import PatternTooLong, compile_glob
from topicsrv.engine.keyspace.values import parse_i64
from topicsrv.resp.acl import categories
from topicsrv.resp.commands.base import (
    REGISTRY,
    SYNTAX,
    CommandContext,
    CommandSpec,
    Err,
    Simple,
    command,
    lookup,
)
from topicsrv.resp.commands.keyspecs import KEY_FLAGS

_RW_ACCESS_UPDATE = ("RW", "access", "update")
_EVAL_NOTES = "We cannot tell how the keys will be used so we assume the worst"


@dataclass(frozen=True, slots=True)
class KeySpec:
    """One Redis 7 key spec (Rule 1). `keyword` set: begin at the argument after it (searched
    from `index`); else begin at `index`. `keynum` >= 0: the count is at begin + keynum and the
    keys start at begin + first; else a range to `last` (relative) every `step`, `limit`."""

    flags: tuple[str, ...]
    index: int
    keyword: str | None = None
    last: int = 0
    step: int = 1
    limit: int = 0
    keynum: int = -1
    first: int = 1
    notes: str | None = None
    unknown: bool = False  # Redis's `unknown` begin_search and find_keys (SORT's BY/GET/STORE)


def _streams(startfrom: int) -> list[KeySpec]:
    return [KeySpec(("RO", "access"), startfrom, "STREAMS", -1, 1, 2)]


def _numkeys(ro: bool, notes: bool = True) -> list[KeySpec]:
    flags = ("RO", "access") if ro else _RW_ACCESS_UPDATE
    text = _EVAL_NOTES + (", RO and ACCESS" if ro else ", RW and UPDATE")
    return [KeySpec(flags, 2, keynum=0, first=1, notes=text if notes else None)]


MOVABLE: dict[str, list[KeySpec]] = {
    "xread": _streams(1), "xreadgroup": _streams(4),
    # numkeys then the keys: LMPOP's count is argument 1, BLMPOP's 2 (after the timeout)
    "lmpop": [KeySpec(("RW", "access", "delete"), 1, keynum=0, first=1)],
    "blmpop": [KeySpec(("RW", "access", "delete"), 2, keynum=0, first=1)],
    "eval": _numkeys(False), "evalsha": _numkeys(False, False), "eval_ro": _numkeys(True),
    "evalsha_ro": _numkeys(True, False), "fcall": _numkeys(False), "fcall_ro": _numkeys(True),
}
# the sorted-set commands: numkeys then the keys (ZMPOP's count is argument 1, BZMPOP's 2),
# and the *STORE commands' destination, then their numkeys and sources
_Z_POP, _Z_READ = ("RW", "access", "delete"), ("RO", "access")
MOVABLE.update({
    "zmpop": [KeySpec(_Z_POP, 1, keynum=0, first=1)],
    "bzmpop": [KeySpec(_Z_POP, 2, keynum=0, first=1)],
    **{c: [KeySpec(_Z_READ, 1, keynum=0, first=1)]
       for c in ("zunion", "zinter", "zdiff", "zintercard")},
    **{c: [KeySpec(("OW", "update"), 1), KeySpec(_Z_READ, 2, keynum=0, first=1)]
       for c in ("zunionstore", "zinterstore", "zdiffstore")},
})
_Z_STORES = frozenset(("zunionstore", "zinterstore", "zdiffstore"))
_SORT_BY_GET = KeySpec(("RO", "access"), 0, unknown=True, notes=(
    "For the optional BY/GET keyword. It is marked 'unknown' because the key names derive from "
    "the content of the key we sort"))
_SORT_STORE = KeySpec(("OW", "update"), 0, unknown=True, notes=(
    "For the optional STORE keyword. It is marked 'unknown' because the keyword can appear "
    "anywhere in the argument array"))
MOVABLE["sort"] = [KeySpec(("RO", "access"), 1), _SORT_BY_GET, _SORT_STORE]
MOVABLE["sort_ro"] = [KeySpec(("RO", "access"), 1), _SORT_BY_GET]
_SORT_SKIP = {b"limit": 2, b"get": 1, b"by": 1}


def _sort_store(argv: list[bytes]) -> int | None:
    """Where SORT's STORE destination is (Redis's sortGetKeys: the last STORE with an argument
    after it; LIMIT, GET and BY skip their arguments)."""
    found = None
    i, n = 2, len(argv)
    while i < n:
        word = argv[i].lower()
        if word in _SORT_SKIP:
            i += _SORT_SKIP[word]
        elif word == b"store" and i + 1 < n:
            found = i + 1
            i += 1
        i += 1
    return found

# the set commands: SINTERCARD's numkeys, and the *STORE commands' destination then sources
MOVABLE["sintercard"] = [KeySpec(("RO", "access"), 1, keynum=0, first=1)]
MOVABLE["sinterstore"] = [KeySpec(("RW", "update"), 1), KeySpec(("RO", "access"), 2, last=-1)]
for _store in ("sunionstore", "sdiffstore"):
    MOVABLE[_store] = [KeySpec(("OW", "update"), 1), KeySpec(("RO", "access"), 2, last=-1)]


def key_specs(spec: CommandSpec) -> list[KeySpec]:
    """The command's key specs (Rule 1), in COMMAND INFO's order."""
    movable = MOVABLE.get(spec.name)
    if movable is not None:
        return movable
    if spec.first_key <= 0:
        return []
    last = spec.last_key - spec.first_key if spec.last_key >= 0 else spec.last_key
    table = KEY_FLAGS.get(spec.name)
    if table is None:
        flags = ("RW",) if "write" in spec.flags else ("RO",)
        return [KeySpec(flags, spec.first_key, None, last, spec.step)]
    if len(table) == 1:
        return [KeySpec(table[0][0], spec.first_key, None, last, spec.step, notes=table[0][1])]
    return [KeySpec(f, spec.first_key + i, None, 0, 1, notes=n) for i, (f, n) in enumerate(table)]


def spec_reply(ks: KeySpec) -> dict[str, Any]:
    """One key spec as COMMAND INFO shows it."""
    out: dict[str, Any] = {} if ks.notes is None else {"notes": ks.notes}
    out["flags"] = [Simple(f) for f in ks.flags]
    if ks.unknown:
        out["begin_search"] = {"type": "unknown", "spec": {}}
        out["find_keys"] = {"type": "unknown", "spec": {}}
        return out
    if ks.keyword is None:
        out["begin_search"] = {"type": "index", "spec": {"index": ks.index}}
    else:
        out["begin_search"] = {"type": "keyword",
                               "spec": {"keyword": ks.keyword, "startfrom": ks.index}}
    if ks.keynum >= 0:
        out["find_keys"] = {"type": "keynum", "spec": {"keynumidx": ks.keynum,
                                                       "firstkey": ks.first, "keystep": ks.step}}
    else:
        out["find_keys"] = {"type": "range",
                            "spec": {"lastkey": ks.last, "keystep": ks.step, "limit": ks.limit}}
    return out


def _begin(ks: KeySpec, argv: list[bytes]) -> int | None:
    """Where the keys of `ks` begin; None when its keyword is absent (the last argument is
    never the keyword: a key must follow it)."""
    if ks.keyword is None:
        return ks.index
    word = ks.keyword.encode().lower()
    n = len(argv)
    indices = range(ks.index, n - 1) if ks.index >= 0 else range(n + ks.index, 0, -1)
    for i in indices:
        if argv[i].lower() == word:
            return i + 1
    return None


def _positions(ks: KeySpec, argv: list[bytes]) -> list[int] | None:
    """Argument positions of the keys of one spec: [] when it finds none (a missing keyword,
    a range past the arguments), None when its key count is not a number >= 0, which voids
    every spec (Redis's invalid_spec)."""
    begin = None if ks.unknown else _begin(ks, argv)
    if begin is None:
        return []
    n = len(argv)
    if ks.keynum >= 0:
        at = begin + ks.keynum
        count = parse_i64(argv[at]) if at < n else None
        if count is None or count < 0:
            return None
        first = begin + ks.first
        last = first + (count - 1) * ks.step
    else:
        first = begin
        if ks.last >= 0:
            last = begin + ks.last
        elif ks.limit <= 1:
            last = n + ks.last
        else:
            last = begin + (n + ks.last - begin + 1) // ks.limit - 1
    if last >= n or last < first:
        return []
    return list(range(first, last + 1, ks.step))


def keys_of(spec: CommandSpec, argv: list[bytes]) -> list[tuple[int, tuple[str, ...]]] | None:
    """(position, flags) of every key of `argv` (the command and its arguments), or None when
    a spec cannot be applied (Rule 2)."""
    out: list[tuple[int, tuple[str, ...]]] = []
    for ks in key_specs(spec):
        found = _positions(ks, argv)
        if found is None:
            return None
        out += [(p, ks.flags) for p in found]
    if spec.name == "sort" and out:  # the STORE key (SORT_RO has none)
        store = _sort_store(argv)
        if store is not None:
            out.append((store, _SORT_STORE.flags))
    if spec.name in _Z_STORES and len(out) < 2:  # no source: no keys (Redis's getkeys_proc)
        return []
    if spec.name == "set" and out:  # Rule 3
        has_get = any(a.lower() == b"get" for a in argv[3:])
        out = [(out[0][0], _RW_ACCESS_UPDATE if has_get else ("OW", "update"))]
    return out


class FlagSet(set[Simple]):
    """A RESP3 set (an array in RESP2) sent in Redis's order of the flags (RO RW OW RM, then
    the rest): the encoder iterates it, and Python's own set order would vary per process."""

    __slots__ = ("_order",)

    def __init__(self, items: Iterable[Simple]) -> None:
        self._order = tuple(items)
        super().__init__(self._order)

    def __iter__(self) -> Iterator[Simple]:
        return iter(self._order)


def _getkeys(args: list[bytes], with_flags: bool) -> Any:
    spec, used = lookup(args)
    if spec is None or (spec.subcommands and used == 1):
        raise Err("ERR Invalid command specified")
    if not key_specs(spec):
        raise Err("ERR The command has no key arguments")
    n = len(args)
    if (spec.arity > 0 and n != spec.arity) or n < -spec.arity:
        raise Err("ERR Invalid number of arguments specified for command")
    found = keys_of(spec, args)
    if not found:
        if "no_mandatory_keys" in spec.flags:
            return []
        raise Err("ERR Invalid arguments specified for command")
    if not with_flags:
        return [args[p] for p, _ in found]
    return [[args[p], FlagSet(Simple(f) for f in flags)] for p, flags in found]


def _sub(name: str, arity: int, summary: str, syntax: str, since: str) -> Any:
    return command(f"command|{name}", arity, ["loading", "stale"], 0, 0, 0, "server", summary,
                   since, syntax=syntax)


@_sub("getkeys", -4, "Extract keys given a full Redis command", "command:string [arg:string...]",
      "2.8.13")
def command_getkeys(ctx: CommandContext, args: list[bytes]) -> Any:
    return _getkeys(args, False)


@_sub("getkeysandflags", -4, "Extract keys and access flags given a full Redis command",
      "command:string [arg:string...]", "7.0.0")
def command_getkeysandflags(ctx: CommandContext, args: list[bytes]) -> Any:
    return _getkeys(args, True)


def _all_specs() -> list[CommandSpec]:
    out: list[CommandSpec] = []
    for spec in REGISTRY.values():
        out.append(spec)
        out.extend(spec.subcommands.values())
    return out


@_sub("list", -2, "Get an array of Redis command names",
      "[FILTERBY (MODULE:module-name:string|ACLCAT:category:string|PATTERN:pattern:pattern)]",
      "7.0.0")
def command_list(ctx: CommandContext, args: list[bytes]) -> Any:
    specs = _all_specs()
    if not args:
        return [s.name for s in specs]
    if len(args) != 3 or args[0].lower() != b"filterby":
        raise Err(SYNTAX)
    kind, value = args[1].lower(), args[2]
    if kind == b"module":
        return []
    if kind == b"aclcat":
        cat = "@" + value.decode("latin-1").lower()
        return [s.name for s in specs if s.handler is not None and cat in categories(s)]
    if kind == b"pattern":
        try:
            match = compile_glob(value.lower()).match
        except PatternTooLong as e:
            raise Err(f"ERR {e}") from None
        return [s.name for s in specs if match(s.name.encode("latin-1"))]
    raise Err(SYNTAX)
