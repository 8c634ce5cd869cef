"""Dependencies point one way (STYLE.md): fronts -> engine -> (journal interface) <- storage.

The engine and the codecs are sans-IO: they never import trio, sockets or the fronts.
"""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "topicsrv"


def imports_of(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
    return out


def files(sub: str) -> list[Path]:
    return sorted((PKG / sub).rglob("*.py"))


def test_engine_is_pure() -> None:
    banned = ("trio", "socket", "topicsrv.http", "topicsrv.resp", "topicsrv.storage", "topicsrv.server",
              "asyncio", "threading")
    for path in files("engine"):
        bad = [m for m in imports_of(path) if m.startswith(banned)]
        assert not bad, f"{path.name} imports {bad}"


def test_fronts_do_not_import_each_other() -> None:
    for path in files("http"):
        assert not [m for m in imports_of(path) if m.startswith("topicsrv.resp")], path
    for path in files("resp"):
        assert not [m for m in imports_of(path) if m.startswith("topicsrv.http")], path


def test_storage_does_not_import_fronts() -> None:
    for path in files("storage"):
        bad = [m for m in imports_of(path) if m.startswith(("topicsrv.http", "topicsrv.resp"))]
        assert not bad, f"{path.name} imports {bad}"


def test_resp_protocol_codec_is_sans_io() -> None:
    for name in ("protocol.py", "encoder.py"):
        path = PKG / "resp" / name
        if path.exists():
            assert not [m for m in imports_of(path) if m.startswith(("trio", "socket"))], name
