"""A compact syntax for command arguments -> Redis's COMMAND DOCS argument maps (and back).

Grammar (one string per command, after the command name):
  name:type            an argument (type: key string integer double pattern unix-time)
  TOKEN                a pure token (e.g. NOMKSTREAM); `=`/`~`/`*`/`$` are allowed tokens
  TOKEN:name:type      a token followed by a value (e.g. COUNT:count:integer)
  [ ... ]              optional (a block when it holds more than one item; `[TOKEN (A|B) ...]`
                       puts TOKEN on the oneof or block, as Redis's docs do)
  ( a b | c )          one of the alternatives; a single alternative of several items = block
  item...              multiple (`...` right after an item or a group)
Rule: `parse(syntax)` returns the list of argument dicts COMMAND DOCS replies with (name,
type, display_text, key_spec_index, token, flags, arguments), which redis-cli uses for its
hints; `render(args)` turns them back into the usual `KEY [NOMKSTREAM] ...` text for docs.
"""

from __future__ import annotations

import re
from typing import Any

_TOKEN_NAMES = {"=": "equal", "~": "approximately", "*": "auto-id", "$": "last-id", "+": "end",
                "-": "start", ">": "new"}
_LEX = re.compile(r"\.\.\.|[\[\]()|]|[^\s\[\]()|.]+(?:\.[^\s\[\]()|.]+)*")


def _atom(word: str, key_index: list[int]) -> dict[str, Any]:
    parts = word.split(":")
    if len(parts) == 1:
        name = _TOKEN_NAMES.get(word, word.lower())
        return {"name": name, "type": "pure-token", "token": word}
    if len(parts) == 2:
        name, typ = parts
        arg: dict[str, Any] = {"name": name, "type": typ, "display_text": name}
    else:
        token, name, typ = parts[0], ":".join(parts[1:-1]), parts[-1]
        arg = {"name": name, "type": typ, "display_text": name, "token": token}
    if not arg["type"] or not arg["name"]:  # e.g. `TOKEN:(A|B)`: write `TOKEN (A|B)`
        raise ValueError(f"argument syntax {word!r} has no name or type")
    if arg["type"] in ("block", "oneof"):  # redis-cli dereferences a block's arguments: a
        # block without them crashes it (write the group itself: `(a:key b:string)...`)
        raise ValueError(f"argument syntax {word!r}: a {arg['type']} is written as a group")
    if arg["type"] == "key":
        arg["key_spec_index"] = key_index[0]
        key_index[0] += 1
    return arg


def _flag(arg: dict[str, Any], flag: str) -> None:
    flags = arg.setdefault("flags", [])
    if flag not in flags:
        flags.append(flag)


def _group(items: list[dict[str, Any]], name: str) -> dict[str, Any]:
    if len(items) == 1:
        return items[0]
    return {"name": name, "type": "block", "arguments": items}


def _token_group(token: str, rest: list[dict[str, Any]]) -> dict[str, Any]:
    """`[TOKEN (A|B)]` -> a oneof carrying the token; `[TOKEN (A|B) x:string]` -> a block
    carrying it (as Redis's own docs do, e.g. BITFIELD's OVERFLOW, ZRANGE's LIMIT)."""
    if len(rest) == 1:
        return {**rest[0], "name": token.lower(), "token": token}
    return {"name": token.lower(), "type": "block", "token": token, "arguments": rest}


def parse(syntax: str) -> list[dict[str, Any]]:
    toks = _LEX.findall(syntax)
    pos = 0
    key_index = [0]

    def seq(stop: set[str]) -> list[dict[str, Any]]:
        nonlocal pos
        out: list[dict[str, Any]] = []
        while pos < len(toks) and toks[pos] not in stop:
            t = toks[pos]
            pos += 1
            if t == "[":
                inner = seq({"]"})
                pos += 1
                if len(inner) > 1 and inner[0]["type"] == "pure-token" and inner[1]["type"] == "oneof":
                    item = _token_group(inner[0]["token"], inner[1:])  # [TOKEN (A|B) ...]
                else:
                    item = _group(inner, inner[0]["name"] if inner else "block")
                _flag(item, "optional")
            elif t == "(":
                alts = [seq({"|", ")"})]
                while toks[pos] == "|":
                    pos += 1
                    alts.append(seq({"|", ")"}))
                pos += 1
                if len(alts) == 1:
                    item = _group(alts[0], "data" if len(alts[0]) > 1 else alts[0][0]["name"])
                else:
                    choices = [_group(a, a[0]["name"]) for a in alts]
                    item = {"name": "-".join(c["name"] for c in choices[:2]).replace("_", "-"),
                            "type": "oneof", "arguments": choices}
            else:
                item = _atom(t, key_index)
            if pos < len(toks) and toks[pos] == "...":
                pos += 1
                _flag(item, "multiple")
            out.append(item)
        return out

    return seq(set())


def _render_one(arg: dict[str, Any]) -> str:
    typ = arg["type"]
    if typ == "pure-token":
        text = arg["token"]
    elif typ == "oneof":
        text = " | ".join(_render_one({**a, "flags": [f for f in a.get("flags", []) if f != "optional"]})
                          for a in arg["arguments"])
        text = text if "optional" in arg.get("flags", []) else f"<{text}>"
    elif typ == "block":
        text = render(arg["arguments"])
    else:
        text = arg.get("display_text", arg["name"])
        if arg.get("token"):
            text = f"{arg['token']} {text}"
    if typ in ("oneof", "block") and arg.get("token"):
        text = f"{arg['token']} {text}"
    flags = arg.get("flags", [])
    if "multiple" in flags:
        text = f"{text} [{text} ...]"
    if "optional" in flags:
        text = f"[{text}]"
    return text


def render(args: list[dict[str, Any]]) -> str:
    return " ".join(_render_one(a) for a in args)
