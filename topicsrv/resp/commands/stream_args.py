"""The arguments of the stream commands, parsed once: XADD (also for the XADD coalescing of
resp/batch.py), XTRIM, XREAD and XREADGROUP.

Rule 1: each parser is redis-server's (streamParseAddOrTrimArgsOrReply, xreadCommand): the
same option order, the same `moreargs` rules (topicsrv/resp/args.py), the same error texts,
raised before anything is touched.
Rule 2: topicsrv's additions are options of the same loops: `NODE`/`TAG` on XADD (the
record's node and tag), `NODE` (repeatable) on XREAD and XREADGROUP (skip that node's records).
Rule 2b: `KEEPREF | DELREF | ACKED` (Redis 8.2) may stand anywhere among the trim options,
once; without MAXLEN/MINID it has nothing to act on.
Rule 3: XADD's ID is `*`, `<ms>-<seq>`, `<ms>` (= `<ms>-0`) or `<ms>-*`, parsed as Redis's
streamParseStrictIDOrReply (`-`/`+` refused); whether it fits the stream is the engine's
call (engine/log/xids.py), with Redis's texts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from topicsrv.resp import ids
from topicsrv.resp.args import Args
from topicsrv.resp.commands.base import Err, parse_int, wrong_args

UNBALANCED: Final = ("ERR Unbalanced XREAD list of streams: for each stream key an ID or '$' must be "
              "specified.")
ZERO_ID: Final = "ERR The ID specified in XADD must be greater than 0-0"


@dataclass(slots=True)
class Trim:
    strategy: str  # "maxlen" | "minid"
    threshold: int | ids.StreamId
    approx: bool
    limit: int
    policy: str = "keepref"  # KEEPREF | DELREF | ACKED (Redis 8.2; engine/groups/grouprefs.py)


@dataclass(slots=True)
class XAdd:
    key: bytes
    pairs: list[bytes]
    trim: Trim | None = None
    nomkstream: bool = False
    node: str | None = None
    tag: str | None = None
    xid: tuple[int, int | None] | None = None  # a client-chosen ID; (ms, None) is `<ms>-*`
    idmp: tuple[bytes, bytes | None] | None = None  # IDMP (pid, iid); IDMPAUTO: (pid, None)



def plain_pairs(args: list[bytes], start: int = 0) -> list[bytes] | None:
    """The field/value pairs of the common form `key * field value ...` at args[start] (Redis's
    own fast path), or None: the full parser decides. batch.py coalesces exactly this form."""
    n = len(args) - start
    if n >= 4 and n % 2 == 0 and args[start + 1] == b"*":
        return args[start + 2:]
    return None


def parse_xadd(args: list[bytes]) -> XAdd:
    """`key [NOMKSTREAM] [IDMP pid iid | IDMPAUTO pid] [NODE n] [TAG t] [MAXLEN|MINID [=|~] thr
    [LIMIT c]] * field value ...`"""
    pairs = plain_pairs(args)
    if pairs is not None:
        return XAdd(args[0], pairs)
    out = XAdd(args[0], [])
    a = Args(args, 1)
    out.trim = _trim_options(a, out)
    out.pairs = a.rest()[1:]  # after the `*` or the ID
    if len(out.pairs) < 2 or len(out.pairs) % 2:
        raise wrong_args("xadd")
    if out.idmp is not None and out.xid is not None:
        raise Err("ERR IDMP/IDMPAUTO can be used only with auto-generated IDs")
    if out.xid == (0, 0):  # before the key is looked at (Redis)
        raise Err(ZERO_ID)
    return out


def _idmp_option(a: Args, xadd: XAdd) -> bool:
    """`IDMP producer-id idempotent-id` | `IDMPAUTO producer-id` (Redis 8.6)."""
    opt = a.option(b"idmp", nargs=2) or a.option(b"idmpauto")
    if opt is None:
        return False
    if xadd.idmp is not None:
        raise Err("ERR IDMP/IDMPAUTO specified multiple times")
    name = "IDMP" if opt == b"idmp" else "IDMPAUTO"
    pid = a.next()
    if not pid:
        raise Err(f"ERR {name} requires a non-empty producer ID")
    iid = a.next() if opt == b"idmp" else None
    if iid is not None and not iid:
        raise Err("ERR IDMP requires a non-empty idempotent ID")
    xadd.idmp = (pid, iid)
    return True


def parse_add_id(arg: bytes) -> tuple[int, int | None]:
    """XADD's explicit ID: (ms, seq), or (ms, None) for `<ms>-*`."""
    if arg[-2:] == b"-*":
        return ids.parse_id(arg[:-2]).ms, None
    sid = ids.parse_id(arg, 0)
    return sid.ms, sid.seq


def parse_xtrim(args: list[bytes]) -> Trim:
    """`key MAXLEN|MINID [=|~] threshold [LIMIT count]`"""
    trim = _trim_options(Args(args, 1), None)
    assert trim is not None
    return trim


