"""The differential harness: run the same command scripts against a real redis-server (the
reference) and topicsrv, and compare the replies.

Rule 1: replies are compared as TYPED trees (simple vs bulk string, null bulk vs null array,
RESP3 map vs array...), parsed by the small RESP2/RESP3 reader below, not by a client library
that would blur those differences.
Rule 2: stream IDs differ by design (topicsrv assigns `<ts>-<seq>`), so every distinct ID in a
reply is replaced, per server, by a placeholder `<ID n>` in order of first appearance ("0-0"
stays literal). A later argument `{ID n}` is resolved back to that server's own ID n.
Rule 3: a step whose replies are time-dependent names the paths to mask; a step whose reply
differs ON PURPOSE names its key in the one table of docs/redis-compatibility.md (`DIFFERENCES`
below is loaded from that table) and the harness asserts that the two replies really differ.
Rule 4: one redis-server and one topicsrv per test module (fixtures in ../conftest.py); tests
use their own key names. `COMPAT_REFERENCE_ONLY=1` runs the scripts against redis alone.
"""

from __future__ import annotations

import os
import re
import socket
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "redis-compatibility.md"
REFERENCE_ONLY = os.environ.get("COMPAT_REFERENCE_ONLY") == "1"


def load_differences() -> dict[str, str]:
    """Keys of the intended-differences table: rows `| \\`key\\` | ... |` between the markers."""
    text = DOC.read_text() if DOC.exists() else ""
    start, end = text.find("<!-- differences:start -->"), text.find("<!-- differences:end -->")
    out: dict[str, str] = {}
    for line in text[start:end].splitlines():
        m = re.match(r"\|\s*`([a-z0-9-]+)`\s*\|(.*)\|\s*$", line)
        if m:
            out[m.group(1)] = m.group(2).strip()
    return out


DIFFERENCES = load_differences()

# ---- a typed RESP2/RESP3 reader ----------------------------------------------------------------

Tree = Any  # ("+", str) | ("-", str) | (":", int) | ("$", bytes) | ("*", [..]) | ("%", [(k, v)..]) ...


class Incomplete(Exception):
    pass


def parse(buf: bytes, pos: int = 0) -> tuple[Tree, int]:
    end = buf.find(b"\r\n", pos)
    if end < 0:
        raise Incomplete
    kind, line, pos = chr(buf[pos]), buf[pos + 1:end], end + 2
    if kind in "+-(,":
        return (kind, line.decode("utf-8", "replace")), pos
    if kind == ":":
        return (":", int(line)), pos
    if kind == "#":
        return ("#", line == b"t"), pos
    if kind == "_":
        return ("null",), pos
    if kind in "$=!":
        n = int(line)
        if n < 0:
            return ("nullbulk",), pos
        if len(buf) < pos + n + 2:
            raise Incomplete
        return (kind, buf[pos:pos + n]), pos + n + 2
    if kind in "*~>%|":
        n = int(line)
        if n < 0:
            return ("nullarray",), pos
        items = []
        for _ in range(n * 2 if kind in "%|" else n):
            item, pos = parse(buf, pos)
            items.append(item)
        if kind in "%|":
            return (kind, list(zip(items[::2], items[1::2], strict=True))), pos
        return (kind, items), pos
    raise ValueError(f"bad RESP type byte {kind!r} in {buf[pos - 20:pos + 20]!r}")


def encode(args: Sequence[bytes | str | int]) -> bytes:
    parts = [b"*%d\r\n" % len(args)]
    for a in args:
        b = a if isinstance(a, bytes) else str(a).encode()
        parts.append(b"$%d\r\n%b\r\n" % (len(b), b))
    return b"".join(parts)


class RespConn:
    """One raw RESP connection; `call` sends one command, `pipeline` several in one write."""

    def __init__(self, port: int, protocol: int = 2, timeout: float = 10.0) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.buf = b""
        if protocol == 3:
            reply = self.call("HELLO", "3")
            assert reply[0] == "%", reply

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def read(self) -> Tree:
        while True:
            try:
                tree, pos = parse(self.buf)
            except Incomplete:
                chunk = self.sock.recv(65536)
                if not chunk:
                    raise ConnectionError("server closed the connection") from None
                self.buf += chunk
                continue
            self.buf = self.buf[pos:]
            return tree

    def call(self, *args: bytes | str | int) -> Tree:
        self.sock.sendall(encode(args))
        return self.read()

    def pipeline(self, cmds: Sequence[Sequence[bytes | str | int]]) -> list[Tree]:
        self.sock.sendall(b"".join(encode(c) for c in cmds))
        return [self.read() for _ in cmds]

    def close(self) -> None:
        self.sock.close()


