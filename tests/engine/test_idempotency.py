"""The idempotency table (engine/log/idempotency.py): HTTP keys and XADD IDMP pairs on one
machinery, its windows on the engine clock, its bounds and XCFGSET."""

from __future__ import annotations

from topicsrv.clock import FakeClock
from topicsrv.engine import Engine
from topicsrv.engine.log import idempotency as idem
from topicsrv.engine.log.records import prepare_fields, prepare_json


def _xadd(eng: Engine, pid: bytes, iid: bytes, value: bytes = b"v") -> dict:
    result, _ = eng.write("s", [prepare_fields([b"f", value])], idmp=(pid, iid))
    return result


def test_a_repeat_inside_the_window_returns_the_original_and_appends_nothing(eng: Engine, clock: FakeClock) -> None:
    first = _xadd(eng, b"p1", b"req-1")
    again = _xadd(eng, b"p1", b"req-1", b"other")
    assert again["duplicate"] and again["seqs"] == first["seqs"] and again["ts"] == first["ts"]
    assert eng.get("s").count == 1
    assert not _xadd(eng, b"p2", b"req-1")["duplicate"]  # producers are separate namespaces
    clock.advance(idem.DURATION_DEFAULT * 1000 - 1)
    assert _xadd(eng, b"p1", b"req-1")["duplicate"]
    clock.advance(1)  # the default window (100 s) is over: the iid may be used again
    assert not _xadd(eng, b"p1", b"req-1")["duplicate"]
    table = eng.get("s").idempotency
    assert (table.added, table.duplicates) == (3, 2)


def test_http_keys_and_resp_pairs_do_not_collide_and_keep_their_own_windows(eng: Engine, clock: FakeClock) -> None:
    eng.put_topic("s", {"idempotency_window_ms": 1000})
    http, _ = eng.write("s", [prepare_json({"data": 1})], idempotency_key="k")
    resp = _xadd(eng, b"k", b"k")
    assert not resp["duplicate"] and resp["seqs"] != http["seqs"]
    assert eng.get("s").idempotency.stats(eng.now()) == (1, 1)  # HTTP keys are not "pids"
    clock.advance(1000)
    assert not eng.write("s", [prepare_json({"data": 1})], idempotency_key="k")[0]["duplicate"]
    assert _xadd(eng, b"k", b"k")["duplicate"]
    # XCFGSET clears the RESP maps, never the HTTP keys
    eng.idmp_configure(eng.get("s"), 5, None)
    assert eng.write("s", [prepare_json({"data": 1})], idempotency_key="k")[0]["duplicate"]
    assert not _xadd(eng, b"k", b"k")["duplicate"]


def test_maxsize_per_producer_and_the_table_cap(eng: Engine) -> None:
    _xadd(eng, b"p", b"0")
    eng.idmp_configure(eng.get("s"), None, 3)
    ids = [_xadd(eng, b"p", b"%d" % i)["first_seq"] for i in range(1, 5)]
    assert not _xadd(eng, b"p", b"1")["duplicate"]  # the oldest of p's 3 went
    assert _xadd(eng, b"p", b"4")["first_seq"] == ids[3]
    table = eng.get("s").idempotency
    assert table.stats(eng.now()) == (1, 3)
    big = idem.Table()
    big.maxsize = idem.MAXSIZE_MAX
    hit = idem.Hit(10**18, 1, 1, 0, 1, False)
    for p in range(idem.KEYS_MAX // idem.MAXSIZE_MAX + 1):
        for i in range(idem.MAXSIZE_MAX):
            big.add(b"p%d" % p, b"%d" % i, hit, 0)
    assert big.size == idem.KEYS_MAX and big.get(b"p0", b"0", 0) is None
    assert big.get(b"p%d" % (idem.KEYS_MAX // idem.MAXSIZE_MAX), b"0", 0) is not None


def test_idmpauto_ids_ignore_pair_order_but_not_pair_boundaries() -> None:
    a = idem.auto_iid([b"f1", b"a", b"f2", b"b"])
    assert a == idem.auto_iid([b"f2", b"b", b"f1", b"a"])
    assert a != idem.auto_iid([b"f1", b"b", b"f2", b"a"])
    assert idem.auto_iid([b"ab", b"c"]) != idem.auto_iid([b"a", b"bc"])


def test_snapshot_round_trip() -> None:
    t = idem.Table()
    t.configure(7, 9)
    t.add(b"\x00\xffp", b"\x80i", idem.Hit(50, 3, 2, 40, 1, True, ((5, 1), (5, 2))), 0)
    t.duplicates = 4
    u = idem.Table()
    u.restore(t.snapshot())
    assert u.snapshot() == t.snapshot()
    assert u.get(b"\x00\xffp", b"\x80i", 49) == t.get(b"\x00\xffp", b"\x80i", 49)
    assert u.get(b"\x00\xffp", b"\x80i", 50) is None
