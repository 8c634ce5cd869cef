"""Reads that cross sealed (packed) segments give, over both fronts, exactly the entries that
were written (segments Rule 5, engine/log/blobs.py): XRANGE, XREVRANGE, XREAD, XREADGROUP after
XDELs in a sealed segment, the HTTP diff."""

from __future__ import annotations

import json
import urllib.request

import redis

from tests.resp.conftest import InProc
from topicsrv.clock import FakeClock
from topicsrv.engine.log.segments import SEGMENT_RECORDS

N = SEGMENT_RECORDS + 300  # the first segment sealed, the second its tail


def _load(c: redis.Redis) -> list[bytes]:
    pipe = c.pipeline(transaction=False)
    for i in range(N):
        pipe.xadd("s", {"i": str(i), "pad": "y" * (i % 7)})
    return list(pipe.execute())


def test_reads_across_a_sealed_segment(srv: tuple[InProc, FakeClock]) -> None:
    s, _ = srv
    c = redis.Redis(port=s.port, socket_timeout=10)
    ids = _load(c)
    got = c.xrange("s", "-", "+", count=N)
    assert [e[0] for e in got] == ids and [e[1][b"i"] for e in got] == [b"%d" % i for i in range(N)]
    rev = c.xrevrange("s", "+", "-", count=N)
    assert [e[0] for e in rev] == ids[::-1]
    mid = SEGMENT_RECORDS - 50
    page = c.xread({"s": ids[mid]}, count=100)[0][1]
    assert [e[0] for e in page] == ids[mid + 1:mid + 101]
    assert c.xdel("s", *ids[mid + 1:mid + 11]) == 10  # inside the sealed segment
    page = c.xread({"s": ids[mid]}, count=100)[0][1]
    assert [e[0] for e in page] == ids[mid + 11:mid + 111]
    c.xgroup_create("s", "g", id=ids[mid])
    grp = c.xreadgroup("g", "c1", {"s": ">"}, count=100)[0][1]
    assert [e[0] for e in grp] == ids[mid + 11:mid + 111]
    c.close()
    url = f"http://127.0.0.1:{s.http_port}/v0/topics/s/diff"
    body = json.dumps({"from_seq": mid, "limit": 200}).encode()
    req = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        diff = json.loads(resp.read())
    seqs = [r["$seq"] for r in diff["records"]]
    assert [r["data"]["i"] for r in diff["records"]] == [str(q - 1) for q in seqs]
    assert seqs == [mid + 1] + list(range(mid + 12, mid + 12 + len(seqs) - 1))  # entry i is seq i + 1
    assert seqs[-1] > SEGMENT_RECORDS  # into the tail segment
