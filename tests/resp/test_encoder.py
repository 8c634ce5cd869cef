"""The reply encoder: RESP2 and RESP3 shapes as redis-server sends them."""

from __future__ import annotations

from topicsrv.resp.commands.base import NULL_ARRAY, Err, Push, Raw, Simple, Verbatim
from topicsrv.resp.encoder import to_bytes


def test_resp2_shapes() -> None:
    assert to_bytes(Simple("OK")) == b"+OK\r\n"
    assert to_bytes(None) == b"$-1\r\n"
    assert to_bytes(NULL_ARRAY) == b"*-1\r\n"
    assert to_bytes(5) == b":5\r\n"
    assert to_bytes(True) == b":1\r\n"
    assert to_bytes(b"a\x00") == b"$2\r\na\x00\r\n"
    assert to_bytes("é") == b"$2\r\n\xc3\xa9\r\n"
    assert to_bytes({"a": [1, None]}) == b"*2\r\n$1\r\na\r\n*2\r\n:1\r\n$-1\r\n"
    assert to_bytes(1.5) == b"$3\r\n1.5\r\n"
    assert to_bytes(Verbatim("x")) == b"$1\r\nx\r\n"
    assert to_bytes(Err("ERR bad\r\nthing")) == b"-ERR bad  thing\r\n"
    assert to_bytes([Raw(b":1\r\n")]) == b"*1\r\n:1\r\n"


def test_resp3_shapes() -> None:
    assert to_bytes(None, True) == b"_\r\n"
    assert to_bytes(NULL_ARRAY, True) == b"_\r\n"
    assert to_bytes(False, True) == b"#f\r\n"
    assert to_bytes({"a": 1}, True) == b"%1\r\n$1\r\na\r\n:1\r\n"
    assert to_bytes({Simple("x")}, True) == b"~1\r\n+x\r\n"
    assert to_bytes(float("inf"), True) == b",inf\r\n"
    assert to_bytes(Verbatim("hi"), True) == b"=6\r\ntxt:hi\r\n"
    assert to_bytes(Push([b"m"]), True) == b">1\r\n$1\r\nm\r\n"


def test_undecodable_bytes_in_text_round_trip() -> None:
    text = b"\xff\xfe".decode("utf-8", "surrogateescape")
    assert to_bytes(Err("ERR " + text)) == b"-ERR \xff\xfe\r\n"
