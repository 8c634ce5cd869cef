"""The FUNCTION libraries on disk: `functions.json` in the data dir, the code of every loaded
library, rewritten whole at each FUNCTION LOAD / DELETE / FLUSH.

Rule 1 (atomic): written by `OsOps.write_file` (fsops.py Rule 3: temporary file, every byte
checked, fsync, rename, directory fsync): after a crash or a full disk the file holds either
the old or the new set, never a mix, and a load acknowledged to a client is on disk. A save
that fails raises OSError and leaves the old file as it was.
Rule 2: a missing file is no libraries; the EVAL script cache is never stored (as Redis).
Rule 3 (damage): a file that cannot be read or does not have the shape this version writes
is damaged: `check` says why (the server names it once at startup, on /v0/ready and in
`topicsrv check`: Storage.damaged, fsck.py), `load` then gives no libraries so everything
else is served, and `replace_damaged` (FUNCTION FLUSH) keeps its bytes as
`functions.json.damaged` and writes an empty set.
"""

from __future__ import annotations

from pathlib import Path

import orjson

from topicsrv.storage.fsops import OsOps

NAME = "functions.json"
DAMAGED_COPY = NAME + ".damaged"
REPAIR = "FUNCTION FLUSH"  # what replaces a damaged file (Rule 3)


def read(data_dir: Path) -> list[bytes]:
    """The stored libraries' code; ValueError naming what is wrong when the file is damaged,
    OSError when it cannot be read."""
    try:
        data = (data_dir / NAME).read_bytes()
    except FileNotFoundError:
        return []
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise ValueError(f"not valid JSON ({exc}; {len(data)} bytes)") from None
    codes = doc.get("libraries") if isinstance(doc, dict) else None
    if not isinstance(codes, list) or not all(isinstance(c, str) for c in codes):
        raise ValueError("no 'libraries' list of library codes")
    try:
        return [c.encode("latin-1") for c in codes]
    except UnicodeEncodeError:
        raise ValueError("a library code holds a character this version never writes") from None


def check(data_dir: Path) -> str | None:
    """Why the stored file is damaged (Rule 3); None when it is good or absent."""
    try:
        read(data_dir)
    except ValueError as exc:
        return str(exc)
    except OSError as exc:
        return f"unreadable ({exc.strerror or exc})"
    return None


def load(data_dir: Path) -> list[bytes]:
    """The libraries to load: none for a missing file, and none for a damaged one (Rule 3)."""
    try:
        return read(data_dir)
    except (ValueError, OSError):
        return []


def save(data_dir: Path, codes: list[bytes], ops: OsOps | None = None) -> None:
    """Rule 1: the whole set, or (OSError) nothing changed."""
    data_dir.mkdir(parents=True, exist_ok=True)
    body = orjson.dumps({"libraries": [c.decode("latin-1") for c in codes]})
    (ops or OsOps()).write_file(data_dir / NAME, body)


def replace_damaged(data_dir: Path, ops: OsOps | None = None) -> str:
    """Rule 3: keep the damaged bytes beside it, then store an empty set. Returns the copy's
    name. OSError when either write fails (the damaged file is then still in place)."""
    ops = ops or OsOps()
    path = data_dir / NAME
    try:
        raw = path.read_bytes()
    except OSError:
        raw = b""  # unreadable: nothing to keep
    ops.write_file(data_dir / DAMAGED_COPY, raw)
    save(data_dir, [], ops)
    return DAMAGED_COPY
