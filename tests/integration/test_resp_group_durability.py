"""Consumer groups a client was told exist survive a crash (SIGKILL), not only a clean stop."""

from __future__ import annotations

from pathlib import Path

import redis


def test_group_definitions_survive_sigkill(server_factory, tmp_path: Path) -> None:
    data = tmp_path / "groups-data"
    srv = server_factory(data_dir=data)
    r = redis.Redis(port=srv.resp_port)
    for i in range(5):
        r.xadd("jobs", {"n": str(i)})
    assert r.xgroup_create("jobs", "workers", id="0") is True
    assert r.xgroup_create("jobs", "audit", id="$") is True
    assert r.xgroup_createconsumer("jobs", "workers", "w1") == 1
    assert r.xgroup_destroy("jobs", "audit") == 1
    srv.kill()  # no checkpoint, no clean shutdown

    srv2 = server_factory(data_dir=data)
    r2 = redis.Redis(port=srv2.resp_port)
    names = [g["name"] for g in r2.xinfo_groups("jobs")]
    assert names == [b"workers"]
    assert [c["name"] for c in r2.xinfo_consumers("jobs", "workers")] == [b"w1"]
    got = r2.xreadgroup("workers", "w1", {"jobs": ">"}, count=10)
    assert len(got[0][1]) == 5  # the group still starts at 0: every record is delivered
