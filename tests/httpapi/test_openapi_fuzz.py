"""Schemathesis fuzzes every operation of /v0/openapi.json against a real server process.

Per operation: the examples, coverage (boundary and schema-violating values) and fuzzing
phases, then a stateful run along the links schemathesis infers (create a topic, then write,
read, claim, delete it...). Bounded: FUZZ_EXAMPLES cases per operation and STATEFUL_EXAMPLES
workflows, with a fixed seed, so `make test` is reproducible (~35 s); set TOPICSRV_FUZZ_SEED,
TOPICSRV_FUZZ_EXAMPLES and TOPICSRV_FUZZ_STATEFUL to explore further. Each response is
checked for: no 5xx, the status, Content-Type, headers and body the document declares (SSE
events included), schema-violating requests refused with a 4xx, 405 + Allow for a method a
path does not have. After the run the server must still be up, must have logged no internal
error, and must recover the data directory the fuzzing wrote.

Not checked: `positive_data_acceptance` (a schema-valid request gets 2xx). JSON Schema cannot
say what the server also requires: an integer written as a JSON integer (`5.0` is an integer
to JSON Schema), `source` != `dest`, one lease id per seq, queue-only config on queues, a
record of at most 1 MiB. Those refusals are 400s that name the field, which is right.
Long polls are bounded: a generated `wait_ms` that the server would honour is cut to
WAIT_MS, so no case waits long; a schema-violating one is sent as generated (it is refused).
The streaming routes (watch, work) are fuzzed too: a stream is read for STREAM_S and
its events are checked against the document.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

schemathesis = pytest.importorskip("schemathesis", reason="schemathesis is a dev dependency "
                                   "(make setup installs it)")

from conftest import ServerProcess  # noqa: E402
from topicsrv.http.openapi import document  # noqa: E402

FUZZ_EXAMPLES = int(os.environ.get("TOPICSRV_FUZZ_EXAMPLES", "50"))
SEED = int(os.environ.get("TOPICSRV_FUZZ_SEED", "20240917"))
STATEFUL_EXAMPLES = int(os.environ.get("TOPICSRV_FUZZ_STATEFUL", "30"))
WAIT_MS = 20
STREAM_S = 0.25
STREAMS = ("watch_topic", "watch_many", "work", "status_stream", "subscribe_patterns",
           "subscribe_channel")
CHECKS = ("not_a_server_error", "status_code_conformance", "content_type_conformance",
          "response_headers_conformance", "response_schema_conformance",
          "negative_data_rejection", "unsupported_method", "allow_header_conformance",
          "missing_required_header")
INTERNAL = ("internal error serving", "Traceback")


@pytest.fixture(scope="module")
def fuzz_server() -> Iterator[ServerProcess]:
    tmp = Path(tempfile.mkdtemp(prefix="topicsrv-fuzz-"))
    srv = ServerProcess(tmp / "data", "--heartbeat-ms", "50").start()
    try:
        yield srv
    finally:
        srv.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def fuzz_config() -> Any:
    from schemathesis.config import SchemathesisConfig

    return SchemathesisConfig.from_dict({
        "seed": SEED,
        "request-timeout": 10,
        "generation": {"max-examples": FUZZ_EXAMPLES, "database": "none", "no-shrink": True},
        "phases": {"examples": {"enabled": True}, "coverage": {"enabled": True},
                   "fuzzing": {"enabled": True}, "stateful": {"enabled": True}},
        "checks": {"enabled": False, **{name: {"enabled": True} for name in CHECKS}},
        "operations": [{"include-operation-id": op, "request-timeout": STREAM_S,
                        "max-stream-events": 5} for op in STREAMS],
        "suppress-health-check": ["all"],
        "cache": {"enabled": False},  # no .schemathesis/ left in the work tree
    })


# The document is static (served as committed), so the schema loads at collection; the
# server's port, known only at run time, is given with each call.
schema = schemathesis.openapi.from_dict(json.loads(document()), config=fuzz_config())


def wait_limits() -> dict[str, int]:
    """operationId -> the largest `wait_ms` its body schema allows."""
    schemas = json.loads(document())["components"]["schemas"]
    return {op: int(schemas[name]["properties"]["wait_ms"]["anyOf"][0]["maximum"])
            for op, name in (("diff", "DiffRequest"), ("claim", "ClaimRequest"))}


WAIT_LIMITS = wait_limits()


def bound_waits(case: Any) -> None:
    """Cut a `wait_ms` the server would honour to WAIT_MS (the module docstring says why)."""
    limit = WAIT_LIMITS.get(case.operation.definition.raw.get("operationId", ""))
    body = case.body
    if limit is None or not isinstance(body, dict):
        return
    wait = body.get("wait_ms")
    if isinstance(wait, int | float) and not isinstance(wait, bool) and WAIT_MS < wait <= limit:
        body["wait_ms"] = WAIT_MS if isinstance(wait, int) else float(WAIT_MS)


@schema.parametrize()
def test_every_operation_survives_fuzzing(case: Any, fuzz_server: ServerProcess) -> None:
    bound_waits(case)
    case.call_and_validate(base_url=fuzz_server.http_url)


def test_workflows_of_linked_operations(fuzz_server: ServerProcess) -> None:
    """Stateful: sequences of calls along the links schemathesis infers (a PUT's topic then
    read, written, claimed, deleted...), every response checked as above."""
    from hypothesis import settings

    class Workflow(schema.as_state_machine()):  # type: ignore[misc]
        def before_call(self, case: Any) -> None:
            bound_waits(case)

        def get_call_kwargs(self, case: Any) -> dict[str, Any]:
            return {"base_url": fuzz_server.http_url}

    Workflow.run(settings=settings(max_examples=STATEFUL_EXAMPLES, stateful_step_count=8,
                                   deadline=None, database=None, derandomize=True))


def test_the_server_survived_the_fuzzing(fuzz_server: ServerProcess) -> None:
    """Runs after the fuzzing (module order): alive, nothing internal logged, and the data
    the fuzzing wrote recovers after a clean stop."""
    assert fuzz_server.proc is not None and fuzz_server.proc.poll() is None
    with urllib.request.urlopen(fuzz_server.http_url + "/v0/health", timeout=10) as r:
        assert r.status == 200
    with urllib.request.urlopen(fuzz_server.http_url + "/v0/topics?limit=10000",
                                timeout=10) as r:
        before = json.loads(r.read())["topics"]
    log = fuzz_server.log_path.read_text(errors="replace")
    assert not [line for line in log.splitlines() if any(s in line for s in INTERNAL)], log[-4000:]
    assert fuzz_server.stop() == 0
    fuzz_server.start()
    with urllib.request.urlopen(fuzz_server.http_url + "/v0/topics?limit=10000",
                                timeout=10) as r:
        after = json.loads(r.read())["topics"]
    assert [t["topic"] for t in after] == [t["topic"] for t in before]
