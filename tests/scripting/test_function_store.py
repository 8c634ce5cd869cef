"""FUNCTION LOAD and the stored libraries (topicsrv/scripting/service.py Rule 5): the file is
rewritten only when the set of library codes changed, and a failed REPLACE keeps the old
library (functions.py Rule 2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from topicsrv.context import ServerConfig, make_context
from topicsrv.scripting import service
from topicsrv.scripting.lua import ScriptError
from topicsrv.storage import functions as stored

LIB = b"#!lua name=test\nredis.register_function('f', function() return %d end)"


def test_a_replace_with_the_same_code_does_not_rewrite_the_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    server = make_context(ServerConfig(storage=True, data_dir=tmp_path, http_port=None,
                                       resp_port=None))
    sc = service.Scripting(server)
    saves: list[list[bytes]] = []
    real = stored.save
    monkeypatch.setattr(service.stored, "save",
                        lambda d, codes: (saves.append(list(codes)), real(d, codes)))
    for code in (LIB % 1, LIB % 1, LIB % 1, LIB % 2, LIB % 2):
        sc.libraries.load(code, replace=True)
        sc.persist()
    assert saves == [[LIB % 1], [LIB % 2]]
    assert stored.load(tmp_path) == [LIB % 2]
    with pytest.raises(ScriptError, match="^ERR No functions registered"):
        sc.libraries.load(b"#!lua name=test\nlocal x = 1", replace=True)
    sc.persist()
    assert len(saves) == 2
    assert sc.libraries.libraries["test"].code == LIB % 2
    # a restart reads the file and does not write it back
    again = service.Scripting(server)
    again.persist()
    assert len(saves) == 2
    assert list(again.libraries.functions) == ["f"]


def test_a_library_that_loops_at_load_time_fails_and_the_old_one_stays(tmp_path: Path) -> None:
    server = make_context(ServerConfig(storage=False, data_dir=tmp_path, http_port=None,
                                       resp_port=None))
    sc = service.Scripting(server)
    sc.libraries.load(LIB % 1, replace=False)
    with pytest.raises(ScriptError, match="^ERR Error registering functions: ERR FUNCTION LOAD timeout$"):
        sc.libraries.load(b"#!lua name=test\nlocal a = 1 while 1 do a = a + 1 end",
                          replace=True)
    assert sc.libraries.libraries["test"].code == LIB % 1
    assert list(sc.libraries.functions) == ["f"]
