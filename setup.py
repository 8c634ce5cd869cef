"""Build of topicsrv's compiled hot path (the rest of the metadata is in pyproject.toml).

The modules listed in topicsrv/buildinfo.py HOT_MODULES are plain, typed Python; here they are
compiled into extension modules next to their source. TOPICS_COMPILER picks the tool: `mypyc`
(the default: it compiles from the type annotations, docs/performance.md "Compiled hot path"
has the measurements), `cython` (untyped, kept to redo the comparison) or `none`. Any failure
(no C compiler, no Python headers, a build tool missing or refusing the source) leaves the
install pure Python with ONE warning: the install never fails for it.
"""

from __future__ import annotations

import os
import runpy
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent
HOT = runpy.run_path(str(ROOT / "topicsrv" / "buildinfo.py"))["HOT_MODULES"]
WARNED: list[str] = []


def warn(why: str) -> None:
    if WARNED:
        return
    WARNED.append(why)
    msg = (f"WARNING: topicsrv: the compiled hot path was not built ({why}); "
           "installing pure Python (slower, same behaviour).")
    print(msg, file=sys.stderr)


class OptionalBuildExt(build_ext):
    """build_ext whose failure is a warning, never a failed install (buildinfo Rule 2)."""

    def finalize_options(self) -> None:
        super().finalize_options()
        if self.parallel is None:
            self.parallel = os.cpu_count() or 1

    def run(self) -> None:
        try:
            super().run()
        except (Exception, SystemExit) as e:  # noqa: BLE001 - any build failure: pure Python
            warn(f"{type(e).__name__}: {e}")

    def build_extension(self, ext: object) -> None:
        if WARNED:
            return
        try:
            super().build_extension(ext)
        except (Exception, SystemExit) as e:  # noqa: BLE001
            warn(f"{type(e).__name__}: {e}")


def extensions() -> list[object]:
    tool = os.environ.get("TOPICS_COMPILER", "mypyc").lower()
    sources = [str(Path(*m.split(".")).with_suffix(".py")) for m in HOT]
    if tool == "none":
        return []
    try:
        if tool == "mypyc":
            from mypyc.build import mypycify

            return list(mypycify(sources, opt_level="3"))
        from Cython.Build import cythonize
        from setuptools import Extension

        # explicit names: topicsrv/storage is a namespace package (no __init__.py)
        exts = [Extension(m, [src]) for m, src in zip(HOT, sources, strict=True)]
        return list(cythonize(
            exts, nthreads=os.cpu_count() or 1, build_dir="build/cython", quiet=True, language_level=3, force=True,
            compiler_directives={"binding": True, "annotation_typing": False},
        ))
    except (Exception, SystemExit) as e:  # noqa: BLE001 - mypyc exits on a type error
        warn(f"{tool}: {type(e).__name__}: {e}")
        return []


setup(ext_modules=extensions(), cmdclass={"build_ext": OptionalBuildExt})
