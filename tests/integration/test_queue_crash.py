"""Lease queues survive SIGKILL (seeds 10.1, 10.6), over HTTP (API.md section 7) with real
processes: a durable queue loses no job and resurrects no acked job; in-flight jobs are
claimable at once after a restart with non-durable leases, and stay leased until their
deadline with `leases_durable: true` (the holder's lease id still fences them)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from conftest import JsonClient

Q = "jobs"


class Client(JsonClient):
    def __init__(self, port: int) -> None:
        super().__init__(port, timeout=30)

    def claim(self, node: str, mx: int, **kw: Any) -> list[dict[str, Any]]:
        jobs: list[dict[str, Any]] = self.ok("POST", f"/v0/topics/{Q}/claim", {"node": node, "max": mx, **kw})["jobs"]
        return jobs

    def op(self, op: str, node: str, jobs: list[dict[str, Any]], **kw: Any) -> dict[str, Any]:
        body = {"node": node, "seqs": [j["$seq"] for j in jobs], "lease_ids": [j["lease_id"] for j in jobs], **kw}
        out: dict[str, Any] = self.ok("POST", f"/v0/topics/{Q}/{op}", body)
        return out

    def produce(self, n: int) -> list[int]:
        out = self.ok("POST", f"/v0/topics/{Q}", {"records": [{"data": {"job": i}} for i in range(n)]})
        seqs: list[int] = out["seqs"]
        return seqs

    def live(self) -> set[int]:
        body = self.ok("POST", f"/v0/topics/{Q}/diff", {"from_seq": 0, "limit": 10000})
        return {r["$seq"] for r in body["records"]}

    def queue(self) -> dict[str, int]:
        state: dict[str, int] = self.ok("GET", f"/v0/topics/{Q}?touch=false")["queue"]
        return state


def start(server_factory: Any, data: Path, config: dict[str, Any]) -> tuple[Any, Client]:
    srv = server_factory(data_dir=data)
    c = Client(srv.http_port)
    c.ok("PUT", f"/v0/topics/{Q}", config)
    return srv, c


def test_sigkill_loses_no_job_resurrects_no_ack_and_frees_in_flight_jobs(server_factory: Any, tmp_path: Path) -> None:
    data = tmp_path / "q-data"
    srv, c = start(server_factory, data, {"type": "queue", "durable": True, "lease_ms": 600_000})
    produced = c.produce(30) + c.produce(20)
    got = c.claim("w1", 20)
    assert [j["$seq"] for j in got] == produced[:20] and {j["delivery"] for j in got} == {1}
    acked = c.op("ack", "w1", got[:10])["acked"]
    assert acked == produced[:10]
    srv.kill()  # no clean shutdown, no checkpoint

    srv2 = server_factory(data_dir=data)
    c2 = Client(srv2.http_port)
    assert c2.live() == set(produced) - set(acked)
    assert c2.queue()["in_flight"] == 0 and c2.queue()["ready"] == 40
    t0 = time.monotonic()
    got2 = c2.claim("w2", 100)
    assert time.monotonic() - t0 < 5  # at once, not after the 10 min lease
    # the leases of the old process ended: its in-flight jobs come first, delivered again
    assert [(j["$seq"], j["delivery"]) for j in got2] == (
        [(s, 2) for s in produced[10:20]] + [(s, 1) for s in produced[20:]])
    stale = c2.op("ack", "w1", got[10:])
    assert stale["acked"] == [] and {s["reason"] for s in stale["skipped"]} == {"not_holder"}
    assert c2.op("ack", "w2", got2)["acked"] == sorted(set(produced) - set(acked))
    assert c2.live() == set() and c2.claim("w2", 100) == []


def test_sigkill_keeps_durable_leases_until_their_deadline(server_factory: Any, tmp_path: Path) -> None:
    data = tmp_path / "q-data"
    srv, c = start(server_factory, data, {"type": "queue", "durable": True, "leases_durable": True,
                                          "lease_ms": 600_000})
    produced = c.produce(10)
    held = c.claim("w1", 4)
    assert c.op("ack", "w1", held[:1])["acked"] == produced[:1]
    srv.kill()

    srv2 = server_factory(data_dir=data)
    c2 = Client(srv2.http_port)
    assert c2.live() == set(produced[1:])
    assert c2.queue()["in_flight"] == 3
    # still leased: another worker gets only the never-claimed jobs
    assert [(j["$seq"], j["delivery"]) for j in c2.claim("w2", 100)] == [(s, 1) for s in produced[4:]]
    # the holder's leases (and their ids) survived: it acks one, and shortens another
    assert c2.op("ack", "w1", held[1:2])["acked"] == produced[1:2]
    ext = c2.op("extend", "w1", held[2:3], lease_ms=300)
    assert ext["extended"] == produced[2:3]
    deadline = ext["deadlines"][0]
    got = c2.claim("w2", 100, wait_ms=10_000)  # a long poll: answered once that deadline passed
    assert time.time() * 1000 >= deadline
    assert [(j["$seq"], j["delivery"]) for j in got] == [(produced[2], 2)]
    assert c2.queue()["in_flight"] == 1 + 6 + 1  # w1's last lease, w2's jobs
    late = c2.op("ack", "w1", held[2:3])
    assert late["acked"] == [] and late["skipped"] == [{"seq": produced[2], "reason": "not_holder"}]
