"""XSETID: set a stream's last ID, Redis 7.0's xsetidCommand (engine/log/xids.py Rule 4).

Rule 1: the checks and their texts are Redis's, in its order: the ID and the options first
  (`ENTRIESADDED` >= 0, `MAXDELETEDID` <= the ID), then the key (`ERR no such key`), then
  the ID against the last live entry and ENTRIESADDED against the length.
Rule 2: the topic becomes ID-mapped (a later `*` XADD follows the new last ID); the change is
  journaled (a T_XSETID frame) before the reply, so it survives a crash.
Rule 3: ENTRIESADDED and MAXDELETEDID are validated, not stored: `entries-added` and
  `max-deleted-entry-id` are derived from the log (docs/redis-compatibility.md).
"""

from __future__ import annotations

from typing import Any

from topicsrv.engine.log import xids
from topicsrv.engine.log.reads import scan_range
from topicsrv.resp import ids
from topicsrv.resp.args import Args
from topicsrv.resp.commands.base import WRONGTYPE, CommandContext, Err, Simple, committed, key_name
from topicsrv.resp.commands.base import command as _command


@_command("xsetid", -3, ["write", "denyoom", "fast"], 1, 1, 1, "stream",
          "An internal command for replicating stream values.", "5.0.0",
          syntax="key:key last-id:string [ENTRIESADDED:entries-added:integer] "
                 "[MAXDELETEDID:max-deleted-id:string]", complexity="O(1)")
def xsetid(ctx: CommandContext, args: list[bytes]) -> Any:
    sid = ids.parse_id(args[1], 0)
    x = (sid.ms, sid.seq)
    entries_added = -1
    a = Args(args, 2)
    while a:
        if a.option(b"entriesadded"):
            entries_added = a.next_int()
            if entries_added < 0:
                raise Err("ERR entries_added must be positive")
        elif a.option(b"maxdeletedid"):
            m = a.next_id(0)
            if x < (m.ms, m.seq):
                raise Err("ERR The ID specified in XSETID is smaller than the provided "
                          "max_deleted_entry_id")
        else:
            raise a.syntax_error()
    topic = ctx.engine.find(key_name(args[0]))
    if topic is None:
        raise Err("ERR no such key")
    if topic.type != "log":
        raise Err(WRONGTYPE)
    now = ctx.engine.now()
    topic.expire(now)
    if topic.count:
        last = scan_range(topic, 0, topic.head_seq, 1, now, reverse=True)
        if last and x < xids.xid_of(topic, last[0][0]):
            raise Err("ERR The ID specified in XSETID is smaller than the target stream top item")
        if entries_added != -1 and topic.count > entries_added:
            raise Err("ERR The entries_added specified in XSETID is smaller than the target "
                      "stream length")
    return committed(ctx.engine.set_stream_id(topic, x), Simple("OK"))
