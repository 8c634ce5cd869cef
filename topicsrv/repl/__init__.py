"""Replication: a replica follows its primary's journal (docs/replication.md).

The primary ships its journal: every WAL frame its storage enqueues (plus the frames the
classes that write no WAL would have written), in the order the engine made them, is also
fed to a `Backlog` (backlog.py) whose byte offsets are Redis's replication offsets. A replica
(its link task: tasks/replica.py) holds a RESP connection to the primary: a full sync brings the primary's
checkpoint over and restarts the replica's process in place on it (the recovery path, no
second loader), then the frames after the checkpoint's cut stream in and are applied live
(storage/replapply.py) through the replica's own storage, under its own durability classes.

What the fronts see (role, READONLY, WAIT, INFO replication, ROLE) is `ReplState`
(state.py); the primary's side of each link, acknowledgements and WAIT are in primary.py.

Arrows: repl imports engine and storage (it sits with context/ and tasks/, layer 3 of
tests/test_layering.py); context, tasks, the fronts and server.py import repl; the engine
and storage never import repl (storage holds a backlog it was handed, typed loosely).
"""
