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



# ---- inside the engine: concept folders (docs/architecture.md "The engine's folders") ---------

ENGINE = PKG / "engine"
# each concept folder and the sibling folders it may import; anything else under engine/ is
# shared (config, glob, journal, restore) or the facade (core.py, which may import them all)
CONCEPTS: dict[str, set[str]] = {
    "log": set(),
    "keyspace": set(),
    "groups": {"log"},
    "queues": {"log"},
    "routing": {"log"},
}
# the top-level engine modules a concept folder may import at run time (core only for hints)
SHARED = {"config", "glob", "journal"}


def runtime_imports(path: Path) -> set[str]:
    """Like `imports_of`, without the imports under `if TYPE_CHECKING:` (hints only)."""
    tree = ast.parse(path.read_text())
    hinted: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING",
                                                                     "typing.TYPE_CHECKING"):
            hinted.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    out: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in hinted:
            continue
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
            # `from topicsrv.engine import log` / `from topicsrv.engine.log import topic`
            out.update(f"{node.module}.{a.name}" for a in node.names)
    return out


def engine_part(module: str) -> str | None:
    """`topicsrv.engine.log.topic` -> `log`; `topicsrv.engine.config` -> `config`."""
    parts = module.split(".")
    return parts[2] if parts[:2] == ["topicsrv", "engine"] and len(parts) > 2 else None


def test_every_engine_folder_is_a_known_concept() -> None:
    folders = {p.name for p in ENGINE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert folders == set(CONCEPTS), folders ^ set(CONCEPTS)
    for name in CONCEPTS:
        assert ast.get_docstring(ast.parse((ENGINE / name / "__init__.py").read_text())), name


def test_concept_folders_import_only_what_they_may() -> None:
    bad = []
    for concept, allowed in CONCEPTS.items():
        for path in files(f"engine/{concept}"):
            for m in runtime_imports(path):
                part = engine_part(m)
                if part is None or part == concept or part in allowed or part in SHARED:
                    continue
                if part in CONCEPTS or part in ("core", "restore"):
                    bad.append(f"{path.relative_to(PKG)} imports {m}")
    assert not bad, bad


def test_no_module_reaches_into_a_concepts_private_names() -> None:
    """A name starting with `_` in a concept folder is that folder's own: no module outside the
    folder (a sibling concept, the facade, a front, a test) imports it."""
    paths = sorted(PKG.rglob("*.py")) + sorted((PKG.parent / "tests").rglob("*.py"))
    bad = []
    for path in paths:
        here = ".".join(path.relative_to(PKG.parent).with_suffix("").parts)
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom) or not node.module:
                continue
            concept = engine_part(node.module)
            if concept not in CONCEPTS or engine_part(here) == concept:
                continue
            names = [node.module.rsplit(".", 1)[-1]] + [a.name for a in node.names]
            if any(n.startswith("_") and not n.startswith("__") for n in names):
                bad.append(f"{here} imports {node.module}: {[a.name for a in node.names]}")
    assert not bad, bad


# ---- the layers as a whole (DESIGN.md: cli/server -> fronts -> context/tasks -> storage ->
# engine -> errors/clock) --------------------------------------------------------------------

# a module's layer: higher may import lower (or its own package), never the reverse
LAYERS: dict[str, int] = {
    "errors": 0, "clock": 0, "latency": 0, "buildinfo": 0, "splitargs": 0,
    "engine": 1,
    "storage": 2, "bus": 2,
    "notify": 3, "activity": 3, "memory": 3, "admission": 3, "tls": 3, "context": 3,
    "tasks": 3, "lifecycle": 3, "scripting": 3, "lazyfree": 3, "repl": 3,
    "http": 4, "resp": 4, "spark": 4,
    "server": 5,
    "cli": 6, "__main__": 7, "__init__": 7,
}


def unit_of(module: str) -> str:
    """`topicsrv.engine.log.topic` -> `engine`; `topicsrv.server` -> `server`."""
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
