"""The set value's packed run (engine/keyspace/setvalue.py): a member whose packed bytes
appear inside another member is found only where it really is."""

from __future__ import annotations

import random

from topicsrv.engine.keyspace import packed
from topicsrv.engine.keyspace.setvalue import SetValue


def test_members_hidden_inside_other_members_are_not_members() -> None:
    inner = [b"m", b"", b"ab", b"x" * 130]
    outer = [b"z" + packed.encode(m) + b"z" for m in inner] + [packed.encode(m) for m in inner]
    rnd = random.Random(3)
    for _ in range(50):
        sv, model = SetValue(), set()
        for m in rnd.sample(outer, len(outer)):
            sv.add(m, (512, 128, 1000))
            model.add(m)
        for m in inner:
            assert (m in sv) is False
        assert sv.encoding == "hashtable" and sv.table is None  # a packed run
        for m in rnd.sample(inner + outer, 5):
            if rnd.random() < 0.5:
                assert sv.add(m, (512, 128, 1000)) == (m not in model)
                model.add(m)
            else:
                assert sv.remove(m) == (m in model)
                model.discard(m)
            assert sorted(sv) == sorted(model)
            assert all((m in sv) == (m in model) for m in inner + outer)
