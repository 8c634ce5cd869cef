"""The OpenAPI document (topicsrv/http/openapi.json): it covers exactly the router's routes, it
is what `build()` makes and what GET /v0/openapi.json serves, it is valid OpenAPI 3.1, and real
responses of a scripted tour (every route, the error statuses) conform to it."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from topicsrv.http import app
from topicsrv.http.openapi import DOC_FILE, build, document, render
from topicsrv.http.router import ROUTES

from .conftest import Client, Reply, sse_opener
from .inproc import Srv, start_server

DOC: dict[str, Any] = json.loads(document())
STREAMING = app.STREAMS  # planned in app.dispatch, not HANDLERS


def doc_operations() -> dict[tuple[str, str], str]:
    """(METHOD, path template) -> operationId, as the document has them."""
    out = {}
    for path, item in DOC["paths"].items():
        for method, op in item.items():
            if method != "parameters":
                out[(method.upper(), path)] = op["operationId"]
    return out


def router_operations() -> dict[tuple[str, str], str]:
    return {(method, "/" + "/".join(route.pattern)): handler
            for route in ROUTES for method, handler in route.methods.items()}


# ---- the document and the router agree ------------------------------------------------


def test_every_route_is_documented_and_every_operation_is_routed() -> None:
    documented, routed = doc_operations(), router_operations()
    assert sorted(set(routed) - set(documented)) == [], "routes missing from openapi.json"
    assert sorted(set(documented) - set(routed)) == [], "operations the router does not have"
    assert documented == routed  # operationId is the handler name


def test_every_handler_has_an_operation() -> None:
    assert set(doc_operations().values()) == set(app.HANDLERS) | STREAMING


def test_the_committed_file_is_what_build_makes() -> None:
    # Regenerate with: python -m topicsrv.http.openapi
    assert document() == render(), f"{DOC_FILE} is stale"
    assert DOC == build()


def test_the_document_is_valid_openapi_3_1() -> None:
    from openapi_spec_validator import validate

    assert DOC["openapi"].startswith("3.1")
    validate(DOC)


def test_every_error_status_carries_only_its_codes() -> None:
    from topicsrv.errors import STATUS_BY_CODE

    responses = DOC["components"]["responses"]
    documented = set()
    for name, resp in responses.items():
        codes = resp["content"]["application/json"]["schema"]["properties"]["error"][
            "properties"]["code"]["enum"]
        assert {STATUS_BY_CODE[c] for c in codes} == {int(name[1:])}
        documented |= set(codes)
    assert documented == set(STATUS_BY_CODE) - {"method_not_allowed"}  # 405: a path, not an op
    assert set(DOC["components"]["schemas"]["Error"]["properties"]["error"]["properties"][
        "code"]["enum"]) == set(STATUS_BY_CODE)


def test_served_as_committed(c: Client) -> None:
    r = c.get("/v0/openapi.json")
    assert r.status == 200 and r.headers["content-type"].startswith("application/json")
    assert r.body == document()
    conform("GET", "/v0/openapi.json", r)


# ---- real responses conform ---------------------------------------------------------------


def _validator(schema: dict[str, Any]) -> Draft202012Validator:
    """A validator of one schema of the document ("#/components/..." refs resolve: the
    components ride along in the root)."""
    return Draft202012Validator({"components": DOC["components"], "allOf": [schema]})


def _response(method: str, path: str, status: int) -> dict[str, Any]:
    op = DOC["paths"][_template(path)][method.lower()]
    assert str(status) in op["responses"], f"{method} {path}: {status} is not documented"
    resp = op["responses"][str(status)]
    if "$ref" in resp:
        resp = DOC["components"]["responses"][resp["$ref"].rsplit("/", 1)[1]]
    return resp  # type: ignore[no-any-return]


def _template(path: str) -> str:
    """The route template a concrete path matches (any segment value for a `{name}`)."""
    parts = path.split("?")[0].strip("/").split("/")
    for route in ROUTES:
        if len(route.pattern) == len(parts) and all(
                want.startswith("{") or want == got
                for want, got in zip(route.pattern, parts, strict=True)):
            return "/" + "/".join(route.pattern)
    raise AssertionError(f"no route for {path}")


def conform(method: str, path: str, r: Reply) -> Reply:
    """Assert `r` is a documented status of the route with a body of the documented schema."""
    resp = _response(method, path, r.status)
    media = r.headers["content-type"].split(";")[0].strip()
    assert media in resp["content"], (method, path, r.status, media)
    schema = resp["content"][media]["schema"]
    if media == "application/json":
        errors = sorted(_validator(schema).iter_errors(json.loads(r.body)), key=str)
        assert not errors, f"{method} {path} {r.status}: {errors[0]}\n{r.body[:500]!r}"
    else:
        assert isinstance(r.body.decode(), str)
    return r


def conform_events(method: str, path: str, events: list[dict[str, Any]]) -> None:
    """SSE events ({event, id?, data}) against the documented event schema, `data` against
    its contentSchema."""
    schema = _response(method, path, 200)["content"]["text/event-stream"]["schema"]
    for ev in events:
        wire = {k: (json.dumps(v) if k == "data" else v) for k, v in ev.items()
                if k in ("event", "id", "data")}
        assert not list(_validator(schema).iter_errors(wire)), ev
        branch = next(b for b in schema["oneOf"] if b["properties"]["event"]["const"] == ev["event"])
        content = branch["properties"]["data"]["contentSchema"]
        errors = list(_validator(content).iter_errors(ev["data"]))
        assert not errors, f"{ev}: {errors[0]}"


class Tour:
    """A client whose every answer is checked against the document."""

    def __init__(self, client: Client) -> None:
        self.c = client

    def __call__(self, method: str, path: str, body: Any = None, expect: int = 200,
                 **kw: Any) -> Any:
        r = conform(method, path, self.c.request(method, path, body, **kw))
        assert r.status == expect, r
        return r.json if r.headers["content-type"].startswith("application/json") else r.body


@pytest.fixture
def tour(c: Client) -> Tour:
    return Tour(c)


@pytest.fixture
def streams(srv: Srv) -> Iterator[Any]:
    yield from sse_opener(srv.http_port)


def test_tour_of_topics_writes_diffs_and_deletes(tour: Tour, topic: str) -> None:
    tour("GET", "/v0/health")
    tour("GET", "/v0/ready")
    tour("GET", "/metrics")
    t = f"/v0/topics/{topic}"
    tour("PUT", t, {"cap_records": 3, "priority": 5}, expect=201)
    tour("PUT", t, {"ttl_ms": 60_000}, expect=200)
    tour("POST", t, {"records": [{"data": {"n": 1}, "tag": "a:1", "node": "n1",
                                  "meta": {"k": "v"}}, {"data": None}, {"data": [1, "x"]}]})
    tour("POST", t, {"records": [{"data": 4}], "idempotency_key": "k1"})
    state = tour("GET", t)
    assert state["head_seq"] == 4 and state["count"] == 3
    tour("GET", t + "?touch=false")
    tour("GET", f"/v0/topics?prefix={topic}&limit=1")
    diff = tour("POST", t + "/diff", {"from_seq": 0, "limit": 2})
    assert diff["tombstone"]["reason"] == "cap"
    tour("POST", t + "/diff", {"from_seq": 4, "wait_ms": 1, "node": ["n1"]})
    tour("POST", t + "/delete", {"before_seq": 3})
    tour("POST", t + "/delete", {"match": ["tag", "Glob", "a:*"]})
    tour("DELETE", t)
    tour("POST", t + "/diff", {"from_seq": 1, "epoch": 1}, expect=404)


def test_tour_of_queues(tour: Tour, topic: str, streams: Any) -> None:
    q = f"/v0/topics/{topic}"
    tour("PUT", q, {"type": "queue", "lease_ms": 30_000, "max_deliveries": 3}, expect=201)
    tour("POST", q, {"records": [{"data": {"job": i}} for i in range(4)]})
    jobs = tour("POST", q + "/claim", {"node": "w1", "max": 3})["jobs"]
    seqs, ids = [j["$seq"] for j in jobs], [j["lease_id"] for j in jobs]
    tour("POST", q + "/ack", {"node": "w1", "seqs": seqs[:1], "lease_ids": ids[:1]})
    assert tour("POST", q + "/ack", {"node": "w2", "seqs": seqs[1:2]})["skipped"]
    tour("POST", q + "/extend", {"node": "w1", "seqs": seqs[1:2], "lease_ms": 60_000})
    tour("POST", q + "/nack", {"node": "w1", "seqs": seqs[1:], "delay_ms": 0})
    assert tour("GET", q)["queue"]["ready"] == 3
    work = f"/v0/work?topics={topic}&node=w3&max_in_flight=2"
    s = streams(work)
    assert s.status == 200 and s.resp.getheader("content-type").startswith("text/event-stream")
    conform_events("GET", work, s.frames(2))
    tour("POST", q + "/claim", {"node": "w1", "max": 1, "wait_ms": 1})
    tour("POST", q + "/claim", {}, expect=400)


def test_tour_of_watches(tour: Tour, topic: str, streams: Any) -> None:
    t = f"/v0/topics/{topic}"
    tour("PUT", t, {"cap_records": 2}, expect=201)
    tour("POST", t, {"records": [{"data": i, "tag": "x"} for i in range(4)]})
    one = f"{t}/watch?from_seq=0"
    s = streams(one)
    frames = s.frames(3)
    assert [f["event"] for f in frames] == ["tombstone", "record", "record"]
    conform_events("GET", one, frames)
    many = f"/v0/watch?topics={topic}&from={topic}:2"
    conform_events("GET", many, streams(many).frames(2))
    for path in (f"{t}/watch?from_seq=x", "/v0/watch", f"/v0/topics/{topic}-no/watch"):
        r = tour.c.get(path)
        assert r.status in (400, 404)
        conform("GET", path, r)


def test_tour_of_routers(tour: Tour, topic: str) -> None:
    r = f"/v0/routers/{topic}-r"
    spec = {"source": topic, "dest": f"{topic}.copy", "filter": ["tag", "Eq", "x"]}
    tour("PUT", r, spec, expect=201)
    tour("PUT", r, {**spec, "preserve_tag": False}, expect=200)
    tour("POST", f"/v0/topics/{topic}", {"records": [{"data": 1, "tag": "x"}]})
    tour("GET", r)
    tour("GET", "/v0/routers")
    err = tour("PUT", f"/v0/routers/{topic}-back", {"source": f"{topic}.copy", "dest": topic},
               expect=409)
    assert err["error"]["code"] == "router_cycle"
    tour("DELETE", r)
    assert tour("GET", r, expect=404)["error"]["code"] == "router_not_found"
    tour("PUT", r, {"source": topic}, expect=400)


def test_tour_of_errors(tour: Tour, topic: str, c: Client) -> None:
    t = f"/v0/topics/{topic}"
    codes = {
        "invalid_json": tour("POST", t, raw=b'{"records": [', expect=400),
        "invalid_topic_name": tour("GET", "/v0/topics/bad!name", expect=400),
        "record_too_large": tour("POST", t, {"records": [{"data": 1, "node": "n" * 200}]},
                                 expect=400),
        "invalid_request": tour("PUT", t, {"cap_recods": 1}, expect=400),
        "topic_not_found": tour("GET", t, expect=404),
        "unsupported_media_type": tour("POST", t, raw=b"{}",
                                       headers={"Content-Type": "text/plain"}, expect=415),
        "forbidden": tour("GET", t, headers={"Host": "evil.example"}, expect=403),
    }
    tour("PUT", t, {"cap_records": 1, "discard": "reject"}, expect=201)
    tour("POST", t, {"records": [{"data": 1}]})
    codes["topic_full"] = tour("POST", t, {"records": [{"data": 2}]}, expect=422)
    codes["topic_exists_incompatible"] = tour("PUT", t, {"type": "queue"}, expect=409)
    codes["not_a_queue"] = tour("POST", t + "/claim", {"node": "w"}, expect=409)
    assert {k: v["error"]["code"] for k, v in codes.items()} == {k: k for k in codes}


def test_body_too_large_conforms(srv: Srv, topic: str) -> None:
    with socket.create_connection(("127.0.0.1", srv.http_port), timeout=10) as s:
        s.sendall(f"POST /v0/topics/{topic} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                  f"application/json\r\nContent-Length: {(64 << 20) + 1}\r\n\r\n".encode())
        data = s.recv(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    headers = dict(line.split(": ", 1) for line in head.decode().split("\r\n")[1:])
    r = conform("POST", f"/v0/topics/{topic}", Reply(status, {k.lower(): v for k, v in
                                                              headers.items()}, body))
    assert r.status == 413 and r.code == "body_too_large"


def test_unauthorized_conforms() -> None:
    srv, stop = start_server(token="s3cret")
    try:
        c = srv.client()
        r = conform("GET", "/v0/topics", c.get("/v0/topics"))
        assert r.status == 401 and r.headers["www-authenticate"].startswith("Bearer")
        assert conform("GET", "/v0/openapi.json", Client(srv.http_port, "s3cret").get(
            "/v0/openapi.json")).status == 200
        c.close()
    finally:
        stop()

