"""A large write body parsed in slices gives exactly what one orjson.loads gives (or the same
400), whatever the body: wrong boundary guesses, strings holding `},{`, duplicate keys, errors."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
import trio

from topicsrv.errors import TopicsError
from topicsrv.http import jsonsplit
from topicsrv.http.params import json_body


def outcome_of(fn: Any, body: bytes) -> Any:
    try:
        return ("ok", fn(body))
    except TopicsError as err:
        return ("error", err.code, (err.detail or {}).get("field"))


def sliced(body: bytes) -> Any:
    return trio.run(jsonsplit.loads_write_body, body)


def record(rng: random.Random) -> Any:
    kind = rng.randrange(6)
    if kind == 0:
        return {"data": rng.randrange(-1000, 1000)}
    if kind == 1:
        return {"data": "},{" * rng.randrange(5) + '"}, {\\' + "x" * rng.randrange(50)}
    if kind == 2:
        return {"data": [{"a": 1}, {"b": [2, {"c": "}]"}]}], "tag": "t"}
    if kind == 3:
        return {"tag": "x", "data": {"records": [1, 2]}, "meta": {"k": "v"}}
    if kind == 4:
        return {"data": 2**64 - 1}
    return [1, 2]  # not an object: the write refuses it later, the parse must not care


def mutate(rng: random.Random, body: bytes) -> bytes:
    i = rng.randrange(len(body))
    op = rng.randrange(5)
    if op == 0:
        return body[:i] + body[i + 1:]
    if op == 1:
        return body[:i] + rng.choice([b"}", b"{", b",", b'"', b"]", b"\\", b" "]) + body[i:]
    if op == 2:
        return body[:i] + b"123456789012345678901234567" + body[i:]
    if op == 3:
        return body + b"  "
    return body


@pytest.mark.parametrize("seed", range(4))
def test_slices_agree_with_one_parse(monkeypatch: Any, seed: int) -> None:
    monkeypatch.setattr(jsonsplit, "SPLIT_MIN_BYTES", 0)
    monkeypatch.setattr(jsonsplit, "SLICE_BYTES", 40)
    rng = random.Random(seed)
    for _ in range(150):
        records = [record(rng) for _ in range(rng.randrange(0, 30))]
        obj: dict[str, Any] = {"records": records}
        if rng.random() < 0.3:
            obj = {"config": {"ttl_ms": 5}, **obj, "create": True}
        sep = rng.choice([(",", ":"), (", ", ": ")])
        body = json.dumps(obj, separators=sep).encode()
        if rng.random() < 0.2:
            body = body[:-1] + b', "records": [{"data": "dup"}]}'
        if rng.random() < 0.5:
            body = mutate(rng, body)
        assert outcome_of(sliced, body) == outcome_of(json_body, body), body


def test_large_body_is_sliced_and_exact(monkeypatch: Any) -> None:
    body = json.dumps({"records": [{"data": {"i": i, "s": "},{" * 3}} for i in range(3000)]},
                      separators=(",", ":")).encode()
    monkeypatch.setattr(jsonsplit, "SPLIT_MIN_BYTES", 1000)
    monkeypatch.setattr(jsonsplit, "SLICE_BYTES", 4096)
    checkpoints = 0

    async def counting() -> Any:
        nonlocal checkpoints
        real = trio.lowlevel.checkpoint

        async def count() -> None:
            nonlocal checkpoints
            checkpoints += 1
            await real()

        monkeypatch.setattr(jsonsplit.trio.lowlevel, "checkpoint", count)
        try:
            return await jsonsplit.loads_write_body(body)
        finally:
            monkeypatch.setattr(jsonsplit.trio.lowlevel, "checkpoint", real)

    assert trio.run(counting) == json.loads(body)
    assert checkpoints >= len(body) // 4096 - 1


def test_a_hostile_body_costs_a_bounded_number_of_retries(monkeypatch: Any) -> None:
    monkeypatch.setattr(jsonsplit, "SPLIT_MIN_BYTES", 0)
    monkeypatch.setattr(jsonsplit, "SLICE_BYTES", 2000)
    parsed = 0
    real_loads = jsonsplit.orjson.loads

    def loads(data: bytes) -> Any:
        nonlocal parsed
        parsed += len(data)
        return real_loads(data)

    monkeypatch.setattr(jsonsplit.orjson, "loads", loads)
    # every record holds objects keyed "data": a false record boundary every few bytes
    body = json.dumps({"records": [{"data": [{"data": j} for j in range(400)]}
                                   for _ in range(20)]}, separators=(",", ":")).encode()
    assert sliced(body) == json.loads(body)
    assert parsed <= 3 * len(body)
