"""Routers (seeds section 8): definitions, runtime state and the graph rules.

A router forwards every record of its source topic after its cursor to its dest, as a derived
copy (engine/routing/routerfwd.py does one forwarding step; tasks/routers.py runs the workers).

Rule 1: a new router starts at `source.earliest_seq - 1`: it forwards the retained log, then
follows. The cursor is the last source seq handled (forwarded, filtered out, hop-capped, or
reported as a gap); it only moves forward.
Rule 2: one inbound router per dest (`router_dest_fan_in`), the dest is a log topic
(`router_dest_is_queue`), the source and dest of a router never change
(`router_endpoints_immutable`); all three are 409 `topic_exists_incompatible`.
Rule 3: an edge closing a directed cycle needs `allow_cycle` (else 409 `router_cycle`, with
`detail.cycle`); hop caps are recomputed on every graph change (engine/routing/routergraph.py).
Rule 4: a PUT validates everything before it creates a topic or a router (core Rule 2); then
a new router asks the front's `admit` (the memory guard: a router and the topics it creates
add data, refused over --max-memory like TOPIC.CREATE; an update creates nothing); the
journal hears a router put/del on the dest (`router_logged`); a topic delete removes the
routers touching it in memory only (storage infers it from the topic's drop).
Rule 4b: a filter that can never match is refused (400 `invalid_request`, field `filter`): an
`Eq` value or a `Glob` prefix longer than a tag can be (MAX_TAG_BYTES, UTF-8), so a router's
state, and so TOPIC.ROUTER LIST, stays small (issue 23).
Rule 5: the runtime links: `topic.ext["router_in"]` (the dest's one Router) and
`topic.ext["router_out"]` (the source's list); `Engine.routers` maps names to Routers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Any

from topicsrv.engine.config import ConfigRequest, check_topic_name
from topicsrv.engine.journal import CommitToken, all_of
from topicsrv.engine.log.deletes import parse_match
from topicsrv.engine.log.records import MAX_TAG_BYTES
from topicsrv.engine.log.topic import Topic
from topicsrv.engine.routing import routergraph
from topicsrv.engine.routing.routerfwd import Step, forward, on_drop, resume_from_evidence
from topicsrv.errors import TopicsError, invalid, not_found

if TYPE_CHECKING:
    from topicsrv.engine.core import Engine

__all__ = ["RouterSpec", "Router", "Step", "parse_spec", "spec_to_json", "spec_from_json", "state",
           "forward", "put", "get", "list_routers", "delete", "drop_topic", "attach", "refresh_caps",
           "resume_from_evidence", "GUARANTEES", "MAX_HOPS"]

GUARANTEES = ("at_least_once", "exactly_once")
MAX_HOPS = 64
_FIELDS = frozenset({"source", "dest", "preserve_node", "preserve_tag", "filter", "allow_cycle",
                     "max_hops", "guarantee", "create_dest"})


@dataclass(frozen=True, slots=True)
class RouterSpec:
    name: str
    source: str
    dest: str
    preserve_node: bool = True
    preserve_tag: bool = True
    filter: tuple[str, str, str] | None = None  # ("tag", "Eq"|"Glob", value or "prefix*")
    allow_cycle: bool = False
    max_hops: int | None = None  # None: automatic (engine/routing/routergraph.py Rule 2)
    guarantee: str = "at_least_once"
    create_dest: bool = True
    created_ts: int = 0

    def matches(self, tag: str | None) -> bool:
        """The filter (the delete tag predicate): a record without a tag never matches."""
        if self.filter is None:
            return True
        if tag is None:
            return False
        _, op, value = self.filter
        return tag == value if op == "Eq" else tag.startswith(value[:-1])


@dataclass(eq=False)
class Router:
    """A router's runtime state (the spec is replaced on a PUT that changes options)."""

    spec: RouterSpec
    cursor: int
    source_epoch: int
    forwarded: int = 0
    skipped: int = 0  # filtered out or hop-capped
    source_trimmed: int = 0  # source seqs reported to the dest as a source_trim gap
    retries: int = 0
    status: str = "forwarding"  # "caught_up" | "forwarding" | "blocked"
    last_error: dict[str, Any] | None = None  # {code, message, since_ts}
    hop_cap: int | None = None  # effective (routergraph Rule 2); None = unlimited
    # Source records evicted above the cursor that this router would have forwarded, counted
    # by the source's drop hook; None = unknown (a restored router: the whole span counts).
    gone: int | None = None

    @property
    def name(self) -> str:
        return self.spec.name


