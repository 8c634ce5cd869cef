"""A server's replication role and what it persists of it (data_dir/replication.json).

Rule 1 (role): `master` is None on a primary, (host, port) on a replica. A replica refuses
writes from clients (READONLY, dispatch.py; HTTP 409 `read_only_replica`); only its link
(tasks/replica.py) changes its data. The primary alone runs what its clock decides (key and
field expiry, lease timeouts, router forwarding): those tasks ask `acting()` first.
Rule 2 (ids): `replid` names a history of offsets: a new random one at every start of a
primary and at every promotion (`REPLICAOF NO ONE`), where the old one becomes `replid2`,
valid up to `second_offset` (Redis's PSYNC2: a replica of the old primary that is not ahead
of the promoted one resumes from its backlog instead of a full sync). `run_id` is random per
process start.
Rule 3 (persisted): `replication.json` holds the role, the primary's address and, for a
replica, the (replid, offset) its disk state corresponds to: written at each role change
and CONFIG REWRITE (so a restarted server comes back in the role it was given; it wins over
`--replicaof`), after a full sync, and at a clean stop (`clean: true`, the offset of the final
checkpoint). A replica that starts without `clean` resumes with a full sync: its disk may hold
frames past the offset it knows.
Rule 4 (compiled, buildinfo.HOT_MODULES): the dispatcher reads the role and the replica
settings on every command (READONLY, NOREPLICAS, WAIT's acknowledgements), so they are fields
of a compiled class rather than a Python object's generic attributes; CONFIG SET sets them by
name (declared fields only, as any compiled class).
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

log = logging.getLogger("topicsrv.repl")

FILE: Final = "replication.json"


def new_id() -> str:
    return secrets.token_hex(20)


@dataclass
class ReplState:
    data_dir: Path | None = None
    master: tuple[str, int] | None = None
    replid: str = field(default_factory=new_id)
    replid2: str = "0" * 40
    second_offset: int = -1
    run_id: str = field(default_factory=new_id)
    masteruser: str | None = None
    masterauth: str | None = None
    priority: int = 100  # replica-priority (Sentinel promotes the lowest non-zero first)
    announce: bool = True  # replica-announced
    backlog_size: int = 1 << 20
    min_replicas_to_write: int = 0
    min_replicas_max_lag: int = 10
    min_replicas_to_ack: int = 0  # synchronous replication (repl/primary.py Rule 6)
    # a replica's link, as INFO shows it (tasks/replica.py keeps these current)
    link_up: bool = False
    link_down_since: float = field(default_factory=time.monotonic)
    last_io: float = field(default_factory=time.monotonic)
    sync_in_progress: bool = False
    offset: int = 0  # a replica: the offset applied; a primary: the backlog's (primary.py)
    resume: tuple[str, int] | None = None  # a replica: where its disk state stands (Rule 3)
    state: str = "connect"  # ROLE's replica state: connect, connecting, sync, connected
    changed: Any = None  # a trio.Event set on each role change (the link task waits on it)
    link_scope: Any = None  # the running link's trio.CancelScope (a role change cancels it)

    @property
    def replica(self) -> bool:
        return self.master is not None

    def acting(self) -> bool:
        """Rule 1: True on a primary (its clock decides expiry, timeouts, forwarding)."""
        return self.master is None

    # ---- Rule 3 -----------------------------------------------------------------------------

    def load(self) -> bool:
        """Read replication.json; True when it named a role."""
        if self.data_dir is None:
            return False
        path = self.data_dir / FILE
        try:
            data = json.loads(path.read_text())
        except FileNotFoundError:
            return False
        except (OSError, ValueError) as exc:
            log.error("%s cannot be read (%s): starting from --replicaof", path, exc)
            return False
        master = data.get("master")
        self.master = (str(master[0]), int(master[1])) if master else None
        if self.master is not None and data.get("clean") and data.get("replid"):
            self.resume = (str(data["replid"]), int(data["offset"]))
        return True

    def save(self, clean: bool = False) -> None:
        if self.data_dir is None:
            return
        data: dict[str, Any] = {"master": list(self.master) if self.master else None}
        if self.master is not None and self.resume is not None:
            data["replid"], data["offset"] = self.resume
        if clean:
            data["clean"] = True
        self.data_dir.mkdir(parents=True, exist_ok=True)
        path = self.data_dir / FILE
        tmp = path.with_suffix(".json.tmp")
        with open(tmp, "w") as f:
            f.write(json.dumps(data))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        fd = os.open(self.data_dir, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
