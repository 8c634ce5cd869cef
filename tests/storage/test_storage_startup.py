"""A data dir the server cannot open (issue 10, item 18): one clear message naming the file
and what to do, a non-zero exit, never a traceback."""

from __future__ import annotations

import errno
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from topicsrv.engine import Engine
from topicsrv.errors import StartupError
from topicsrv.storage.fsops import OsOps
from topicsrv.storage.images import CHECKPOINT
from topicsrv.storage.store import Storage

from .harness import running, write


def _serve(data_dir: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "topicsrv", "serve", "--data-dir", str(data_dir), "--bind", "127.0.0.1",
         "--http-port", "0", "--resp-port", "0"],
        capture_output=True, text=True, timeout=60)


async def _data_dir(tmp_path: Path) -> Path:
    d = tmp_path / "data"
    async with running(d) as (e, _):
        await write(e, "t", [1, 2])
    return d


@pytest.mark.parametrize("content", [b'{"version": 1, "topics": [', b"\x00\x17garbage",
                                     b'{"version": 1, "wal_gen": 3, "topics": [{"name": 7}]}'])
async def test_a_corrupt_checkpoint_stops_startup_with_one_clear_message(tmp_path: Path, content: bytes) -> None:
    d = await _data_dir(tmp_path)
    (d / CHECKPOINT).write_bytes(content)
    run = _serve(d)
    assert run.returncode == 1
    assert "Traceback" not in run.stderr
    msg = [line for line in run.stderr.splitlines() if line.startswith("topicsrv:")]
    assert len(msg) == 1
    assert str(d / CHECKPOINT) in msg[0] and "python -m topicsrv check" in msg[0]
    assert (d / CHECKPOINT).read_bytes() == content  # nothing was changed


async def test_an_unusable_data_dir_stops_startup_with_one_clear_message(tmp_path: Path) -> None:
    d = await _data_dir(tmp_path)
    for p in (d / "wal").iterdir():
        p.unlink()
    (d / "wal").rmdir()
    (d / "wal").write_bytes(b"not a directory")
    run = _serve(d)
    assert run.returncode == 1 and "Traceback" not in run.stderr
    assert "topicsrv: cannot start" in run.stderr and str(d / "wal") in run.stderr


class FullDisk(OsOps):
    def writev(self, fd: int, buffers: Sequence[bytes]) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")


async def test_a_full_disk_at_startup_is_a_startup_error(tmp_path: Path) -> None:
    st = Storage(Engine(), tmp_path / "full", ops=FullDisk())
    with pytest.raises(StartupError) as err:
        await st.open()
    text = str(err.value)
    assert "No space left on device" in text and str(tmp_path / "full") in text
    assert "Free disk space" in text
