"""The read-only HTTP token (issue 17, roles): `--read-token R` beside `--token T`. R may
read, watch and diff topics and routers, and read the ops routes; every route that writes,
deletes, claims/acks or configures is 403 `forbidden` (`detail.reason: read_only_token`) and
changes nothing."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from topicsrv.cli import main

from .conftest import SSE, Client
from .inproc import Srv, start_server

TOKEN, READ = "full-token", "read-token"


@pytest.fixture(scope="module")
def srv() -> Iterator[Srv]:
    s, stop = start_server(token=TOKEN, read_token=READ)
    full = Client(s.http_port, TOKEN)
    assert full.put("/v0/topics/log", {}).status in (200, 201)
    full.write("log", {"n": 1}, {"n": 2})
    assert full.put("/v0/topics/q", {"type": "queue"}).status in (200, 201)
    full.write("q", {"job": 1})
    r = full.put("/v0/routers/fan", {"source": "log", "dest": "log.copy"})
    assert r.status == 201, r
    yield s
    stop()


def state(srv: Srv) -> Any:
    full = Client(srv.http_port, TOKEN)
    return [full.get(p).json for p in ("/v0/topics/log?touch=false", "/v0/topics/q?touch=false",
                                       "/v0/routers/fan")]


def strip_volatile(states: Any) -> Any:
    """Drop the fields that move on their own (ages, rates, timings)."""
    if isinstance(states, dict):
        return {k: strip_volatile(v) for k, v in states.items()
                if not k.endswith(("_ms", "_at", "_age", "performance", "_per_s"))}
    if isinstance(states, list):
        return [strip_volatile(v) for v in states]
    return states


def test_the_read_token_reads_watches_and_diffs(srv: Srv) -> None:
    reader = Client(srv.http_port, READ)
    for path in ("/v0/health", "/v0/ready", "/metrics", "/v0/topics", "/v0/topics/log",
                 "/v0/routers", "/v0/routers/fan"):
        assert reader.get(path).status == 200, path
    diff = reader.post("/v0/topics/log/diff", {"from_seq": 0})
    assert diff.status == 200 and [r["data"]["n"] for r in diff.json["records"]] == [1, 2]
    for path in ("/v0/topics/log/watch?from_seq=0", "/v0/watch?topics=log"):
        stream = SSE(srv.http_port, path, {"Authorization": f"Bearer {READ}"})
        try:
            assert stream.status == 200, path
            assert stream.next_event()  # a record frame or a heartbeat
        finally:
            stream.close()
    assert reader.get("/v0/topics/nope").code == "topic_not_found"  # reads go on to the engine
    assert reader.get("/v0/no/such/route").status == 404


@pytest.mark.parametrize(("method", "path", "body"), [
    ("POST", "/v0/topics/log", {"records": [{"data": 3}]}),
    ("PUT", "/v0/topics/log", {"max_records": 1}),
    ("PUT", "/v0/topics/fresh", {}),
    ("DELETE", "/v0/topics/log", None),
    ("POST", "/v0/topics/log/delete", {"to_seq": 2}),
    ("POST", "/v0/topics/q/claim", {"node": "w"}),
    ("POST", "/v0/topics/q/ack", {"lease_ids": ["x.1"]}),
    ("POST", "/v0/topics/q/nack", {"lease_ids": ["x.1"]}),
    ("POST", "/v0/topics/q/extend", {"lease_ids": ["x.1"]}),
    ("GET", "/v0/work?topics=q&node=w", None),
    ("PUT", "/v0/routers/fan", {"source": "log", "dest": "other"}),
    ("PUT", "/v0/routers/new", {"source": "log", "dest": "other"}),
    ("DELETE", "/v0/routers/fan", None),
])
def test_the_read_token_cannot_change_anything(srv: Srv, method: str, path: str,
                                               body: Any) -> None:
    before = strip_volatile(state(srv))
    r = Client(srv.http_port, READ).request(method, path, body)
    assert r.status == 403, r
    err = r.json["error"]
    assert err["code"] == "forbidden"
    assert err["detail"] == {"reason": "read_only_token", "method": method,
                             "path": path.partition("?")[0]}
    assert "read-only token" in err["message"] and "--token" in err["message"]
    assert strip_volatile(state(srv)) == before
    full = Client(srv.http_port, TOKEN)
    assert full.get("/v0/topics/fresh").status == 404


def test_the_full_token_still_writes_and_a_wrong_token_is_401(srv: Srv) -> None:
    assert Client(srv.http_port, "wrong").get("/v0/topics").status == 401
    assert Client(srv.http_port, None).get("/v0/health").status == 401
    full = Client(srv.http_port, TOKEN)
    assert full.post("/v0/topics/q/claim", {"node": "w"}).status == 200


def test_read_token_needs_a_token(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--no-storage", "--read-token", "r", "--http-port", "0",
                 "--resp-port", "0"]) == 1
    assert "--read-token needs --token" in capsys.readouterr().err
    assert main(["serve", "--no-storage", "--read-token", "t", "--token", "t",
                 "--http-port", "0", "--resp-port", "0"]) == 1
    assert "--read-token must differ from --token" in capsys.readouterr().err
