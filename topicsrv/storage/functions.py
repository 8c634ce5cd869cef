"""The FUNCTION libraries on disk: `functions.json` in the data dir, the code of every loaded
library, rewritten whole at each FUNCTION LOAD / DELETE / FLUSH.

Rule 1 (atomic): written to a temporary file, fsynced, renamed over the old one, and the
directory fsynced: after a crash the file holds either the old or the new set, never a mix,
and a load acknowledged to a client is on disk.
Rule 2: a missing file is no libraries; the EVAL script cache is never stored (as Redis).
"""

from __future__ import annotations

import os
from pathlib import Path

import orjson

NAME = "functions.json"


def load(data_dir: Path) -> list[bytes]:
    path = data_dir / NAME
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    return [c.encode("latin-1") for c in orjson.loads(data)["libraries"]]


def save(data_dir: Path, codes: list[bytes]) -> None:
    data_dir.mkdir(parents=True, exist_ok=True)
    path = data_dir / NAME
    tmp = path.with_suffix(".tmp")
    body = orjson.dumps({"libraries": [c.decode("latin-1") for c in codes]})
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, body)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    dfd = os.open(data_dir, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)
