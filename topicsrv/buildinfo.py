"""Which build of the hot path runs: compiled extension modules or the plain Python source.

Rule 1 (one source of truth): every module in HOT_MODULES is plain, typed Python that runs and
passes every test as it is; setup.py compiles these modules at install time (`pip install -e .`,
so `make setup`) into extension modules that sit next to their `.py`. Nothing else differs.
Rule 2 (fallback): no compiler, no headers or no build tool: the install goes on without the
extensions (setup.py prints one warning), and the `.py` files run.
Rule 3 (runtime switch): TOPICS_PURE=1 in the environment makes every hot module load from
its `.py` even when an extension is built (an import hook installed by topicsrv/__init__.py
before any hot module is imported); TOPICS_PURE=resp.session,engine.core names the modules to
load from source (to bisect or measure one module), the others stay compiled. An extension older than its `.py` (the source was edited
after the build) is never loaded either: the `.py` runs and `describe()` says so.
Rule 4: `describe()` reports what really runs (the file each hot module was loaded from), for
the serve log, INFO (`topicsrv_build`) and /v0/ready (`build`).

This module must stay importable by setup.py before the package's dependencies exist:
standard library only.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
from collections.abc import Sequence
from types import ModuleType

ENV_PURE = "TOPICS_PURE"

# In dependency order (leaves first). Synchronous, sans-IO modules only: no async functions,
# no classes that tests monkeypatch (docs/performance.md, "Compiled hot path").
HOT_MODULES: tuple[str, ...] = (
    "topicsrv.resp.protocol",  # request framing
    "topicsrv.resp.encoder",  # reply encoding
    "topicsrv.resp.ids",
    "topicsrv.resp.args",
    "topicsrv.resp.commands.stream_args",  # XADD / XREAD argument parsing
    "topicsrv.engine.entries",  # record -> RESP entry bytes
    "topicsrv.engine.records",
    "topicsrv.storage.frames",  # WAL framing
    "topicsrv.storage.codec",
    "topicsrv.engine.segments",  # append and read slices
    "topicsrv.engine.topic",
    "topicsrv.engine.reads",
    "topicsrv.engine.core",  # Engine.write / scan_range
    "topicsrv.resp.replysize",
    "topicsrv.resp.dispatch",
    "topicsrv.resp.batch",  # XADD coalescing
    "topicsrv.resp.session",  # the per-connection loop
)

_stale: list[str] = []


def pure_requested() -> bool:
    return os.environ.get(ENV_PURE, "") not in ("", "0")


def pure_modules() -> frozenset[str]:
    """The hot modules TOPICS_PURE asks to load from source (Rule 3): all of them for `1`."""
    value = os.environ.get(ENV_PURE, "").strip()
    if value in ("", "0"):
        return frozenset()
    if value == "1":
        return frozenset(HOT_MODULES)
    names = {n.strip() for n in value.split(",") if n.strip()}
    return frozenset(m for m in HOT_MODULES if m in names or m.removeprefix("topicsrv.") in names)


def _source_of(fullname: str, path: Sequence[str] | None) -> str | None:
    name = fullname.rpartition(".")[2]
    for entry in path or ():
        candidate = os.path.join(entry, name + ".py")
        if os.path.isfile(candidate):
            return candidate
    return None


def _extension_of(source: str) -> str | None:
    base = source[:-3]
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        if os.path.isfile(base + suffix):
            return base + suffix
    return None


class _SourceFirst(importlib.abc.MetaPathFinder):
    """Loads a hot module from its `.py` when pure mode is asked for or its extension is
    stale (Rule 3); otherwise leaves the import to the normal finders."""

    def __init__(self, force: frozenset[str]) -> None:
        self.force = force

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if fullname not in HOT_MODULES:
            return None
        source = _source_of(fullname, path)
        if source is None:
            return None
        if fullname not in self.force:
            ext = _extension_of(source)
            if ext is None or os.path.getmtime(ext) >= os.path.getmtime(source):
                return None
            _stale.append(fullname)
        return importlib.util.spec_from_file_location(fullname, source)


def install_hook() -> None:
    """Called once by topicsrv/__init__.py, before any hot module is imported."""
    if not any(isinstance(f, _SourceFirst) for f in sys.meta_path):
        sys.meta_path.insert(0, _SourceFirst(pure_modules()))


def loaded_from() -> dict[str, str]:
    """Each hot module -> "compiled" or "source" (importing it if needed)."""
    out: dict[str, str] = {}
    for name in HOT_MODULES:
        mod = importlib.import_module(name)
        path = getattr(mod, "__file__", "") or ""
        out[name] = "source" if path.endswith(".py") else "compiled"
    return out


def compiler() -> str:
    """Which tool built the extensions that are loaded ("cython", "mypyc" or "?")."""
    mod = importlib.import_module(HOT_MODULES[0])
    kinds = {type(v).__name__ for v in vars(mod).values() if callable(v)}
    if "cython_function_or_method" in kinds:
        return "cython"
    if any(k.endswith("__mypyc") for k in sys.modules):
        return "mypyc"
    return "?"


def mode() -> str:
    """"compiled" (every hot module), "pure" (none) or "partial"."""
    kinds = set(loaded_from().values())
    if kinds == {"compiled"}:
        return "compiled"
    return "pure" if kinds == {"source"} else "partial"


def describe() -> str:
    """One line for the log, INFO and /v0/ready."""
    m = mode()
    n = len(HOT_MODULES)
    if m == "compiled":
        return f"compiled ({compiler()}, {n} hot modules)"
    if m == "pure" and pure_requested():
        return f"pure Python ({ENV_PURE}=1)"
    if _stale:
        return (f"{m} (extension older than its source for {', '.join(sorted(set(_stale)))}; "
                "`make setup` rebuilds)")
    if m == "pure":
        return "pure Python (no compiled build; see the install log)"
    compiled = [k for k, v in loaded_from().items() if v == "compiled"]
    forced = f", {ENV_PURE}={os.environ.get(ENV_PURE)}" if pure_requested() else ""
    return f"partial ({len(compiled)} of {n} hot modules compiled{forced})"


def main() -> None:
    """`python -m topicsrv.buildinfo`: the Makefile prints this after the install."""
    from topicsrv import buildinfo  # the hook's state lives in the package's instance

    print(f"topicsrv hot path: {buildinfo.describe()}")
    if buildinfo.mode() != "compiled" and not pure_requested():
        print("WARNING: topicsrv runs its hot path as pure Python (slower); a C compiler and "
              "Python headers are needed to build it (then `make setup`).", file=sys.stderr)


if __name__ == "__main__":
    main()