def _trim_options(a: Args, xadd: XAdd | None) -> Trim | None:
    """Redis's streamParseAddOrTrimArgsOrReply; XADD extras go into `xadd`, which stops at `*`."""
    trim: Trim | None = None
    limit: int | None = None
    policy: bytes | None = None
    while a:
        if xadd is not None and a.peek() == b"*":
            break
        strategy = a.option(b"maxlen", b"minid")
        if strategy:
            if trim is not None:
                raise Err("ERR syntax error, MAXLEN and MINID options at the same time are "
                          "not compatible")
            approx = False
            if a.remaining >= 2 and a.peek() in (b"~", b"="):
                approx = a.next() == b"~"
            threshold: int | ids.StreamId
            if strategy == b"maxlen":
                threshold = a.next_int()
                if threshold < 0:
                    raise Err("ERR The MAXLEN argument must be >= 0.")
            else:
                threshold = a.next_id(0)
            trim = Trim(strategy.decode(), threshold, approx, 0)
        elif a.option(b"limit"):
            limit = a.next_int()
            if limit < 0:
                raise Err("ERR The LIMIT argument must be >= 0.")
        elif policy is None and (p := a.flag(b"keepref", b"delref", b"acked")):
            policy = p  # once: a second one is XADD's ID (invalid) or XTRIM's syntax error
        elif xadd is None:
            raise a.syntax_error()
        elif a.flag(b"nomkstream"):
            xadd.nomkstream = True
        elif _idmp_option(a, xadd):
            pass
        elif label := a.option(b"node", b"tag"):
            if label == b"node":
                xadd.node = a.next_text()
            else:
                xadd.tag = a.next_text()
        else:  # a syntax error, or the ID
            xadd.xid = parse_add_id(a.peek())
            break
    if limit and trim is None:
        raise Err("ERR syntax error, LIMIT cannot be used without specifying a trimming strategy")
    if xadd is None and trim is None:
        raise Err("ERR syntax error, XTRIM must be called with a trimming strategy")
    if limit is not None and (trim is None or not trim.approx):
        raise Err("ERR syntax error, LIMIT cannot be used without the special ~ option")
    if trim is not None:
        trim.limit = limit or 0
        trim.policy = (policy or b"keepref").decode()
    return trim


def block_timeout(arg: bytes) -> float | None:
    """BLOCK ms in seconds; None = forever (`BLOCK 0`)."""
    ms = parse_int(arg, "ERR timeout is not an integer or out of range")
    if ms < 0:
        raise Err("ERR timeout is negative")
    return None if ms == 0 else ms / 1000.0


@dataclass(slots=True)
class ReadArgs:
    count: int  # 0 = no COUNT
    timeout: float | None  # seconds; None = forever (with block)
    block: bool
    nodes: list[str] | None
    keys: list[bytes]
    ids: list[bytes]
    group: str | None = None  # XREADGROUP
    consumer: str | None = None
    noack: bool = False
    claim: int | None = None  # XREADGROUP CLAIM min-idle-time (Redis 8.4), ms


def parse_read_args(args: list[bytes], group: bool = False) -> ReadArgs:
    """XREAD `[COUNT n] [BLOCK ms] [NODE n]... STREAMS key... id...`; with `group`, XREADGROUP
    `GROUP g c [COUNT n] [BLOCK ms] [CLAIM min-idle] [NOACK] [NODE n]... STREAMS key... id...`
    (xreadCommand)."""
    out = ReadArgs(0, None, False, None, [], [])
    a = Args(args)
    while a:
        if a.option(b"block"):
            out.timeout, out.block = block_timeout(a.next()), True
        elif a.option(b"count"):
            out.count = max(0, a.next_int())
        elif a.option(b"node"):
            out.nodes = (out.nodes or []) + [a.next_text()]
        elif a.option(b"streams"):
            rest = a.rest()
            if len(rest) % 2:
                raise Err(UNBALANCED)
            half = len(rest) // 2
            out.keys, out.ids = rest[:half], rest[half:]
            break
        elif a.option(b"group", nargs=2):
            if not group:
                raise Err("ERR The GROUP option is only supported by XREADGROUP. You called "
                          "XREAD instead.")
            out.group, out.consumer = a.next_text(), a.next_text()
        elif a.flag(b"noack"):
            if not group:
                raise Err("ERR The NOACK option is only supported by XREADGROUP. You called "
                          "XREAD instead.")
            out.noack = True
        elif a.option(b"claim"):
            if not group:
                raise Err("ERR The CLAIM option is only supported by XREADGROUP. You called "
                          "XREAD instead.")
            out.claim = parse_int(a.next(), "ERR min-idle-time is not an integer")
            if out.claim < 0:
                raise Err("ERR min-idle-time must be a positive integer")
        else:
            raise a.syntax_error()
    else:
        raise a.syntax_error()  # STREAMS is mandatory
    if group and out.group is None:
        raise Err("ERR Missing GROUP option for XREADGROUP")
    return out
