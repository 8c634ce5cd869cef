"""A full sync's files: what a primary's checkpoint is made of, read and installed (sans-trio).

Rule 1 (what is sent): checkpoint.json, the keyspace snapshot it names, functions.json, and
every segment file (.data and .idx) its topics list, read from the data dir or the cold dir,
right after the checkpoint was written and before anything can change them (the caller holds
the storage's checkpoint and segment locks). Paths are relative to the data dir; a replica
keeps every segment in its own data dir (recovery looks there first).
Rule 2 (installing): the replica's own state files (checkpoint.json, keyspace snapshots,
functions.json, topics/, wal/) are removed and the primary's written in their place, each
fsynced, checkpoint.json last, so a crash part-way leaves no checkpoint naming missing files
(the next start then has nothing and syncs again).
Rule 3 (paths): a name sent by a primary is refused unless it stays inside the data dir.
Rule 4 (no reserved seqs): a topic's `ceiling` (the seqs its primary reserved ahead:
storage/walread.py) is its head in the replica's copy: the replica hands out no seq of its
own, it takes the primary's, and recovery would otherwise skip to the ceiling as after a crash.
Rule 5 (a `memory` keyspace): a primary whose keyspace writes nothing to disk still writes its
snapshot for a full sync, named `keyspace_for_replicas` so its own restart never loads it
(its keys live as long as its process); the replica's copy names it `keyspace`, and the
replica's first checkpoint drops it again if its own keyspace is `memory` too.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from topicsrv.storage import images, segfiles
from topicsrv.storage.functions import NAME as FUNCTIONS

Files = list[tuple[str, bytes]]


def read_files(data_dir: Path, cold_dir: Path | None) -> Files:
    """Rule 1."""
    ck = json.loads((data_dir / images.CHECKPOINT).read_bytes())
    for entry in ck.get("topics", []):  # Rule 4
        entry["ceiling"] = int(entry.get("next_seq", 0)) - 1
    if "keyspace_for_replicas" in ck:  # Rule 5
        ck["keyspace"] = ck.pop("keyspace_for_replicas")
    ck_raw = json.dumps(ck).encode()
    out: Files = []
    ks = ck.get("keyspace")
    if isinstance(ks, str) and ks:
        out.append((ks, (data_dir / ks).read_bytes()))
    fn = data_dir / FUNCTIONS
    if fn.exists():
        out.append((FUNCTIONS, fn.read_bytes()))
    roots = [data_dir] + ([cold_dir] if cold_dir is not None else [])
    for entry in ck.get("topics", []):
        rel = entry.get("dir")
        for base, _count, _cold, dead in entry.get("files", []):
            if dead:
                continue
            for root in roots:
                d = root / rel
                data = segfiles.data_path(d, int(base))
                if data.exists():
                    idx = segfiles.idx_path(d, int(base))
                    out.append((f"{rel}/{data.name}", data.read_bytes()))
                    if idx.exists():
                        out.append((f"{rel}/{idx.name}", idx.read_bytes()))
                    break
    out.append((images.CHECKPOINT, ck_raw))  # Rule 2: last
    return out


def _inside(data_dir: Path, rel: str) -> Path:
    """Rule 3."""
    path = (data_dir / rel).resolve()
    root = data_dir.resolve()
    if rel.startswith("/") or ".." in Path(rel).parts or root not in path.parents:
        raise ValueError(f"the primary sent a file outside the data dir: {rel!r}")
    return path


def clear_state(data_dir: Path) -> None:
    """Rule 2: the replica's own state files go (its replication.json stays)."""
    for name in (images.CHECKPOINT, FUNCTIONS):
        (data_dir / name).unlink(missing_ok=True)
    for path in data_dir.glob("keyspace-*.bin*"):
        path.unlink()
    for sub in ("topics", "wal"):
        shutil.rmtree(data_dir / sub, ignore_errors=True)


def install(data_dir: Path, files: Files) -> None:
    """Rule 2."""
    for rel, _ in files:
        _inside(data_dir, rel)
    clear_state(data_dir)
    (data_dir / "wal").mkdir(parents=True, exist_ok=True)
    dirs: set[Path] = {data_dir}
    for rel, data in files:
        path = _inside(data_dir, rel)
        path.parent.mkdir(parents=True, exist_ok=True)
        dirs.add(path.parent)
        with open(path, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
    for d in sorted(dirs, key=lambda p: -len(p.parts)):
        fd = os.open(d, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
