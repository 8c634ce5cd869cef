"""Both RESP I/O paths (`--resp-io reactor|tasks`) on a real process with storage: pipelined
XADDs to an fsync topic (replies wait for their commit token, coalesced runs included) and
to a disk topic survive a restart; a blocked XREAD is woken while other clients pipeline."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
import redis


@pytest.mark.parametrize("io", ["reactor", "tasks"])
def test_pipelined_writes_are_acknowledged_and_durable(server_factory: Any, tmp_path: Any, io: str) -> None:
    data = tmp_path / f"d-{io}"
    srv = server_factory("--resp-io", io, data_dir=data)
    r = redis.Redis(port=srv.resp_port, socket_timeout=10)
    assert r.execute_command("TOPIC.CREATE", "fs", "durable", "true")
    ids: list[bytes] = []
    for topic in ("fs", "dk"):
        pipe = r.pipeline(transaction=False)
        for i in range(300):
            pipe.xadd(topic, {"i": str(i)})
        ids += pipe.execute()
    assert len(set(ids)) == 600 and all(isinstance(x, bytes) for x in ids)
    got: list[Any] = []
    t = threading.Thread(target=lambda: got.append(
        redis.Redis(port=srv.resp_port, socket_timeout=10).xread({"wake": "$"}, block=5000)))
    t.start()
    deadline = time.monotonic() + 10
    while r.info("clients")["blocked_clients"] == 0 and time.monotonic() < deadline:
        time.sleep(0.02)
    pipe = r.pipeline(transaction=False)
    for i in range(50):
        pipe.xadd("wake", {"i": str(i)})
    pipe.execute()
    t.join(10)
    assert got and got[0] and got[0][0][0] == b"wake"
    r.close()
    srv.stop()
    again = server_factory("--resp-io", io, data_dir=data)
    r2 = redis.Redis(port=again.resp_port, socket_timeout=10)
    assert r2.xlen("fs") == 300 and r2.xlen("dk") == 300
    assert [e[1][b"i"] for e in r2.xrange("fs")] == [str(i).encode() for i in range(300)]
    r2.close()
