"""What router re-derivation (storage/rederive.py) works on: a loaded topic, a dest's plan,
and where a dest's own WAL frame belongs among its router's copies (rederive.py Rule 1).

Rule 1: a frame written through the journal while a router was installed carries `rc` (the
router's cursor then); APPEND, DELETE and LOSTRANGE frames also name the dest's next seq.
`target` reads both; frames not in PLACED (ceilings, segment drops, topic configs) apply
where they are.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from topicsrv.engine.log.topic import Topic
from topicsrv.engine.routing import routers
from topicsrv.storage import codec, frames
from topicsrv.storage.images import Image
from topicsrv.storage.state import TState


class At:
    """The recovery's clock: every copy re-derived at startup gets the startup time."""

    def __init__(self, now: int) -> None:
        self.now = now

    def now_ms(self) -> int:
        return self.now


@dataclass
class Loaded:
    img: Image
    topic: Topic
    st: TState
    done: bool  # a config-only class: nothing more to apply or finalize
    head: int = 0  # next_seq - 1 once its frames are applied (before the crash gap)


@dataclass
class Plan:
    """A dest whose frames are merged with its router's re-derived copies."""

    loaded: Loaded
    rederive: bool
    i: int = 0  # next frame of img.ops
    last_rc: int = -1
    removed: list[str] = field(default_factory=list)
    removals: list[tuple[int, dict[str, Any]]] | None = None  # (op index, `oc`) of its DELETE/TRIMs

    @property
    def topic(self) -> Topic:
        return self.loaded.topic

    @property
    def ops(self) -> list[tuple[int, memoryview]]:
        return self.loaded.img.ops

    @property
    def router(self) -> routers.Router | None:
        r: routers.Router | None = self.topic.ext.get("router_in")
        return r


# frames written through the journal while a router was installed carry `rc` (routerlog Rule 2);
# the others (ceilings, segment drops, topic configs) apply where they are, unplaced
PLACED = frozenset({frames.T_APPEND, frames.T_APPEND_RC, frames.T_DELETE, frames.T_TRIM, frames.T_GROUPOP,
                    frames.T_LEASES, frames.T_LOSTRANGE, frames.T_ROUTER})


def target(ftype: int, body: memoryview) -> tuple[int | None, int | None, dict[str, Any] | None]:
    """(rc, the dest's next seq the frame names or None, the JSON body or None)."""
    if ftype == frames.T_APPEND:
        return None, codec.append_header(body)[2], None
    if ftype == frames.T_APPEND_RC:
        return codec.append_rc(body), codec.append_header(body)[2], None
    d = codec.decode_json(body)
    rc = d.get("rc")
    at: int | None = None
    if ftype == frames.T_DELETE:
        at = int(d["bound"])
    elif ftype == frames.T_LOSTRANGE:
        at = int(d["first"])
    return (None if rc is None else int(rc)), at, d


def has_router(img: Image) -> bool:
    ck = img.ckpt or {}
    return bool(ck.get("router_in")) or any(ftype == frames.T_ROUTER for ftype, _ in img.ops)


def sources(img: Image, specs: dict[str, dict[str, Any]]) -> set[str]:
    out = set()
    ri = (img.ckpt or {}).get("router_in")
    if ri:
        spec = ri.get("spec") or specs.get(ri["name"])
        if spec:
            out.add(spec["source"])
    for ftype, body in img.ops:
        if ftype == frames.T_ROUTER:
            op = codec.decode_json(body)["op"]
            if op.get("op") == "put":
                out.add(op["spec"]["source"])
    return out