def _bool(body: dict[str, Any], key: str, default: bool) -> bool:
    value = body.get(key, default)
    if not isinstance(value, bool):
        raise invalid(f"'{key}' must be true or false", field=key)
    return value


def _topic_field(body: dict[str, Any], key: str) -> str:
    value = body.get(key)
    if value is None:
        raise invalid(f"a router needs '{key}' (a topic name)", field=key)
    try:
        return check_topic_name(value)
    except TopicsError as exc:
        raise invalid(f"'{key}': {exc.message}", field=key) from None


def parse_spec(name: str, body: Any) -> RouterSpec:
    """A router definition from a PUT body; 400 `invalid_request` naming the bad field."""
    try:
        check_topic_name(name)
    except TopicsError:
        raise invalid(f"invalid router name {name!r}: 1-255 characters of [A-Za-z0-9._:-], "
                      "starting with a letter or digit", field="name") from None
    if not isinstance(body, dict):
        raise invalid("a router definition must be a JSON object")
    unknown = body.keys() - _FIELDS
    if unknown:
        bad = sorted(unknown)[0]
        raise invalid(f"unknown router field '{bad}' (allowed: {', '.join(sorted(_FIELDS))})",
                      field=bad)
    source = _topic_field(body, "source")
    dest = _topic_field(body, "dest")
    if source == dest:
        raise invalid("a router's source and dest must be different topics", field="dest")
    flt: tuple[str, str, str] | None = None
    if body.get("filter") is not None:
        try:
            m = parse_match(body["filter"])
        except TopicsError as exc:
            raise invalid(exc.message.replace("match", "filter"), field="filter") from None
        kind, _, value = m.to_json()
        need = len((value[:-1] if m.kind == "Glob" else value).encode("utf-8", "surrogatepass"))
        if need > MAX_TAG_BYTES:  # Rule 4b
            raise invalid(f"the filter can never match: a tag is at most {MAX_TAG_BYTES} bytes "
                          f"(UTF-8) and this {m.kind} pattern needs {need}", field="filter")
        flt = (kind, m.kind, value)
    max_hops = body.get("max_hops")
    if max_hops is not None and (
            not isinstance(max_hops, int) or isinstance(max_hops, bool) or not 1 <= max_hops <= MAX_HOPS):
        raise invalid(f"'max_hops' must be an integer between 1 and {MAX_HOPS} (or null)",
                      field="max_hops")
    guarantee = body.get("guarantee", "at_least_once")
    if guarantee not in GUARANTEES:
        raise invalid("'guarantee' must be 'at_least_once' or 'exactly_once'", field="guarantee")
    return RouterSpec(
        name=name, source=source, dest=dest,
        preserve_node=_bool(body, "preserve_node", True),
        preserve_tag=_bool(body, "preserve_tag", True),
        filter=flt, allow_cycle=_bool(body, "allow_cycle", False), max_hops=max_hops,
        guarantee=guarantee, create_dest=_bool(body, "create_dest", True),
    )


def spec_to_json(spec: RouterSpec) -> dict[str, Any]:
    out = asdict(spec)
    out["filter"] = list(spec.filter) if spec.filter is not None else None
    return out


def spec_from_json(data: dict[str, Any]) -> RouterSpec:
    flt = data.get("filter")
    return RouterSpec(
        name=data["name"], source=data["source"], dest=data["dest"],
        preserve_node=bool(data.get("preserve_node", True)),
        preserve_tag=bool(data.get("preserve_tag", True)),
        filter=(flt[0], flt[1], flt[2]) if flt else None,
        allow_cycle=bool(data.get("allow_cycle", False)), max_hops=data.get("max_hops"),
        guarantee=data.get("guarantee", "at_least_once"),
        create_dest=bool(data.get("create_dest", True)), created_ts=int(data.get("created_ts", 0)),
    )