# ---- ID normalisation ----------------------------------------------------------------------------

ID_RE = re.compile(rb"^\d+-\d+$")


class Ids:
    """Per-server ID <-> placeholder table (Rule 2)."""

    def __init__(self) -> None:
        self.to_ph: dict[bytes, str] = {}
        self.from_ph: dict[str, bytes] = {}

    def ph(self, ident: bytes) -> str:
        if ident == b"0-0":
            return "0-0"
        if ident not in self.to_ph:
            name = f"<ID {len(self.to_ph) + 1}>"
            self.to_ph[ident] = name
            self.from_ph[name] = ident
        return self.to_ph[ident]

    def norm(self, tree: Tree) -> Tree:
        kind = tree[0]
        if kind in ("$", "+") and ID_RE.match(tree[1] if kind == "$" else tree[1].encode()):
            raw = tree[1] if kind == "$" else tree[1].encode()
            return (kind, self.ph(raw))
        if kind in "*~>":
            return (kind, [self.norm(t) for t in tree[1]])
        if kind in "%|":
            return (kind, [(self.norm(k), self.norm(v)) for k, v in tree[1]])
        return tree

    def norm_py(self, value: Any) -> Any:
        """The same for values decoded by redis-py."""
        if isinstance(value, (bytes, str)):
            raw = value if isinstance(value, bytes) else value.encode()
            return self.ph(raw) if ID_RE.match(raw) else value
        if isinstance(value, (list, tuple)):
            return type(value)(self.norm_py(v) for v in value)
        if isinstance(value, dict):
            return {self.norm_py(k): self.norm_py(v) for k, v in value.items()}
        return value

    def resolve(self, arg: str) -> bytes:
        def sub(m: re.Match[str]) -> str:
            # an ID this server never produced stays a visible placeholder (the diff shows why)
            return self.from_ph.get(f"<ID {m.group(1)}>", m.group(0).encode()).decode()

        return re.sub(r"\{ID (\d+)\}", sub, arg).encode()


MASKED = ("masked",)


def mask(tree: Tree, path: Sequence[int | str]) -> Tree:
    """Replace the node(s) at `path` ("*" = every element; a str key = the value after that
    bulk key in a flat array or map) with MASKED."""
    if not path:
        return MASKED
    head, rest = path[0], path[1:]
    kind = tree[0]
    if kind in "%|" and isinstance(head, str):
        return (kind, [(k, mask(v, rest) if k[1] in (head, head.encode()) else v) for k, v in tree[1]])
    if kind not in "*~>":
        return tree
    items = list(tree[1])
    if head == "*":
        items = [mask(t, path[1:]) for t in items]
    elif isinstance(head, str):
        for i in range(0, len(items) - 1):
            if items[i][0] == "$" and items[i][1] == head.encode():
                items[i + 1] = mask(items[i + 1], rest)
    elif head < len(items):
        items[head] = mask(items[head], rest)
    return (kind, items)


# ---- scripts -------------------------------------------------------------------------------------


@dataclass
class Step:
    args: tuple[str, ...]
    masks: tuple[tuple[int | str, ...], ...] = ()
    diff: str | None = None  # key of an intended difference (docs table)
    expect: Any = None  # optional expected normalised reply (checked against redis too)


def S(*args: str, mask: Sequence[Sequence[int | str]] = (), diff: str | None = None, expect: Any = None) -> Step:
    return Step(tuple(args), tuple(tuple(m) for m in mask), diff, expect)


@dataclass
class Target:
    name: str
    port: int
    conns: dict[int, RespConn] = field(default_factory=dict)

    def conn(self, protocol: int = 2) -> RespConn:
        return RespConn(self.port, protocol)


