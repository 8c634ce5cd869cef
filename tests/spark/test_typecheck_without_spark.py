"""mypy passes on the connector whether or not the `spark` extra is installed: here pyspark
and pyarrow are hidden from mypy (follow_imports=skip makes them Any, exactly as an
environment without them does under ignore_missing_imports), so an ignore that only one of
the two environments needs fails this test instead of a no-spark `make typecheck`."""

from __future__ import annotations

from pathlib import Path

import pytest
from mypy import api

ROOT = Path(__file__).resolve().parents[2]


def test_mypy_is_clean_without_pyspark_and_pyarrow(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    config = tmp_path / "mypy.ini"
    config.write_text(
        "[mypy]\npython_version = 3.11\nignore_missing_imports = True\n"
        "warn_unused_ignores = True\ncheck_untyped_defs = True\n"
        "[mypy-pyspark.*]\nfollow_imports = skip\n[mypy-pyarrow.*]\nfollow_imports = skip\n")
    out, err, status = api.run(["--config-file", str(config), "--cache-dir",
                                str(tmp_path / "cache"), "-p", "topicsrv.spark"])
    assert status == 0, out + err
