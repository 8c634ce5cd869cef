"""Seeds 10.1: ack durability == jobs-log durability. The commit token an ack hands the front
(which answers only once it completes) covers the job's delete only on a durable queue; a
non-durable queue's ack is answered without waiting for the delete's fdatasync, as its writes
are (at worst a crash redelivers an acked job, which at-least-once allows)."""

from __future__ import annotations

from typing import Any

import pytest

from topicsrv.clock import FakeClock
from topicsrv.engine import Engine
from topicsrv.engine.journal import NullJournal
from topicsrv.engine.log.records import prepare_json
from topicsrv.engine.log.topic import Topic
from topicsrv.engine.queues.queues import Claimer

DELETE_COMMIT = object()  # stands for the fsync-gated commit of a Delete frame


class GatedDeletes(NullJournal):
    def deleted(self, topic: Topic, selector: dict[str, Any], bound: int, wait: bool = True) -> Any:
        return DELETE_COMMIT if wait else None


@pytest.mark.parametrize(("config", "waits"), [
    ({"durable": True}, True),
    ({}, False),  # durable: false, the default ("disk": records acked on enqueue)
    ({"durability": "memory"}, False),
])
def test_ack_waits_for_the_delete_commit_only_on_a_durable_queue(config: dict[str, Any], waits: bool) -> None:
    eng = Engine(clock=FakeClock(), journal=GatedDeletes())
    eng.put_topic("q", {"type": "queue", **config})
    eng.write("q", [prepare_json({"data": 1})])
    [[job]], _, _ = eng.claim("q", [Claimer("w")])
    result, token = eng.ack("q", "w", [job.seq])
    assert result["acked"] == [job.seq] and eng.get("q").count == 0  # deleted either way
    assert (token is DELETE_COMMIT) is waits
