"""Bad queue requests are refused whole (invalid_request) and change nothing; queue
operations on a log topic answer not_a_queue."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from topicsrv.engine import Engine
from topicsrv.engine.log.records import prepare_json
from topicsrv.engine.queues import leases
from topicsrv.engine.queues.queues import MAX_CLAIM, MAX_SEQS, Claimer
from topicsrv.errors import TopicsError

Op = Callable[[Engine], Any]


def _claim(*claimers: Claimer) -> Op:
    return lambda e: e.claim("q", list(claimers))


BAD_CLAIMS = {
    "node missing": _claim(Claimer(None, 1)),  # type: ignore[arg-type]
    "node empty": _claim(Claimer("", 1)),
    "node not a string": _claim(Claimer(5, 1)),  # type: ignore[arg-type]
    "max 0": _claim(Claimer("w", 0)),
    "max negative": _claim(Claimer("w", -1)),
    "max a string": _claim(Claimer("w", "1")),  # type: ignore[arg-type]
    "max true": _claim(Claimer("w", True)),
    "max a float": _claim(Claimer("w", 1.0)),  # type: ignore[arg-type]
    "max too large": _claim(Claimer("w", MAX_CLAIM + 1)),
    "lease_ms 0": _claim(Claimer("w", 1, 0)),
    "lease_ms a string": _claim(Claimer("w", 1, "5")),  # type: ignore[arg-type]
    "one bad member spoils the cohort": _claim(Claimer("a", 5), Claimer("b", 0)),
}

BAD_SEQS: dict[str, Any] = {
    "seqs missing": None, "seqs empty": [], "seqs a number": 1, "seqs strings": ["1"],
    "seqs floats": [1.0], "seqs booleans": [True], "seq negative": [-1], "seq over u64": [1 << 64],
    "too many seqs": list(range(1, MAX_SEQS + 2)),
}


def _call(op: str, *args: Any, **kw: Any) -> Op:
    return lambda e: getattr(e, op)("q", *args, **kw)


def _bad_lifecycle() -> dict[str, Op]:
    out: dict[str, Op] = {}
    for op in ("ack", "nack", "extend"):
        out[f"{op}: node missing"] = _call(op, None, [1])
        out[f"{op}: node empty"] = _call(op, "", [1])
        out[f"{op}: node not a string"] = _call(op, 7, [1])
        for name, seqs in BAD_SEQS.items():
            out[f"{op}: {name}"] = _call(op, "w", seqs)
        out[f"{op}: fewer lease_ids"] = _call(op, "w", [1, 2], ["x"])
        out[f"{op}: more lease_ids"] = _call(op, "w", [1], ["x", "y"])
        out[f"{op}: lease_ids not strings"] = _call(op, "w", [1], [1])
        out[f"{op}: lease_ids a string"] = _call(op, "w", [1], "x")
    out["nack: delay_ms negative"] = _call("nack", "w", [1], delay_ms=-1)
    out["nack: delay_ms a string"] = _call("nack", "w", [1], delay_ms="5")
    out["nack: delay_ms true"] = _call("nack", "w", [1], delay_ms=True)
    out["extend: lease_ms 0"] = _call("extend", "w", [1], lease_ms=0)
    out["extend: lease_ms a string"] = _call("extend", "w", [1], lease_ms="5")
    return out


BAD = {**{f"claim: {k}": v for k, v in BAD_CLAIMS.items()}, **_bad_lifecycle()}


def _everything(e: Engine) -> Any:
    t = e.get("q")
    qs = leases.state_of(t)
    return (leases.snapshot(qs), sorted(qs.expiry), qs.ready_at, t.count, t.next_seq,
            [t.record_at(s) for s in range(1, 5)], e.state("q")["queue"])


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_is_refused_and_changes_nothing(eng: Engine, case: str) -> None:
    eng.put_topic("q", {"type": "queue"})
    eng.write("q", [prepare_json({"data": i}) for i in range(4)])
    eng.claim("q", [Claimer("w", 2)])
    eng.nack("q", "w", [2], delay_ms=100)
    before = _everything(eng)
    with pytest.raises(TopicsError) as info:
        BAD[case](eng)
    assert info.value.code == "invalid_request", info.value.message
    assert _everything(eng) == before


def test_a_log_topic_is_not_a_queue(eng: Engine) -> None:
    eng.write("log", [prepare_json({"data": 1})])
    ops: list[Op] = [lambda e: e.claim("log", [Claimer("w", 1)]), lambda e: e.ack("log", "w", [1]),
                     lambda e: e.nack("log", "w", [1]), lambda e: e.extend("log", "w", [1])]
    for op in ops:
        with pytest.raises(TopicsError) as info:
            op(eng)
        assert info.value.code == "not_a_queue" and info.value.status == 409
    assert "queue" not in eng.state("log") and eng.get("log").ext.get(leases.EXT_KEY) is None
    with pytest.raises(TopicsError) as info:
        eng.claim("nope", [Claimer("w", 1)])
    assert info.value.code == "topic_not_found"
