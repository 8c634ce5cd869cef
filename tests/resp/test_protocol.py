"""The request parser: Redis's framing, limits and error texts; hiredis and strict paths agree."""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from topicsrv.resp.protocol import RequestParser, split_args


def frame(*args: bytes) -> bytes:
    return b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%b\r\n" % (len(a), a) for a in args)


def test_multibulk_pipeline_and_inline_mix() -> None:
    p = RequestParser()
    data = frame(b"PING") + b"PING\r\n" + frame(b"ECHO", b"a\r\nb") + b"  echo  \"x y\"\n"
    cmds, err = p.feed(data)
    assert err is None
    assert cmds == [[b"PING"], [b"PING"], [b"ECHO", b"a\r\nb"], [b"echo", b"x y"]]


def test_byte_at_a_time_gives_the_same_commands() -> None:
    data = frame(b"XADD", b"s", b"*", b"f", b"\x00\xff" * 10) + b"PING\r\n" + frame(b"X" * 300)
    p = RequestParser()
    got = []
    for i in range(len(data)):
        cmds, err = p.feed(data[i : i + 1])
        assert err is None
        got += cmds
    assert got == [[b"XADD", b"s", b"*", b"f", b"\x00\xff" * 10], [b"PING"], [b"X" * 300]]
    assert p.pending() == 0


def test_empty_and_negative_multibulk_are_skipped() -> None:
    cmds, err = RequestParser().feed(b"*0\r\n*-1\r\n\r\n" + frame(b"PING"))
    assert (cmds, err) == ([[b"PING"]], None)


def test_protocol_errors_have_redis_texts() -> None:
    cases = {
        b"*1\r\n:5\r\n": "Protocol error: expected '$', got ':'",
        b"*x\r\n": "Protocol error: invalid multibulk length",
        b"*2000000\r\n": "Protocol error: invalid multibulk length",
        b"*99999999999999\r\n": "Protocol error: invalid multibulk length",
        b"*1\r\n$-1\r\n": "Protocol error: invalid bulk length",
        b"*1\r\n$abc\r\n": "Protocol error: invalid bulk length",
        b'SET "a\r\n': "Protocol error: unbalanced quotes in request",
        b"*1\r\n$3\r\nabc\r\n*1\r\n%5\r\n": "Protocol error: expected '$', got '%'",
    }
    for data, text in cases.items():
        _, err = RequestParser().feed(data)
        assert err == text, data


def test_commands_before_an_error_are_returned() -> None:
    cmds, err = RequestParser().feed(frame(b"PING") + b"*1\r\n:1\r\n")
    assert cmds == [[b"PING"]]
    assert err is not None


def test_limits() -> None:
    _, err = RequestParser(max_bulk_len=10).feed(frame(b"x" * 11))
    assert err == "Protocol error: invalid bulk length"
    _, err = RequestParser(max_bulk_len=10).feed(b"*1\r\n$11\r\n")  # refused at the header
    assert err == "Protocol error: invalid bulk length"
    _, err = RequestParser().feed(b"A" * (64 * 1024 + 1))
    assert err == "Protocol error: too big inline request"
    _, err = RequestParser().feed(b"*1" + b"1" * (64 * 1024 + 1))
    assert err == "Protocol error: too big mbulk count string"
    _, err = RequestParser(authenticated=False).feed(b"*11\r\n")
    assert err == "Protocol error: unauthenticated multibulk length"
    _, err = RequestParser(authenticated=False).feed(b"*1\r\n$16385\r\n")
    assert err == "Protocol error: unauthenticated bulk length"


def test_a_large_bulk_in_chunks_is_buffered_until_complete() -> None:
    p = RequestParser()
    data = frame(b"ECHO", b"v" * 1_000_000)
    got = []
    for i in range(0, len(data), 4096):
        cmds, err = p.feed(data[i : i + 4096])
        assert err is None
        got += cmds
    assert got == [[b"ECHO", b"v" * 1_000_000]]


def test_split_args_is_sdssplitargs() -> None:
    assert split_args(b'set k "a\\x41\\n" \'it\\\'s\'') == [b"set", b"k", b"aA\n", b"it's"]
    assert split_args(b'"a"b') is None  # closing quote must be followed by a space
    assert split_args(b"   ") == []
    assert split_args(b"'open") is None


