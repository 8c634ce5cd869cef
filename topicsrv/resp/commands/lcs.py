"""LCS's algorithm and reply, exactly as redis-server 7's lcsCommand (t_string.c).

Rule 1: the dynamic-programming table is O(len(a) * len(b)), as in Redis; the backtrack walks
from the ends of both strings and, on a tie, moves in `b` (Redis's `lcs1 > lcs2`), so the LCS
string and the IDX ranges (emitted from the end of the strings) are redis-server's.
Rule 2: the reply is the LCS string, its length (LEN) or a map `matches`/`len` (IDX; a flat
array under RESP2), each match `[[a_start, a_end], [b_start, b_end]]` plus its length with
WITHMATCHLEN, only matches of at least MINMATCHLEN bytes.
"""

from __future__ import annotations

from array import array
from typing import Any


def lcs_reply(a: bytes, b: bytes, want_len: bool, want_idx: bool, min_len: int,
              with_len: bool) -> Any:
    alen, blen = len(a), len(b)
    width = blen + 1
    table = array("I", bytes(4 * (alen + 1) * width))
    for i in range(1, alen + 1):
        ai = a[i - 1]
        row, prev = i * width, (i - 1) * width
        for j in range(1, blen + 1):
            if ai == b[j - 1]:
                table[row + j] = table[prev + j - 1] + 1
            else:
                up, left = table[prev + j], table[row + j - 1]
                table[row + j] = up if up > left else left
    idx = table[alen * width + blen]
    result = bytearray(idx)
    matches: list[Any] = []
    a_start = a_end = b_start = b_end = alen
    i, j = alen, blen
    while i > 0 and j > 0:
        emit = False
        if a[i - 1] == b[j - 1]:
            result[idx - 1] = a[i - 1]
            if a_start == alen:
                a_start = a_end = i - 1
                b_start = b_end = j - 1
            elif a_start == i and b_start == j:
                a_start -= 1
                b_start -= 1
            else:
                emit = True
            if a_start == 0 or b_start == 0:
                emit = True
            idx -= 1
            i -= 1
            j -= 1
        else:
            if table[(i - 1) * width + j] > table[i * width + j - 1]:
                i -= 1
            else:
                j -= 1
            if a_start != alen:
                emit = True
        if emit:
            match_len = a_end - a_start + 1
            if want_idx and (min_len == 0 or match_len >= min_len):
                item: list[Any] = [[a_start, a_end], [b_start, b_end]]
                if with_len:
                    item.append(match_len)
                matches.append(item)
            a_start = alen
    if want_idx:
        return {b"matches": matches, b"len": table[alen * width + blen]}
    if want_len:
        return table[alen * width + blen]
    return bytes(result)
