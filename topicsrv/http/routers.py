"""Router routes (API.md section 6, seeds section 8): create/update, read, list, delete.

  PUT    /v0/routers/:router   {source, dest, preserve_node, preserve_tag, filter, allow_cycle,
                               max_hops, guarantee, create_dest} -> 201 created / 200 updated
  GET    /v0/routers/:router   the router's state
  GET    /v0/routers           {"routers": [state, ...]} in name order
  DELETE /v0/routers/:router   {"router", "deleted": true}; copies already forwarded stay

Rule 1: the engine parses and checks the whole body (`routers.parse_spec`: 400
`invalid_request` naming the field), the graph (409 `router_cycle` with `detail.cycle`, 409
`topic_exists_incompatible` with `detail.reason`) and the endpoints (404 `topic_not_found`
when `create_dest` is false) before it changes anything; a refused request changes nothing.
Rule 1b: a new router (and the topics it creates) is refused over --max-memory with 507
`insufficient_memory`, after the checks of Rule 1 and before anything is created.
Rule 2: an answer waits for its commit token (the router's control frame, and the topics it
created), like a topic PUT.
Rule 3: the state is the engine's `routers.state` object (docs/routers.md); a handler adds
only `performance`, never reshapes it, so HTTP, TOPIC.ROUTER INFO and /metrics agree.
"""

from __future__ import annotations

from topicsrv.http import params as p
from topicsrv.http.handlers import Call, commit, json_response
from topicsrv.http.protocol import Response


def _name(call: Call) -> str:
    return call.params["router"]


async def put_router(call: Call) -> Response:
    body = p.json_object(call.req.body)
    state, created, token = call.ctx.engine.router_put(_name(call), body, call.ctx.memory.check)
    await commit(call, token)
    return json_response(call, dict(state), 201 if created else 200)


async def get_router(call: Call) -> Response:
    return json_response(call, dict(call.ctx.engine.router_get(_name(call))))


async def list_routers(call: Call) -> Response:
    items = sorted(call.ctx.engine.router_list(), key=lambda s: s["name"])
    return json_response(call, {"routers": items})


async def delete_router(call: Call) -> Response:
    name = _name(call)
    token = call.ctx.engine.router_delete(name)
    await commit(call, token)
    return json_response(call, {"router": name, "deleted": True})
