"""docs/http-api.md is executable: its examples are replayed, in order, against a fresh server.

Block kinds in the doc:
  ```http-request   METHOD PATH, optional header lines, a blank line, an optional body
  ```http-response  `HTTP/1.1 STATUS ...`, optional header lines, a blank line, the body.
                    A JSON body must equal the real one exactly, except volatile fields
                    (timings, timestamps, uptime) whose values are not compared. A text body
                    (metrics) is an excerpt: every line must appear in the real body.
  ```sse-response   the first frames of the stream the preceding request opened (a watch or
                    a /v0/work job stream), compared frame by frame (id, event, data;
                    volatile fields ignored).
Set DOCS_DUMP=1 to print the real responses (to write new examples).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

DOC = Path(__file__).resolve().parents[2] / "docs" / "http-api.md"
VOLATILE = {"$ts", "ts", "server_total_ms", "fsync_ms", "last_write_ts", "last_read_ts",
            "uptime_s", "effective_priority", "priority_components", "version", "build",
            # queues: lease ids carry a random nonce, deadlines follow the clock
            "lease_id", "deadline", "deadlines", "ready_at", "oldest_ready_age_ms",
            # routers: the creation time and a blocked router's since_ts follow the clock
            "created_ts", "since_ts"}
BLOCK = re.compile(r"^```(http-request|http-response|sse-response)\n(.*?)^```", re.M | re.S)


def blocks() -> list[tuple[str, str]]:
    return [(m.group(1), m.group(2)) for m in BLOCK.finditer(DOC.read_text())]


def scrub(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: ("<volatile>" if k in VOLATILE else scrub(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [scrub(v) for v in value]
    return value


def split_head(text: str) -> tuple[str, dict[str, str], str]:
    head, _, body = text.partition("\n\n")
    first, *lines = head.splitlines()
    headers = {}
    for line in lines:
        name, _, value = line.partition(":")
        headers[name.strip()] = value.strip()
    return first, headers, body.strip()


def test_doc_has_examples_for_every_route() -> None:
    text = DOC.read_text()
    requests = [split_head(b)[0] for kind, b in blocks() if kind == "http-request"]
    for route in ("PUT /v0/topics/", "GET /v0/topics/", "GET /v0/topics?", "DELETE /v0/topics/",
                  "POST /v0/topics/", "/diff", "/delete", "GET /v0/health", "GET /v0/ready",
                  "GET /metrics", "/watch?from_seq", "GET /v0/watch?topics=", "/claim", "/ack",
                  "/nack", "/extend", "GET /v0/work?topics=", "PUT /v0/routers/",
                  "GET /v0/routers/", "GET /v0/routers", "DELETE /v0/routers/"):
        assert any(route in r for r in requests), route
    for code in ("invalid_request", "invalid_topic_name", "record_too_large", "invalid_json",
                 "unauthorized", "topic_not_found", "not_found", "method_not_allowed",
                 "topic_exists_incompatible", "body_too_large", "topic_full", "not_ready",
                 "forbidden", "unsupported_media_type", "not_a_queue", "router_not_found",
                 "router_cycle"):
        assert f"`{code}`" in text, code


def test_doc_examples_replay(server_factory: Any, connect: Any, watch: Any) -> None:
    srv = server_factory()
    srv.wait_ready()
    client = connect(port=srv.http_port)
    dump = os.environ.get("DOCS_DUMP")
    pending: Any = None
    stream: Any = None
    checked = 0
    for kind, text in blocks():
        if kind == "http-request":
            first, headers, body = split_head(text)
            method, path = first.split(" ", 1)
            if path.startswith(("/v0/watch", "/v0/work")) or path.endswith("/watch") or "/watch?" in path:
                stream = watch(path, headers=headers, port=srv.http_port)
                pending = None
            else:
                pending = client.request(method, path, raw=body.encode() if body else None,
                                         headers=headers)
                stream = None
            continue
        if kind == "sse-response":
            assert stream is not None, "an sse-response must follow a watch request"
            want = [dict(line.split(": ", 1) for line in f.splitlines())
                    for f in text.strip().split("\n\n")]
            got = stream.frames(len(want))
            if dump:
                print("\n".join(f"id: {g.get('id')}\nevent: {g['event']}\ndata: "
                                f"{json.dumps(g['data'], separators=(',', ':'))}\n" for g in got))
            for w, g in zip(want, got, strict=True):
                assert w["event"] == g["event"]
                assert w.get("id") == g.get("id"), (w, g)
                assert scrub(json.loads(w["data"])) == scrub(g["data"]), (w, g)
            checked += 1
            continue
        assert pending is not None, f"a response without a request: {text[:80]}"
        status_line, headers, body = split_head(text)
        if dump:
            print(pending.status, pending.body.decode()[:3000])
        assert int(status_line.split()[1]) == pending.status, (text, pending)
        for name, value in headers.items():
            assert pending.headers[name.lower()] == value, (name, pending.headers)
        if body.startswith("{"):
            assert scrub(json.loads(body)) == scrub(pending.json), (body, pending)
        else:
            real = set(pending.body.decode().splitlines())
            for line in body.splitlines():
                assert line in real, line
        pending = None
        checked += 1
    assert checked >= 30
