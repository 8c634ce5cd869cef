"""Command families of the RESP front, one module each; `load_all()` registers them all.

Rule: every module in this package other than `base` is a command family that registers
itself with `base.command` at import; `load_all` discovers them, so adding a family (e.g.
groups.py) needs no edit here.
"""

from __future__ import annotations

import importlib
import pkgutil

from topicsrv.resp.commands.base import REGISTRY, CommandSpec

_loaded = False


def load_all() -> dict[str, CommandSpec]:
    global _loaded
    if not _loaded:
        for mod in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
            if mod.name != "base" and not mod.name.startswith("_"):
                importlib.import_module(f"{__name__}.{mod.name}")
        _loaded = True
    return REGISTRY