# XINFO STREAM fields Redis 8.6 added (idempotent XADD); redis-server 7.0 (the reference) has
# none of them, so both sides' replies are compared without them; compat/test_idmp.py checks
# topicsrv's values against the Redis docs.
REDIS8_FIELDS = frozenset({b"idmp-duration", b"idmp-maxsize", b"pids-tracked", b"iids-tracked",
                           b"iids-added", b"iids-duplicates"})


def drop_redis8(tree: Tree) -> Tree:
    kind = tree[0]
    if kind in "%|":
        return (kind, [(k, drop_redis8(v)) for k, v in tree[1]
                       if len(k) < 2 or _bytes(k[1]) not in REDIS8_FIELDS])
    if kind not in "*~>":
        return tree
    items, out, i = tree[1], [], 0
    while i < len(items):
        if items[i][0] in "$+" and i + 1 < len(items) and _bytes(items[i][1]) in REDIS8_FIELDS:
            i += 2
            continue
        out.append(drop_redis8(items[i]))
        i += 1
    return (kind, out)


def _bytes(v: Any) -> Any:
    return v.encode() if isinstance(v, str) else v


def run_script(target: Target, steps: Sequence[Step | tuple[str, ...]], protocol: int) -> list[Tree]:
    conn = target.conn(protocol)
    ids = Ids()
    out = []
    try:
        for step in steps:
            st = step if isinstance(step, Step) else Step(tuple(step))
            if st.args[0] == "SLEEP":  # pseudo-step: let the millisecond clock move on
                time.sleep(float(st.args[1]))
                out.append(("+", "SLEPT"))
                continue
            tree = drop_redis8(ids.norm(conn.call(*[ids.resolve(a) for a in st.args])))
            for m in st.masks:
                tree = mask(tree, m)
            out.append(tree)
    finally:
        conn.close()
    return out


def show(tree: Tree) -> str:
    kind = tree[0]
    if kind in "*~>":
        return "[" + ", ".join(show(t) for t in tree[1]) + "]"
    if kind in "%|":
        return "{" + ", ".join(f"{show(k)}: {show(v)}" for k, v in tree[1]) + "}"
    if len(tree) == 1:
        return kind
    return f"{kind}{tree[1]!r}"


class Differ:
    """Runs scripts on both servers and asserts identical normalised replies (Rule 3)."""

    def __init__(self, ref: Target, ours: Target | None) -> None:
        self.ref = ref
        self.ours = ours

    def check(self, steps: Sequence[Step | tuple[str, ...]], protocol: int = 2) -> list[Tree]:
        norm = [s if isinstance(s, Step) else Step(tuple(s)) for s in steps]
        for st in norm:
            if st.diff is not None:
                assert st.diff in DIFFERENCES, f"{st.diff!r} is not in the table of {DOC.name}"
        want = run_script(self.ref, norm, protocol)
        for st, w in zip(norm, want, strict=True):
            if st.expect is not None:
                assert show(w) == st.expect, f"reference: {' '.join(st.args)} -> {show(w)}"
        if self.ours is None:
            return want
        got = run_script(self.ours, norm, protocol)
        problems = []
        for st, w, g in zip(norm, want, got, strict=True):
            line = " ".join(st.args)
            if st.diff is not None:
                if w == g:
                    problems.append(f"{line}: documented difference {st.diff!r} no longer differs")
            elif w != g:
                problems.append(f"{line}\n    redis:    {show(w)}\n    topicsrv: {show(g)}")
        assert not problems, f"RESP{protocol} replies differ:\n" + "\n".join(problems)
        return got




def per_io_path(prefix: str) -> tuple[Any, Any]:
    """A module's `server` and `ours` fixtures when it runs once per RESP I/O path: assign
    them to those names (`server, ours = per_io_path("topicsrv-tx-")`) to override the
    conftest's. `ours` takes `server` as an argument because a fixture with params cannot be
    reached through the conftest's getfixturevalue."""
    import pytest

    from conftest import serve_io_path  # the repository's root conftest

    @pytest.fixture(scope="module", params=["reactor", "tasks"])
    def server(request: Any) -> Any:
        yield from serve_io_path(request.param, prefix)

    @pytest.fixture(scope="module")
    def ours(server: Any) -> Target | None:
        return None if REFERENCE_ONLY else Target("topicsrv", server.resp_port)

    return server, ours
