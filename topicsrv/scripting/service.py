"""The server's scripting state: the EVAL scripts' Lua state, the function libraries, the
greenlet scripts run in, the running script, and the settings (busy-reply-threshold).

Rule 1: one per server (`scripting_of`), made on first use; the libraries stored in the data
dir (storage/functions.py) are loaded then, so functions survive a restart.
Rule 2: `server.busy` holds the BUSY text while a script runs past the threshold (runner.py
Rule 2); the dispatcher reads it.
Rule 3 (one commit group): a script's writes are one commit group (engine/journal.py Rule 4,
storage/txgroup.py): opened before the script starts, closed on the loop thread when it ends,
whether it ends inside the EVAL step or past the threshold (then also when its client went
away meanwhile). After a crash all of its writes are back or none. Past the threshold other
tasks run while it is open: the group is told it spans turns (`span_turns`, txgroup.py Rule
7) as the script goes busy, before the loop gets its turn, and the tokens that returns join
the script's own (its reply waits for the group to be durable).
Rule 4 (no partial state seen): while a script runs the engine holds its change
notifications (engine/core.py Rule 3): a blocked XREAD, an SSE watch or a long poll woken by
the script's first write would otherwise read the state between two of its writes once the
script is past the threshold; they wake when it ends. Other RESP commands answer BUSY
(dispatch Rule 9) and HTTP requests 503 `busy` (topicsrv/http/app.py Rule 5).
Rule 5: FUNCTION LOAD loads into the libraries' existing Lua state (functions.py); the stored
file is rewritten only when the set of library codes changed (`stored` is the set on disk).
Rule 6 (a stop under a busy script: whole or nothing): SHUTDOWN NOSAVE `discard`s the running
script: its commit group is dropped unwritten (engine/journal.py Rule 5, storage/txgroup.py
Rule 11), it is killed, its client gets DISCARDED instead of any reply, and the BUSY text
stays up until the process exits, so no client reads what the script left in memory. A
script past the threshold counts as a request in flight for a graceful stop (lifecycle.py
Rule 1) until its group is written, so SIGTERM lets it run for the shutdown grace: one that
ends within it is kept whole (its client may see the connection close before the reply, as
with redis-server); storage drops the group of one that has not (Storage.close).
Rule 7 (replicas): every change of the library set (FUNCTION LOAD, DELETE, FLUSH, RESTORE)
is fed whole to the replication backlog (a T_FUNCTIONS frame, topicsrv/repl/); a replica
replaces its set with it (`replace_all`, which server.py hands its link) and stores it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from types import CoroutineType
from typing import TYPE_CHECKING, Any

import orjson

from topicsrv.scripting.functions import Libraries
from topicsrv.scripting.lua import MEMORY_LIMIT, LuaState, Run, ScriptError
from topicsrv.scripting.runner import Runner
from topicsrv.storage import functions as stored
from topicsrv.storage.frames import T_FUNCTIONS

if TYPE_CHECKING:
    from topicsrv.context import ServerContext

log = logging.getLogger("topicsrv.scripting")

BUSY_SCRIPT = "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE."
BUSY_FUNCTION = ("BUSY Redis is busy running a script. You can only call FUNCTION KILL or "
                 "SHUTDOWN NOSAVE.")
THRESHOLD_S = 5.0
DISCARDED = ("ERR SHUTDOWN NOSAVE stopped the server while the script ran: none of its writes "
             "were kept")


class Scripting:
    def __init__(self, server: ServerContext) -> None:
        self.server = server
        limit = MEMORY_LIMIT
        if server.config.max_memory:
            limit = max(16 << 20, min(limit, server.config.max_memory // 4))
        self.memory_limit = limit
        self.scripts = LuaState(limit)
        self.libraries = Libraries(limit)
        self.runner = Runner()
        self.threshold_s = THRESHOLD_S
        self.running: Run | None = None
        self.running_command: list[bytes] = []  # its argv (FUNCTION STATS)
        self.group_open = False  # the running script's commit group (Rule 3)
        self.discarded = False  # Rule 6: set once, the server is stopping
        self.stored: list[bytes] | None = None  # the libraries on disk (Rule 5)
        if server.config.storage:
            self.stored = stored.load(server.config.data_dir)
            for code in self.stored:
                try:
                    self.libraries.load(code, replace=True)
                except ScriptError as e:  # a library that loaded once loads again
                    log.error("stored function library not loaded: %s", e.text)

    def flush_scripts(self) -> None:
        self.scripts = LuaState(self.memory_limit)

    def persist(self) -> None:
        """Store the libraries (storage/functions.py), unless the set is the one already on
        disk: a FUNCTION LOAD REPLACE of the same code costs no fsynced rewrite (Rule 5).
        Replicas receive the whole set (Rule 7)."""
        codes = [lib.code for lib in self.libraries.libraries.values()]
        backlog = self.server.primary.backlog if self.server.repl.master is None else None
        if backlog is not None:
            backlog.body(T_FUNCTIONS, orjson.dumps([c.decode("latin-1") for c in codes]))
        if self.server.config.storage:
            if codes != self.stored:
                stored.save(self.server.config.data_dir, codes)
                self.stored = codes

    def replace_all(self, codes: list[bytes]) -> None:
        """Rule 7: a replica takes its primary's set whole (and stores it)."""
        self.libraries.flush()
        for code in codes:
            try:
                self.libraries.load(code, replace=True)
            except ScriptError as e:  # it loaded on the primary: this build differs
                log.error("a function library from the primary was not loaded: %s", e.text)
        self.persist()

    def _busy(self, text: str | None) -> None:
        drain = self.server.drain
        if text is not None:  # past the threshold: a request in flight until it ends (Rule 6)
            drain.enter()
            self.server.busy = text
            run = self.running
            if self.group_open and run is not None:  # Rule 3, before the loop's turn
                run.tokens.extend(self.server.engine.journal.span_turns())
            return
        if not self.discarded:  # Rule 6: else BUSY until the process exits
            self.server.busy = None
            self._end_group()  # a detached script ended (runner.py `_drive`, loop thread)
        drain.leave()

    def discard(self) -> None:
        """Rule 6: SHUTDOWN NOSAVE while a script runs past the threshold."""
        run = self.running
        if run is None:
            return
        self.discarded = True
        run.kill = True
        run.kill_text = DISCARDED.encode()
        if self.group_open:
            self.group_open = False
            self.server.engine.journal.discard_group()

    def _end_group(self) -> None:
        if self.group_open:
            self.group_open = False
            engine = self.server.engine
            engine.journal.end_group()
            engine.release_changes()

    def execute(self, run: Run, command: list[bytes], work: Callable[[], Any]) -> Any:
        """Run `work` (which runs the script) in the runner's greenlet on the loop thread: its
        result or an awaitable (runner.py Rules 1-2)."""
        self.running, self.running_command = run, command
        run.tick = self.runner.tick  # the caller's first step (runner.py Rule 2)

        def job() -> Any:
            try:
                return work()
            finally:
                self.running = None

        engine = self.server.engine
        engine.journal.begin_group()  # told `span_turns` if it goes busy (Rule 3)
        engine.hold_changes()
        self.group_open = True
        try:
            result = self.runner.execute(job, self.threshold_s, self._busy,
                                         BUSY_FUNCTION if run.function else BUSY_SCRIPT)
        except BaseException:
            self._end_group()
            raise
        if type(result) is not CoroutineType:  # runner.py: a coroutine once it went busy
            self._end_group()
        return result


def scripting_of(server: ServerContext) -> Scripting:
    s = server.scripting
    if s is None:
        s = server.scripting = Scripting(server)
    assert isinstance(s, Scripting)
    return s