_pieces = st.one_of(
    st.binary(max_size=12),
    st.sampled_from([b"*", b"$", b"\r\n", b"*1\r\n", b"*2\r\n", b"$3\r\n", b"$0\r\n", b"PING",
                     b"\"", b"'", b"\\x4", b":1\r\n", b"*-1\r\n", b"$-1\r\n", b"*1000000\r\n",
                     b"+", b"+\r\n", b"+OK\r\n", b"=5\r\ntxt:a\r\n", b"_\r\n", b"#t\r\n"]),
    st.lists(st.binary(max_size=6), min_size=1, max_size=4).map(lambda a: frame(*a)),
)


@settings(max_examples=1500, deadline=None)
@given(st.lists(_pieces, max_size=12), st.integers(1, 16))
@example([b"*1\r\n", b"+", b"\r\n"], 7)  # once parsed as [b""] by the fast path (CI run)
def test_fast_and_strict_paths_agree_on_any_input(pieces: list[bytes], chunk: int) -> None:
    data = b"".join(pieces)
    results = []
    for use_hiredis in (True, False):
        p = RequestParser(use_hiredis=use_hiredis)
        cmds_all: list[list[bytes]] = []
        err = None
        for i in range(0, len(data), chunk):
            cmds, err = p.feed(data[i : i + chunk])
            cmds_all += cmds
            if err is not None:
                break
        results.append((cmds_all, err))
    assert results[0] == results[1]


@pytest.mark.parametrize("use_hiredis", [True, False])
def test_a_simple_string_inside_a_request_is_a_protocol_error_not_a_shifted_parse(
    use_hiredis: bool,
) -> None:
    """hiredis decodes `+OK` inside an array as bytes, like a bulk; the fast path must not take
    it for one (its size would be wrong and the next command would be read from the middle)."""
    p = RequestParser(use_hiredis=use_hiredis)
    cmds, err = p.feed(b"*1\r\n$4\r\nPING\r\n*2\r\n+SET\r\n$1\r\nk\r\n*1\r\n$4\r\nPING\r\n")
    assert cmds == [[b"PING"]]
    assert err == "Protocol error: expected '$', got '+'"


def test_a_tls_record_or_a_nul_in_an_inline_line_is_an_attack_not_commands() -> None:
    """Issue 23 item 4 (Rule 4): nothing is parsed out of a ClientHello, even fed byte by byte,
    nor out of an inline line holding a NUL, even before its newline arrives."""
    from topicsrv.resp.protocol import ATTACK_NUL, ATTACK_TLS

    hello = b"\x16\x03\x01\x00\x40\x01\x00\x00\x3c\x03\x03" + b"r" * 20 + b"\r\nFLUSHALL\r\n"
    p = RequestParser()
    assert p.feed(hello[:1]) == ([], None)  # one byte does not decide yet
    assert p.feed(hello[1:]) == ([], ATTACK_TLS)
    assert RequestParser().feed(hello) == ([], ATTACK_TLS)
    p = RequestParser()
    assert p.feed(b"PING\r\nGET\x00") == ([[b"PING"]], ATTACK_NUL)  # the line before runs
    assert RequestParser().feed(b"\x00\r\nFLUSHALL\r\n") == ([], ATTACK_NUL)
    # 0x16 not followed by 0x03, a NUL inside a multibulk argument: ordinary input
    assert RequestParser().feed(b"\x16x\r\n") == ([[b"\x16x"]], None)
    assert RequestParser().feed(frame(b"SET", b"k", b"\x00\x16\x03")) == (
        [[b"SET", b"k", b"\x00\x16\x03"]], None)


@settings(max_examples=500, deadline=None)
@given(st.lists(st.one_of(st.sampled_from([b"*", b"~", b">", b"%", b"|", b"$", b"\r\n"]),
                          st.binary(max_size=4), st.from_regex(rb"\A[0-9]{1,9}\Z")), max_size=10))
def test_the_huge_header_check_is_the_regex_it_replaces(pieces: list[bytes]) -> None:
    """The translate-and-find test of an aggregate header with 7+ digits (a frame hiredis would
    allocate hugely for goes to the strict parser) finds exactly what the regex finds."""
    import re

    from topicsrv.resp.protocol import _SUSPECT, _SUSPECT_MAP

    data = b"".join(pieces)
    assert (_SUSPECT in data.translate(_SUSPECT_MAP)) == bool(
        re.search(rb"[*~>%|][0-9]{7}", data))
