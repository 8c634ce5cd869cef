"""The README tour works as printed: each shell block runs against a real server and its
output contains what the README shows next to it (volatile fields like timings are left out
of the README, so they are not compared)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import orjson
import pytest

README = Path(__file__).resolve().parents[2] / "README.md"


def tour_steps() -> list[tuple[str, str, str]]:
    text = README.read_text()
    tour = text.split("<!-- tour:start -->", 1)[1].split("<!-- tour:end -->", 1)[0]
    blocks = re.findall(r"```(\w+)\n(.*?)```", tour, re.S)
    steps = []
    for (lang, code), (out_lang, expected) in zip(blocks[0::2], blocks[1::2], strict=True):
        assert lang == "sh"
        steps.append((code, out_lang, expected))
    return steps


def contains(actual: Any, expected: Any, path: str = "$") -> None:
    if isinstance(expected, dict):
        assert isinstance(actual, dict), f"{path}: {actual!r}"
        for key, value in expected.items():
            assert key in actual, f"{path}.{key} missing in {actual!r}"
            contains(actual[key], value, f"{path}.{key}")
    elif isinstance(expected, list):
        assert isinstance(actual, list) and len(actual) == len(expected), f"{path}: {actual!r}"
        for i, (a, e) in enumerate(zip(actual, expected, strict=True)):
            contains(a, e, f"{path}[{i}]")
    else:
        assert actual == expected, f"{path}: {actual!r} != {expected!r}"


@pytest.mark.skipif(shutil.which("curl") is None, reason="the README tour uses curl, which is not installed")
def test_readme_tour_as_printed(server_factory) -> None:
    srv = server_factory()
    env_line = f"export TOPICS={srv.http_url}\n"
    steps = tour_steps()
    assert len(steps) >= 5
    for code, out_lang, expected in steps:
        script = code.replace("export TOPICS=http://127.0.0.1:7070\n", "")
        run = subprocess.run(["bash", "-c", env_line + script], capture_output=True, text=True, timeout=30)
        if out_lang == "json":
            contains(orjson.loads(run.stdout), orjson.loads(expected))
        else:
            for line in expected.strip().splitlines():
                assert line in run.stdout, f"{line!r} not in {run.stdout!r}"
