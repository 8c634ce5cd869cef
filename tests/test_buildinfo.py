"""topicsrv/buildinfo.py: which build of the hot path runs (Rule 3: a stale extension, one
older than its source, makes every hot module load from source)."""

from __future__ import annotations

import importlib.machinery
import os
from pathlib import Path

from topicsrv import buildinfo


def test_an_extension_older_than_its_source_is_stale(tmp_path: Path) -> None:
    name = buildinfo.HOT_MODULES[0]
    src = tmp_path.joinpath(*name.split(".")).with_suffix(".py")
    src.parent.mkdir(parents=True)
    src.write_text("")
    ext = src.with_name(src.stem + importlib.machinery.EXTENSION_SUFFIXES[0])
    ext.write_bytes(b"")
    os.utime(src, (2000, 2000))
    os.utime(ext, (1000, 1000))  # built, then the source was edited
    assert buildinfo._find_stale(str(tmp_path)) == [name]
    os.utime(ext, (3000, 3000))  # rebuilt
    assert buildinfo._find_stale(str(tmp_path)) == []
    ext.unlink()  # never built: pure, but not stale
    assert buildinfo._find_stale(str(tmp_path)) == []