def state(engine: Engine, router: Router) -> dict[str, Any]:
    """A router as GET / INFO / list show it (the contract's item 12)."""
    spec = router.spec
    src = engine.find(spec.source)
    head = src.head_seq if src is not None else router.cursor
    out = spec_to_json(spec)
    out.update({
        "hop_cap": router.hop_cap, "cursor": router.cursor, "source_epoch": router.source_epoch,
        "lag": max(0, head - router.cursor), "forwarded": router.forwarded,
        "skipped": router.skipped, "source_trimmed": router.source_trimmed,
        "retries": router.retries, "status": router.status, "last_error": router.last_error,
    })
    return out


def put_op(router: Router) -> dict[str, Any]:
    return {"op": "put", "spec": spec_to_json(router.spec), "cursor": router.cursor,
            "source_epoch": router.source_epoch}


def _edges(engine: Engine, skip: Router | None = None) -> dict[str, list[str]]:
    return routergraph.adjacency(
        (r.spec.source, r.spec.dest) for r in engine.routers.values() if r is not skip)


def _conflict(message: str, reason: str, **detail: Any) -> TopicsError:
    return TopicsError("topic_exists_incompatible", message, {"reason": reason, **detail})


def _check_cycle(engine: Engine, spec: RouterSpec, skip: Router | None) -> None:
    if spec.allow_cycle:
        return
    cycle = routergraph.cycle_through(_edges(engine, skip), spec.source, spec.dest)
    if cycle is not None:
        raise TopicsError(
            "router_cycle",
            f"router '{spec.name}' would close the cycle {' -> '.join(cycle)}; "
            "set allow_cycle to route around it (hop-capped)",
            {"cycle": cycle, "router": spec.name},
        )


def refresh_caps(engine: Engine) -> None:
    """Recompute every router's effective hop cap (routergraph Rule 2)."""
    adj = _edges(engine)
    for r in engine.routers.values():
        r.hop_cap = routergraph.hop_cap(adj, r.spec.source, r.spec.dest, r.spec.max_hops)


def attach(engine: Engine, router: Router, source: Topic, dest: Topic) -> None:
    """Link a router into the engine and its topics (Rule 5); storage's recovery calls this
    too, then `refresh_caps`."""
    engine.routers[router.name] = router
    source.ext.setdefault("router_out", []).append(router)
    source.drop_hook = on_drop
    dest.ext["router_in"] = router


def _detach(engine: Engine, router: Router) -> None:
    engine.routers.pop(router.name, None)
    src = engine.find(router.spec.source)
    if src is not None:
        outs = [r for r in src.ext.get("router_out", ()) if r is not router]
        if outs:
            src.ext["router_out"] = outs
        else:
            src.ext.pop("router_out", None)
            src.drop_hook = None
            inbound: Router | None = src.ext.get("router_in")
            if inbound is None or not (inbound.spec.allow_cycle or inbound.spec.max_hops is not None):
                src.ext.pop("hops", None)  # nobody reads them any more (routerfwd Rule 5)
    dst = engine.find(router.spec.dest)
    if dst is not None and dst.ext.get("router_in") is router:
        del dst.ext["router_in"]


def get(engine: Engine, name: str) -> dict[str, Any]:
    return state(engine, _find(engine, name))


def _find(engine: Engine, name: str) -> Router:
    router = engine.routers.get(name)
    if router is None:
        raise TopicsError("router_not_found", f"router '{name}' does not exist", {"router": name})
    return router


def list_routers(engine: Engine) -> list[dict[str, Any]]:
    return [state(engine, engine.routers[name]) for name in sorted(engine.routers)]


