"""The argument cursor (topicsrv/resp/args.py) and the stream parsers built on it
(commands/stream_args.py). Redis's own texts for each error are checked against a real
redis-server in compat/test_options.py; here: the cursor's rules, and that no argument list
makes a parser fail with anything but an error reply."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from topicsrv.resp.args import Args
from topicsrv.resp.commands.base import NOT_INT, SYNTAX, Err
from topicsrv.resp.commands.stream_args import (
    parse_read_args,
    parse_xadd,
    parse_xtrim,
    plain_pairs,
)


def test_option_needs_its_values_to_follow_and_ignores_case() -> None:
    a = Args([b"CoUnT", b"5", b"group", b"g"])
    assert a.option(b"count") == b"count" and a.next_int() == 5
    assert a.option(b"group", nargs=2) is None  # GROUP needs two values: left where it is
    assert a.peek() == b"group" and a.remaining == 2
    assert a.option(b"block", b"group") == b"group" and a.next() == b"g" and not a


def test_flag_and_rest() -> None:
    a = Args([b"k", b"NOACK", b"x", b"y"], 1)
    assert a.flag(b"mkstream") is None and a.flag(b"noack") == b"noack"
    assert a.rest() == [b"x", b"y"] and not a and a.peek() == b""


def test_values_raise_redis_texts_and_never_read_past_the_end() -> None:
    a = Args([b"x"])
    with pytest.raises(Err) as e:
        a.next_int()
    assert e.value.text == NOT_INT
    with pytest.raises(Err) as e:
        Args([b"-"]).next_int("ERR timeout is not an integer or out of range")
    assert e.value.text == "ERR timeout is not an integer or out of range"
    with pytest.raises(Err) as e:
        Args([]).next()
    assert e.value.text == SYNTAX
    with pytest.raises(Err, match="Invalid stream ID"):
        Args([b"1-x"]).next_id()


def test_xadd_is_parsed_once_for_both_paths() -> None:
    plain = parse_xadd([b"k", b"*", b"f", b"v"])
    assert plain.pairs == [b"f", b"v"] and plain.trim is None and not plain.nomkstream
    # the batch coalesces exactly the parser's fast path (plain_pairs), from the command line
    assert plain_pairs([b"XADD", b"k", b"*", b"f", b"v"], 1) == [b"f", b"v"]
    assert plain_pairs([b"XADD", b"k", b"*", b"f", b"v", b"x"], 1) is None  # parser's error
    assert plain_pairs([b"XADD", b"k", b"NOMKSTREAM", b"*", b"f", b"v"], 1) is None
    x = parse_xadd([b"k", b"NODE", b"n1", b"TAG", b"t", b"MAXLEN", b"~", b"5", b"LIMIT", b"2",
                    b"*", b"f", b"v"])
    assert (x.node, x.tag, x.pairs) == ("n1", "t", [b"f", b"v"])
    assert x.trim is not None and (x.trim.strategy, x.trim.threshold, x.trim.approx,
                                   x.trim.limit) == ("maxlen", 5, True, 2)
    assert parse_xadd([b"k", b"NOMKSTREAM", b"*", b"f", b"v"]).nomkstream
    with pytest.raises(Err, match="wrong number of arguments for 'xadd'"):
        parse_xadd([b"k", b"*", b"f", b"v", b"x"])
    assert parse_xadd([b"k", b"1-1", b"f", b"v"]).xid == (1, 1)
    assert parse_xadd([b"k", b"MAXLEN", b"1", b"7", b"f", b"v"]).xid == (7, 0)
    assert parse_xadd([b"k", b"7-*", b"f", b"v"]).xid == (7, None)
    assert parse_xadd([b"k", b"*", b"f", b"v"]).xid is None
    with pytest.raises(Err, match="must be greater than 0-0"):
        parse_xadd([b"k", b"0-0", b"f", b"v"])
    with pytest.raises(Err, match="Invalid stream ID"):
        parse_xadd([b"k", b"-", b"f", b"v"])


def test_xreadgroup_takes_node_like_xread() -> None:
    ra = parse_read_args([b"GROUP", b"g", b"c", b"NODE", b"a", b"node", b"b", b"NOACK",
                          b"STREAMS", b"k", b">"], group=True)
    assert (ra.group, ra.consumer, ra.nodes, ra.noack, ra.keys, ra.ids) == (
        "g", "c", ["a", "b"], True, [b"k"], [b">"])
    assert parse_read_args([b"NODE", b"a", b"STREAMS", b"k", b"0"]).nodes == ["a"]
    with pytest.raises(Err, match="only supported by XREADGROUP"):
        parse_read_args([b"NOACK", b"STREAMS", b"k", b"0"])


TOKENS = st.sampled_from([b"*", b"MAXLEN", b"minid", b"~", b"=", b"LIMIT", b"NOMKSTREAM",
                          b"NODE", b"TAG", b"COUNT", b"BLOCK", b"STREAMS", b"GROUP", b"NOACK",
                          b"0", b"5", b"-1", b"1-1", b"x", b"", b"\xff", b"99999999999999999999"])


@given(st.lists(TOKENS, max_size=12))
def test_no_argument_list_fails_with_anything_but_an_error_reply(argv: list[bytes]) -> None:
    for parse in (lambda v: parse_xadd([b"k", *v]), lambda v: parse_xtrim([b"k", *v]),
                  parse_read_args, lambda v: parse_read_args(v, group=True)):
        try:
            parse(argv)
        except Err:
            pass
