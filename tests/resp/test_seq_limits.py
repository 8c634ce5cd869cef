"""Issue 23 item 6: every seq a client can be sent fits a RESP integer (signed 64 bits).

A queue with `seq_base: 2^63-1` used to answer TOPIC.CLAIM with `:9223372036854775808`, which
hiredis (redis-py's parser, redis-cli) refuses as "Bad integer value", leaving the claimed jobs
leased to a worker that never saw them. The last seq is now 2^63-2 (SEQ_MAX), so `next_seq`
fits too; a larger `seq_base` is refused (400 / -ERR) and a write past the last seq is
`seq_exhausted`, on both fronts. redis-py parses with hiredis here, so a reply it reads is a
reply a stock client reads.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import hiredis
import pytest
import redis

from topicsrv.clock import FakeClock
from topicsrv.engine.config import SEQ_MAX

from .conftest import InProc, frame, read_until

I64_MAX = (1 << 63) - 1
Srv = tuple[InProc, FakeClock]


def http(s: InProc, method: str, path: str, body: Any) -> tuple[int, Any]:
    req = urllib.request.Request(f"http://127.0.0.1:{s.http_port}{path}", method=method,
                                 data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def test_the_largest_seq_is_a_signed_64_bit_integer() -> None:
    assert SEQ_MAX + 1 == I64_MAX  # next_seq after the last seq still fits


def test_a_seq_base_whose_seqs_would_not_fit_is_refused_on_both_fronts(srv: Srv) -> None:
    s, _ = srv
    r = redis.Redis(port=s.port, socket_timeout=10)
    status, body = http(s, "PUT", "/v0/topics/over", {"type": "queue", "seq_base": I64_MAX})
    assert (status, body["error"]["code"], body["error"]["detail"]["field"]) == (
        400, "invalid_request", "seq_base")
    with pytest.raises(redis.ResponseError, match="seq_base"):
        r.execute_command("TOPIC.CREATE", "over", "TYPE", "queue", "SEQ_BASE", str(I64_MAX))
    assert r.exists("over") == 0
    status, _ = http(s, "POST", "/v0/topics/over2", {"records": [{"data": 1}],
                                                      "config": {"seq_base": I64_MAX}})
    assert status == 400 and r.exists("over2") == 0


@pytest.mark.parametrize("protocol", [2, 3])
def test_replies_at_the_last_seq_parse_with_hiredis(srv: Srv, protocol: int) -> None:
    s, _ = srv
    r = redis.Redis(port=s.port, protocol=protocol, socket_timeout=10)
    key = f"edge{protocol}"
    r.execute_command("TOPIC.CREATE", key, "TYPE", "queue", "SEQ_BASE", str(SEQ_MAX - 1))
    r.xadd(key, {"n": "0"})
    r.xadd(key, {"n": "1"})
    with pytest.raises(redis.ResponseError, match="exhausted the last possible ID"):
        r.xadd(key, {"n": "2"})
    status, body = http(s, "POST", f"/v0/topics/{key}", {"records": [{"data": 2}]})
    assert (status, body["error"]["code"]) == (409, "seq_exhausted")
    jobs = r.execute_command("TOPIC.CLAIM", key, "w", "MAX", "10")
    assert [j[2] for j in jobs] == [SEQ_MAX - 1, SEQ_MAX]
    for cmd in (("TOPIC.DIFF", key, "0"), ("TOPIC.INFO", key), ("XINFO", "STREAM", key),
                ("TOPIC.ACK", key, "w", str(SEQ_MAX - 1)), ("XLEN", key)):
        r.execute_command(*cmd)  # hiredis raises "Bad integer value" past 2^63-1
    raw = s.connect()  # and byte for byte: no integer reply past the signed range
    raw.sendall(frame(b"TOPIC.INFO", key.encode()))
    reader = hiredis.Reader()
    reader.feed(read_until(raw, b"\r\n"))
    while (got := reader.gets()) is False:
        reader.feed(raw.recv(65536))
    assert got
