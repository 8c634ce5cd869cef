"""Redis's `sdssplitargs`: a line split into arguments with Redis's quoting rules (inline
commands on the RESP port, a Lua library's `#!lua name=...` header).

A module of its own at the bottom layer: the RESP parser and the scripting engine both use
it, and scripting sits below the fronts (tests/test_layering.py).
"""

from __future__ import annotations

_ESCAPES = {ord("n"): b"\n", ord("r"): b"\r", ord("t"): b"\t", ord("b"): b"\b", ord("a"): b"\a"}
_HEX = frozenset(b"0123456789abcdefABCDEF")
_SPACE = frozenset(b" \n\r\t\v\f")
_TOKSEP = frozenset(b" \n\r\t")


def split_args(line: bytes) -> list[bytes] | None:
    """Redis's sdssplitargs: whitespace-separated, "double" (with escapes) and 'single' quotes.

    Returns None on unbalanced quotes (or a closing quote not followed by a space).
    """
    out: list[bytes] = []
    i, n = 0, len(line)
    while True:
        while i < n and line[i] in _SPACE:
            i += 1
        if i >= n:
            return out
        cur = bytearray()
        inq = insq = False
        while True:
            if inq:
                if i >= n:
                    return None
                c = line[i]
                if c == 0x5C and i + 3 < n and line[i + 1] == 0x78 and line[i + 2] in _HEX \
                        and line[i + 3] in _HEX:  # \xHH
                    cur.append(int(line[i + 2 : i + 4], 16))
                    i += 3
                elif c == 0x5C and i + 1 < n:
                    i += 1
                    cur += _ESCAPES.get(line[i], bytes([line[i]]))
                elif c == 0x22:
                    if i + 1 < n and line[i + 1] not in _SPACE:
                        return None
                    inq = False
                    i += 1
                    break
                else:
                    cur.append(c)
            elif insq:
                if i >= n:
                    return None
                c = line[i]
                if c == 0x5C and i + 1 < n and line[i + 1] == 0x27:
                    i += 1
                    cur.append(0x27)
                elif c == 0x27:
                    if i + 1 < n and line[i + 1] not in _SPACE:
                        return None
                    insq = False
                    i += 1
                    break
                else:
                    cur.append(c)
            else:
                if i >= n:
                    break
                c = line[i]
                if c in _TOKSEP:
                    break
                if c == 0x22:
                    inq = True
                elif c == 0x27:
                    insq = True
                else:
                    cur.append(c)
            i += 1
        out.append(bytes(cur))
