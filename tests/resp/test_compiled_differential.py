"""The compiled hot path and the pure-Python source give byte-identical replies
(topicsrv/buildinfo.py Rule 1): the corpus of tests/resp/replycorpus.py runs once with the
installed build and once with TOPICS_PURE=1, each in a fresh interpreter."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from topicsrv import buildinfo

ROOT = Path(__file__).resolve().parents[2]


def corpus(pure: bool) -> list[str]:
    env = {k: v for k, v in os.environ.items() if k != buildinfo.ENV_PURE}
    if pure:
        env[buildinfo.ENV_PURE] = "1"
    out = subprocess.run([sys.executable, "-m", "tests.resp.replycorpus"], cwd=ROOT, env=env,
                         capture_output=True, timeout=120, check=True)
    return out.stdout.decode().splitlines()


def test_compiled_and_pure_python_replies_are_byte_identical() -> None:
    pure, built = corpus(True), corpus(False)
    assert pure[0] == "pure"
    # the installed build: compiled after `make setup` on a machine with a C compiler (this
    # process is itself pure under TOPICS_PURE=1, so it can only vouch for the child otherwise)
    if not buildinfo.pure_requested():
        assert built[0] == buildinfo.mode()
    assert len(pure) > 80
    for i, (a, b) in enumerate(zip(pure[1:], built[1:], strict=True)):
        assert a == b, f"reply {i} differs"


def test_pure_switch_loads_every_hot_module_from_its_source() -> None:
    code = ("from topicsrv import buildinfo; "
            "print(sorted(set(buildinfo.loaded_from().values())), buildinfo.describe())")
    env = {**os.environ, buildinfo.ENV_PURE: "1"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=60, check=True)
    assert out.stdout.strip() == "['source'] pure Python (TOPICS_PURE=1)"


def test_info_says_which_path_runs() -> None:
    env = {**os.environ, buildinfo.ENV_PURE: "1"}
    code = ("from tests.resp.replycorpus import frame, run_one; "
            "print(run_one(frame(b'INFO', b'server')).decode())")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=60, check=True)
    assert "\ntopicsrv_build:pure Python (TOPICS_PURE=1)\n" in out.stdout
