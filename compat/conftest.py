"""Fixtures of the differential suite; the harness itself is compat/harness.py (its docstring
states the rules). Test modules import it as `compat_harness` (registered below, since pytest
runs with --import-mode=importlib and compat/ is not a package)."""

from __future__ import annotations

import importlib.util
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

_spec = importlib.util.spec_from_file_location("compat_harness", Path(__file__).with_name("harness.py"))
assert _spec is not None and _spec.loader is not None
harness = importlib.util.module_from_spec(_spec)
sys.modules["compat_harness"] = harness
_spec.loader.exec_module(harness)

Target, Differ, REFERENCE_ONLY = harness.Target, harness.Differ, harness.REFERENCE_ONLY


@pytest.fixture(scope="module")
def ref(redis_server: Any) -> Target:
    return Target("redis", redis_server.port)


@pytest.fixture(scope="module")
def ours(request: pytest.FixtureRequest) -> Target | None:
    if REFERENCE_ONLY:
        return None
    srv = request.getfixturevalue("server")
    if not srv.resp_port:
        pytest.fail("topicsrv did not report a RESP port (is the RESP front wired into the server?)")
    srv.wait_ready()
    return Target("topicsrv", srv.resp_port)


@pytest.fixture(scope="module")
def differ(ref: Target, ours: Target | None) -> Differ:
    return Differ(ref, ours)


@pytest.fixture(scope="module")
def targets(ref: Target, ours: Target | None) -> list[Target]:
    return [ref] if ours is None else [ref, ours]


@pytest.fixture
def key(request: pytest.FixtureRequest) -> Iterator[str]:
    """A key name unique to the test (both servers are shared by the module)."""
    yield "k:" + re.sub(r"[^A-Za-z0-9]+", "-", request.node.name)[:60]
