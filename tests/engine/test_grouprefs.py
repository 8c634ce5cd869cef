"""Redis 8.2's reference policies (XDELEX/XACKDEL, trims) and Redis 8.4's XREADGROUP CLAIM in the
engine: result codes, which PELs change, where an ACKED trim stops, claim order and counters."""

from __future__ import annotations

from topicsrv.clock import FakeClock
from topicsrv.engine import Engine, groups
from topicsrv.engine.groups import grouprefs
from topicsrv.engine.log.records import prepare_fields
from topicsrv.engine.log.topic import Topic


def setup(eng: Engine, n: int = 5, read: int = 5) -> tuple[Topic, groups.Group, groups.Group]:
    """Topic `t` with n records; groups g1 (read `read`) and g2 (read all)."""
    eng.write("t", [prepare_fields([b"i", b"%d" % i]) for i in range(n)])
    topic = eng.get("t")
    g1 = groups.create(topic, "g1", 0, 0, None, eng.now())
    g2 = groups.create(topic, "g2", 0, 0, None, eng.now())
    assert g1 is not None and g2 is not None
    groups.read_new(topic, g1, "a", read, eng.now())
    groups.read_new(topic, g2, "b", n, eng.now())
    return topic, g1, g2


def test_xdelex_keepref_deletes_and_keeps_the_pels(eng: Engine) -> None:
    topic, g1, g2 = setup(eng)
    codes, _ = eng.delete_refs("t", [1, 2, 2, 99, 0], grouprefs.KEEPREF)
    assert codes == [1, 1, -1, -1, -1]
    assert topic.count == 3
    assert 1 in g1.pel and 2 in g2.pel


def test_xdelex_delref_also_empties_every_pel(eng: Engine) -> None:
    topic, g1, g2 = setup(eng)
    eng.delete_seqs("t", [3])  # an XDEL left dangling references to 3
    codes, _ = eng.delete_refs("t", [1, 3], grouprefs.DELREF)
    assert codes == [1, -1]  # 3 was gone already (its references go all the same)
    assert sorted(g1.pel) == sorted(g2.pel) == [2, 4, 5]
    assert len(g1.consumers["a"].pel) == 3


def test_xdelex_acked_deletes_only_what_every_group_read_and_acked(eng: Engine) -> None:
    topic, g1, g2 = setup(eng, read=3)  # g1 has not read 4 and 5
    for g in (g1, g2):
        groups.ack(g, [1, 2, 4])
    codes, _ = eng.delete_refs("t", [1, 3, 4, 5], grouprefs.ACKED)
    assert codes == [1, 2, 2, 2]  # 3: pending in both; 4, 5: past g1's last-delivered
    assert topic.count == 4


def test_acked_with_no_groups_deletes(eng: Engine) -> None:
    eng.write("t", [prepare_fields([b"i", b"1"])])
    codes, _ = eng.delete_refs("t", [1], grouprefs.ACKED)
    assert codes == [1] and eng.get("t").count == 0


def test_xackdel_acks_in_its_group_then_deletes(eng: Engine) -> None:
    topic, g1, g2 = setup(eng)
    codes, _ = eng.delete_refs("t", [1, 2], grouprefs.ACKED, g1)
    assert codes == [2, 2]  # acked in g1, still pending in g2
    assert 1 not in g1.pel and 1 in g2.pel and topic.count == 5
    codes, _ = eng.delete_refs("t", [1, 2], grouprefs.ACKED, g2)
    assert codes == [1, 1] and topic.count == 3
    codes, _ = eng.delete_refs("t", [3], grouprefs.KEEPREF, g1)
    assert codes == [1] and 3 in g2.pel  # KEEPREF: g2's reference stays
    codes, _ = eng.delete_refs("t", [3, 3], grouprefs.KEEPREF, g2)
    assert codes == [1, -1]  # acknowledged (the entry was gone already), then nothing


def test_acked_floor_and_live_below(eng: Engine) -> None:
    topic, g1, g2 = setup(eng, n=6, read=4)
    assert grouprefs.acked_floor(topic) == 1  # pending everywhere
    for g in (g1, g2):
        groups.ack(g, [1, 2, 3])
    assert grouprefs.acked_floor(topic) == 4
    groups.ack(g1, [4])
    groups.ack(g2, [4, 5, 6])
    assert grouprefs.acked_floor(topic) == 5  # g1 has not read 5 yet
    eng.delete_seqs("t", [2])
    assert grouprefs.live_below(topic, 5) == 3
    assert grouprefs.acked_floor(eng.get("t")) == 5


def test_claim_idle_takes_the_idlest_first_and_counts_as_xclaim(eng: Engine, clock: FakeClock) -> None:
    eng.write("t", [prepare_fields([b"i", b"%d" % i]) for i in range(4)])
    topic = eng.get("t")
    g = groups.create(topic, "g", 0, 0, None, eng.now())
    assert g is not None
    groups.read_new(topic, g, "a", 2, eng.now())  # 1, 2 at t0
    clock.advance(100)
    groups.read_new(topic, g, "b", 2, eng.now())  # 3, 4 at t0+100
    g.pel[2].time -= 50  # 2 is the idlest
    clock.advance(100)
    got = groups.claim_idle(topic, g, "c", 150, 0, eng.now())
    assert [(c.delivery.seq, c.idle, c.count) for c in got] == [(2, 250, 1), (1, 200, 1)]
    assert g.pel[2].count == 2 and g.pel[2].consumer == "c" and g.pel[2].time == eng.now()
    assert sorted(g.consumers["c"].pel) == [1, 2] and 1 not in g.consumers["a"].pel
    assert groups.next_ripe(g, 150, eng.now()) == eng.now() + 50  # 3 and 4 ripen then
    clock.advance(200)
    got = groups.claim_idle(topic, g, "c", 0, 1, eng.now())
    assert [c.delivery.seq for c in got] == [3]  # COUNT; 3 and 4 tie on idle: lower ID first


def test_claim_idle_skips_deleted_entries_and_leaves_them_pending(eng: Engine, clock: FakeClock) -> None:
    eng.write("t", [prepare_fields([b"i", b"%d" % i]) for i in range(2)])
    topic = eng.get("t")
    g = groups.create(topic, "g", 0, 0, None, eng.now())
    assert g is not None
    groups.read_new(topic, g, "a", 2, eng.now())
    eng.delete_seqs("t", [1])
    clock.advance(10)
    got = groups.claim_idle(topic, g, "b", 0, 1, eng.now())
    assert [c.delivery.seq for c in got] == [2]
    assert g.pel[1].consumer == "a"