def put(engine: Engine, name: str, body: Any, admit: Callable[[], None] | None = None) -> tuple[
        dict[str, Any], bool, CommitToken | None]:
    """Create or update a router (Rules 1-4). Returns (state, created, token). `admit` may
    refuse a new router (raise) after every check and before anything is created (Rule 4)."""
    spec = parse_spec(name, body)
    old = engine.routers.get(name)
    if old is not None:
        return _update(engine, old, spec)
    src, dst = engine.find(spec.source), engine.find(spec.dest)
    if not spec.create_dest:
        for topic_name, topic in ((spec.source, src), (spec.dest, dst)):
            if topic is None:
                raise not_found(topic_name)
    if dst is not None:
        if dst.type == "queue":
            raise _conflict(f"topic '{spec.dest}' is a queue; a router's dest must be a log topic",
                            "router_dest_is_queue", topic=spec.dest)
        inbound: Router | None = dst.ext.get("router_in")
        if inbound is not None:
            raise _conflict(
                f"topic '{spec.dest}' already has an inbound router ('{inbound.name}' from "
                f"'{inbound.spec.source}'); a derived dest has exactly one source",
                "router_dest_fan_in", topic=spec.dest, router=inbound.name, source=inbound.spec.source)
    _check_cycle(engine, spec, None)
    for topic in (src, dst):
        engine.journal.check_writable(topic)
    if admit is not None:
        admit()
    tokens: list[CommitToken | None] = []
    if src is None:
        src = engine._create(spec.source, ConfigRequest({}, None, None))
        tokens.append(engine.journal.topic_upserted(src))
    if dst is None:
        dst = engine._create(spec.dest, ConfigRequest({}, None, None))
        tokens.append(engine.journal.topic_upserted(dst))
    now = engine.now()
    src.expire(now)
    router = Router(replace(spec, created_ts=now), src.earliest_seq - 1, src.epoch, gone=0)
    attach(engine, router, src, dst)
    refresh_caps(engine)
    if spec.guarantee == "exactly_once":
        resume_from_evidence(engine, router)
    router.status = "caught_up" if router.cursor >= src.head_seq else "forwarding"
    tokens.append(engine.journal.router_logged(dst, put_op(router)))
    engine.notify(spec.source)
    engine.notify(spec.dest)
    return state(engine, router), True, all_of(tokens)


def _update(engine: Engine, router: Router, spec: RouterSpec) -> tuple[dict[str, Any], bool, CommitToken | None]:
    old = router.spec
    if (old.source, old.dest) != (spec.source, spec.dest):
        raise _conflict(
            f"router '{old.name}' routes '{old.source}' -> '{old.dest}'; its source and dest "
            "cannot change (delete it and create another)",
            "router_endpoints_immutable", source=old.source, dest=old.dest)
    _check_cycle(engine, spec, router)
    dst = engine.get(spec.dest)
    engine.journal.check_writable(dst)
    router.spec = replace(spec, created_ts=old.created_ts)
    refresh_caps(engine)
    token = engine.journal.router_logged(dst, put_op(router))
    engine.notify(spec.source)  # the worker looks again (a new filter or cap)
    return state(engine, router), False, token


def delete(engine: Engine, name: str) -> CommitToken | None:
    """Stop forwarding at once (no step runs for a router not in `engine.routers`); the
    copies already in the dest stay."""
    router = _find(engine, name)
    dst = engine.find(router.spec.dest)
    engine.journal.check_writable(dst)
    _detach(engine, router)
    refresh_caps(engine)
    token = engine.journal.router_logged(dst, {"op": "del", "name": name}) if dst is not None else None
    engine.notify(router.spec.source)
    engine.notify(router.spec.dest)
    return token


def drop_topic(engine: Engine, topic: Topic) -> list[Router]:
    """`topic` was deleted (already out of `engine.topics`): remove every router touching it
    (Rule 4: in memory only) and wake the other ends' workers. Returns the removed routers."""
    gone = [r for r in engine.routers.values() if topic.name in (r.spec.source, r.spec.dest)]
    for router in gone:
        _detach(engine, router)
    if gone:
        refresh_caps(engine)
        for router in gone:
            other = router.spec.dest if router.spec.source == topic.name else router.spec.source
            engine.notify(other)
    topic.ext.pop("router_out", None)
    topic.ext.pop("router_in", None)
    topic.drop_hook = None
    return gone
