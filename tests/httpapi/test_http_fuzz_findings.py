"""Bugs the OpenAPI fuzzing (test_openapi_fuzz.py, schemathesis) found, one regression test each:
the request that broke the server or slipped past its checks, and what it must answer now."""

from __future__ import annotations

import pytest

from .conftest import SSE, Client, Reply
from .inproc import Srv


def _refused(r: Reply, field: str) -> None:
    assert r.status == 400, r
    assert r.code == "invalid_request" and r.json["error"]["detail"] == {"field": field}, r


@pytest.mark.parametrize("value", ["\u00b2", "\u0663", "9" * 5000, "1" + "0" * 20])
def test_query_integers_are_ascii_u64s(srv: Srv, c: Client, topic: str, value: str) -> None:
    """"²" passed `str.isdigit` and broke `int` (500), "٣" (Arabic-Indic 3) was taken as 3,
    more than 4300 digits broke `int` (500), and a `from` seq above 2^64-1 opened the watch:
    each is now 400 naming the parameter."""
    from urllib.parse import quote

    c.put(f"/v0/topics/{topic}", {"type": "queue"})
    q = quote(value)
    _refused(c.get(f"/v0/topics?limit={q}"), "limit")
    for path, field in ((f"/v0/topics/{topic}/watch?from_seq={q}", "from_seq"),
                        (f"/v0/work?topics={topic}&node=w&max_in_flight={q}", "max_in_flight"),
                        (f"/v0/watch?topics={topic}&from={topic}:{q}", "from")):
        stream = SSE(srv.http_port, path)  # a stream that opened by mistake must not hang us
        try:
            assert stream.status != 200, f"{path} opened a stream"
            _refused(Reply(stream.status, {}, stream.resp.read()), field)
        finally:
            stream.close()
    assert c.get("/v0/health").status == 200


def test_a_bad_idempotency_key_header_is_refused_even_with_a_body_key(c: Client,
                                                                      topic: str) -> None:
    """The header was only checked when the body had no key: a 1025-character header next to
    a body key was accepted and silently ignored."""
    r = c.post(f"/v0/topics/{topic}", {"records": [{"data": 1}], "idempotency_key": "k"},
               headers={"Idempotency-Key": "x" * 1025})
    _refused(r, "Idempotency-Key")
    assert c.get(f"/v0/topics/{topic}").status == 404  # nothing was written


def test_claim_jitter_is_bounded_like_a_long_poll(c: Client, topic: str) -> None:
    """A queue created with claim_jitter_ms 2^53-1 made every claim (and job stream) on it
    wait for ~285,000 years, even without wait_ms: the window is now at most 60 s."""
    r = c.put(f"/v0/topics/{topic}", {"type": "queue", "claim_jitter_ms": (1 << 53) - 1})
    _refused(r, "claim_jitter_ms")
    assert c.get(f"/v0/topics/{topic}").status == 404  # nothing was created
    r = c.put(f"/v0/topics/{topic}", {"type": "queue", "claim_jitter_ms": 60_000})
    assert r.status == 201 and r.json["config"]["claim_jitter_ms"] == 60_000
    _refused(c.put(f"/v0/topics/{topic}", {"claim_jitter_ms": 60_001}), "claim_jitter_ms")


def test_a_query_parameter_given_twice_is_refused(srv: Srv, c: Client, topic: str) -> None:
    """`?limit=&limit=5` used the first value silently (here: none, so the default 1000): a
    repeated parameter is now 400 naming it, on every route, streams included."""
    c.write(topic, 1)
    _refused(c.get("/v0/topics?limit=&limit=5"), "limit")
    _refused(c.get(f"/v0/topics/{topic}?touch=false&touch=true"), "touch")
    stream = SSE(srv.http_port, f"/v0/watch?topics={topic}&topics=other")
    try:
        assert stream.status != 200, "the watch opened"
        _refused(Reply(stream.status, {}, stream.resp.read()), "topics")
    finally:
        stream.close()
    assert c.get("/v0/topics?limit=5&prefix=t").status == 200
