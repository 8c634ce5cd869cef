"""No single reply exceeds client-output-limit (issue 10 item 8; topicsrv/resp/replysize.py),
on both I/O paths: a range past it is refused with an error that says what to do and the
connection stays open; reads deliver what fits and continue where they stopped."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import redis

from tests.resp.conftest import RESP_IO, InProc, start_inproc

LIMIT = 256 << 10
N = 100  # records of ~4 KB: ~400 KB in all, over the limit


@pytest.fixture(params=RESP_IO)
def r(request: pytest.FixtureRequest) -> Iterator[tuple[InProc, redis.Redis]]:
    srv, stop = start_inproc(resp_io=request.param, client_output_limit=LIMIT)
    client = redis.Redis(port=srv.port, socket_timeout=10)
    pipe = client.pipeline(transaction=False)
    for i in range(N):
        pipe.xadd("big", {"i": str(i), "pad": "x" * 4000})
    pipe.execute()
    yield srv, client
    client.close()
    stop()


def test_a_range_past_the_limit_is_refused_and_the_connection_kept(
        r: tuple[InProc, redis.Redis]) -> None:
    srv, c = r
    for cmd in (("XRANGE", "big", "-", "+"), ("XREVRANGE", "big", "+", "-"),
                ("XRANGE", "big", "-", "+", "COUNT", str(N))):
        with pytest.raises(redis.ResponseError) as e:
            c.execute_command(*cmd)
        assert str(e.value) == (f"reply too large: the entries of this range exceed "
                                f"client-output-limit ({LIMIT} bytes); use COUNT to read the "
                                f"range in pages")
    assert c.ping()  # same connection, still open
    page = c.xrange("big", count=10)
    assert [int(f[b"i"]) for _, f in page] == list(range(10))
    back = c.xrevrange("big", count=10)
    assert [int(f[b"i"]) for _, f in back] == list(range(N - 1, N - 11, -1))
    stats = srv.ctx.metrics.resp.stats
    assert stats.output_limit_refusals == 3 and stats.output_limit_disconnects == 0


def test_any_other_reply_past_the_limit_is_an_error(r: tuple[InProc, redis.Redis]) -> None:
    _, c = r
    with pytest.raises(redis.ResponseError, match=r"^reply too large: \d+ bytes exceed "
                       rf"client-output-limit \({LIMIT} bytes\)$"):
        c.execute_command("XINFO", "STREAM", "big", "FULL", "COUNT", "0")
    assert c.xlen("big") == N


def test_xread_delivers_what_fits_and_continues(r: tuple[InProc, redis.Redis]) -> None:
    _, c = r
    seen: list[int] = []
    last = "0"
    reads = 0
    while len(seen) < N:
        reply = c.xread({"big": last})
        entries = reply[0][1]
        assert 0 < len(entries) * 4000 <= LIMIT
        seen += [int(f[b"i"]) for _, f in entries]
        last = entries[-1][0]
        reads += 1
    assert seen == list(range(N)) and reads >= 2
    assert c.xread({"big": last}) == []


def test_xreadgroup_delivers_only_what_fits(r: tuple[InProc, redis.Redis]) -> None:
    _, c = r
    c.xgroup_create("big", "g", id="0")
    got: list[int] = []
    while True:
        reply = c.xreadgroup("g", "c1", {"big": ">"})
        if not reply:
            break
        entries = reply[0][1]
        assert len(entries) * 4000 <= LIMIT
        got += [int(f[b"i"]) for _, f in entries]
        # the PEL holds exactly what this consumer has received, nothing more
        assert c.xpending("big", "g")["pending"] == len(got)
    assert got == list(range(N))


def _as_dict(reply: Any) -> dict[bytes, Any]:
    return reply if isinstance(reply, dict) else dict(zip(reply[::2], reply[1::2], strict=True))


def test_topic_diff_is_capped_and_continues(r: tuple[InProc, redis.Redis]) -> None:
    _, c = r
    d = _as_dict(c.execute_command("TOPIC.DIFF", "big", "0", "LIMIT", "10000"))
    n = len(d[b"seqs"])
    assert 0 < n < N and d[b"next_from_seq"] == d[b"seqs"][-1] and d[b"caught_up"] == 0
    d2 = _as_dict(c.execute_command("TOPIC.DIFF", "big", str(d[b"next_from_seq"]), "LIMIT",
                                    "10000"))
    assert d2[b"seqs"][0] == d[b"seqs"][-1] + 1
