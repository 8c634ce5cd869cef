"""COMMAND DOCS argument trees stay in the shape redis-cli walks: it builds its hints from
them at start-up (also when it reads commands from a pipe) and dereferences a block's or a
oneof's `arguments` without checking, so one empty group crashes every redis-cli session."""

from __future__ import annotations

from typing import Any

import pytest

from topicsrv.resp.argspec import parse
from topicsrv.resp.commands import load_all


def _walk(args: list[dict[str, Any]], where: str) -> None:
    for arg in args:
        assert arg.get("name"), where
        if arg["type"] in ("block", "oneof"):
            assert arg.get("arguments"), f"{where}: {arg['type']} {arg['name']!r} has no arguments"
            _walk(arg["arguments"], f"{where} > {arg['name']}")


def _specs() -> list[Any]:
    out = []
    for spec in load_all().values():
        out.append(spec)
        out.extend(spec.subcommands.values())
    return out


def test_every_block_and_oneof_in_command_docs_has_arguments() -> None:
    specs = _specs()
    assert len(specs) > 150
    for spec in specs:
        _walk(spec.arguments or [], spec.name)


def test_a_block_written_as_an_atom_is_refused() -> None:
    with pytest.raises(ValueError, match="written as a group"):
        parse("data:block(key:key value:string)...")
    assert parse("(key:key value:string)...")[0]["arguments"][0]["type"] == "key"
