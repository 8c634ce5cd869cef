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


# ---- the layers as a whole (DESIGN.md: cli/server -> fronts -> context/tasks -> storage ->
# engine -> errors/clock) --------------------------------------------------------------------

# a module's layer: higher may import lower (or its own package), never the reverse
LAYERS: dict[str, int] = {
    "errors": 0, "clock": 0, "latency": 0, "buildinfo": 0, "splitargs": 0,
    "engine": 1,
    "storage": 2, "bus": 2,
    "notify": 3, "activity": 3, "memory": 3, "admission": 3, "tls": 3, "context": 3,
    "tasks": 3, "lifecycle": 3, "scripting": 3, "lazyfree": 3,
    "http": 4, "resp": 4, "spark": 4,
    "server": 5,
    "cli": 6, "__main__": 7, "__init__": 7,
}


def unit_of(module: str) -> str:
    """`topicsrv.engine.topic` -> `engine`; `topicsrv.server` -> `server`."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def package_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG.parent).with_suffix("")
        unit = unit_of(".".join(rel.parts))
        deps = graph.setdefault(unit, set())
        for m in imports_of(path):
            if m.startswith("topicsrv.") and unit_of(m) != unit:
                deps.add(unit_of(m))
    return graph


def test_every_unit_has_a_layer() -> None:
    assert set(package_graph()) <= set(LAYERS), set(package_graph()) - set(LAYERS)


def test_no_import_points_up_a_layer() -> None:
    upward = [(a, b) for a, deps in package_graph().items() for b in deps
              if LAYERS[b] >= LAYERS[a]]
    # same-layer imports are allowed only among the layer-3 runtime modules
    upward = [(a, b) for a, b in upward if not (LAYERS[a] == LAYERS[b] == 3)]
    assert not upward, f"imports against the layering: {upward}"


def test_only_the_entry_points_import_server() -> None:
    users = {a for a, deps in package_graph().items() if "server" in deps}
    assert users <= {"cli", "__main__"}, users


def test_no_cycle_between_packages() -> None:
    graph = package_graph()
    state: dict[str, int] = {}

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for dep in graph.get(node, ()):
            if state.get(dep) == 1:
                raise AssertionError(f"import cycle: {' -> '.join(path + [node, dep])}")
            if not state.get(dep):
                visit(dep, path + [node])
        state[node] = 2

    for node in graph:
        if not state.get(node):
            visit(node, [])
