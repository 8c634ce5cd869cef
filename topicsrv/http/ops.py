"""Operations routes (API.md section 8): liveness, readiness and Prometheus metrics.

Rule 1: /v0/health answers 200 whenever the process serves HTTP; /v0/ready answers 503
`not_ready` until recovery finished (`ctx.ready`), with how far it has come in
`error.detail.recovery` (phase, records, records/s, % of the WAL replayed:
storage/progress.py), and 503 `shutting_down` once a shutdown began. Once recovered it is 200
also when a file the server runs without is damaged (functions.json: Storage Rule 5): ready
means recovered and serving; `damaged` names each such file, what is wrong, and the command
that replaces it (docs/decisions.md).
Rule 2: /metrics is rendered by `topicsrv.http.metrics` (see there), through prometheus_client.
"""

from __future__ import annotations

import time

from topicsrv import __version__, buildinfo
from topicsrv.errors import TopicsError
from topicsrv.http.handlers import Call, json_response
from topicsrv.http.metrics import render
from topicsrv.http.protocol import Response


async def health(call: Call) -> Response:
    return json_response(call, {"status": "ok", "version": __version__,
                                "uptime_s": round(time.time() - call.ctx.started_at, 3)})


async def ready(call: Call) -> Response:
    ctx = call.ctx
    if ctx.shutting_down:
        raise TopicsError("shutting_down", "the server is shutting down")
    if not ctx.ready:
        storage = ctx.storage
        detail = None if storage is None else {"recovery": storage.progress.snapshot()}
        raise TopicsError("not_ready", "the server is still recovering; retry shortly", detail)
    cfg = ctx.config
    repl = ctx.repl
    role: dict[str, object] = {"role": "master"}
    if repl.master is not None:
        role = {"role": "replica", "primary": f"{repl.master[0]}:{repl.master[1]}",
                "master_link_status": "up" if repl.link_up else "down",
                "repl_offset": repl.offset}
    return json_response(call, {"ready": True, "build": buildinfo.describe(), **role,
                                "keyspace_durability": cfg.keyspace_durability if cfg.storage else "none",
                                "damaged": [] if ctx.storage is None else ctx.storage.damage_report()})


async def metrics(call: Call) -> Response:
    body, content_type = render(call.ctx, call.req.headers.get("accept", ""))
    return Response(200, body, content_type=content_type.encode())
