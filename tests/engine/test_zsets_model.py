"""A hypothesis state machine over sorted sets in the keyspace (issue 36): ZADD with its flags,
ZINCRBY, ZREM, the pops, removals by rank and score, the stores (ZUNIONSTORE, ZINTERSTORE,
ZDIFFSTORE, ZRANGESTORE) across kinds, a SET over any kind, EXPIRE, DEL, RENAME, COPY, the
listpack limits changed on the way, the fake clock, active expiry, and restarts (clean and
crash, Restarts), against a model of dicts with TTLs. After every step the visible keyspace
equals the model's live keys, each sorted set in (score, member) order; replay needs no
arithmetic: the journaled changes carry results."""

from __future__ import annotations

import math
from typing import Any

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import invariant, rule

from tests.engine.test_keyspace_model import Restarts
from topicsrv.engine.keyspace import strings as ks_ops
from topicsrv.engine.keyspace import zsets
from topicsrv.engine.keyspace.zsetrange import rank_span
from topicsrv.errors import TopicsError

NAMES = ["z1", "z2", "z3", "s1"]
KEYS = st.sampled_from(NAMES)
MEMBERS = st.sampled_from([b"a", b"b", b"", b"x" * 70, b"7", b"m"])
SCORES = st.sampled_from([0.0, 1.0, -1.5, 2.5, 1e300, -math.inf, math.inf, 0.1])
Model = dict[str, tuple[str, Any, int | None]]  # name -> (kind, value, deadline)


def _order(table: dict[bytes, float]) -> list[tuple[bytes, float]]:
    return sorted(table.items(), key=lambda p: (p[1], p[0]))


class ZsetsModel(Restarts):
    def __init__(self) -> None:
        super().__init__()
        self.model: Model = {}

    def _live(self) -> Model:
        now = self.clock.now_ms()
        return {k: v for k, v in self.model.items() if v[2] is None or v[2] > now}

    def _zset(self, key: str) -> dict[bytes, float] | None:
        """The live sorted set of `key`; None if missing; raises if another kind (the
        command must then have answered WRONGTYPE)."""
        live = self._live()
        if key not in live:
            return None
        assert live[key][0] == "zset"
        return dict(live[key][1])

    def _put(self, key: str, table: dict[bytes, float], keep_ttl: bool = True) -> None:
        live = self._live()
        deadline = live[key][2] if keep_ttl and key in live else None
        if table:
            self.model[key] = ("zset", table, deadline)
        else:
            self.model.pop(key, None)

    def _wrongtype(self, key: str) -> bool:
        live = self._live()
        return key in live and live[key][0] != "zset"

    @rule(key=KEYS, pairs=st.lists(st.tuples(SCORES, MEMBERS), min_size=1, max_size=3),
          flag=st.sampled_from(["", "nx", "xx", "gt", "lt", "incr"]))
    def zadd(self, key: str, pairs: list[tuple[float, bytes]], flag: str) -> None:
        if flag == "incr":
            pairs = pairs[:1]
        try:
            added, _, result, _ = zsets.zadd(self.ks, key, pairs, nx=flag == "nx",
                                             xx=flag == "xx", gt=flag == "gt",
                                             lt=flag == "lt", incr=flag == "incr")
        except TopicsError as e:
            if e.resp_prefix == "WRONGTYPE":
                assert self._wrongtype(key)
                return
            assert flag == "incr" and "NaN" in e.message
            return
        table = self._zset(key)
        if table is None:
            if flag == "xx":
                assert added == 0
                return
            table = {}
        want_added = 0
        for score, member in pairs:
            cur = table.get(member)
            if cur is None:
                if flag != "xx":
                    table[member] = score
                    want_added += 1
                continue
            if flag == "nx":
                continue
            new = cur + score if flag == "incr" else score
            if (flag == "gt" and new <= cur) or (flag == "lt" and new >= cur):
                continue
            table[member] = new
            if flag == "incr":
                assert result == new
        assert added == want_added
        self._put(key, table)

    @rule(key=KEYS, members=st.lists(MEMBERS, min_size=1, max_size=3))
    def zrem(self, key: str, members: list[bytes]) -> None:
        try:
            n, _ = zsets.zrem(self.ks, key, members)
        except TopicsError:
            assert self._wrongtype(key)
            return
        table = self._zset(key) or {}
        assert n == len(set(members) & set(table))
        for m in members:
            table.pop(m, None)
        self._put(key, table)

    @rule(key=KEYS, count=st.integers(1, 3), top=st.booleans())
    def pop(self, key: str, count: int, top: bool) -> None:
        try:
            got, _ = zsets.pop(self.ks, key, count, top)
        except TopicsError:
            assert self._wrongtype(key)
            return
        table = self._zset(key) or {}
        order = _order(table)
        want = order[::-1][:count] if top else order[:count]
        assert got == want
        for m, _ in got:
            del table[m]
        self._put(key, table)

    @rule(key=KEYS, start=st.integers(-4, 4), stop=st.integers(-4, 4))
    def remrange_rank(self, key: str, start: int, stop: int) -> None:
        try:
            zv = zsets.get(self.ks, key)
        except TopicsError:
            assert self._wrongtype(key)
            return
        table = self._zset(key)
        if zv is None:
            assert table is None
            return
        assert table is not None
        lo, hi = rank_span(start, stop, len(zv))
        n, _ = zsets.remove_span(self.ks, key, zv, lo, hi)
        order = _order(table)
        assert n == len(order[lo:hi])
        for m, _ in order[lo:hi]:
            del table[m]
        self._put(key, table)

    @rule(dst=KEYS, srcs=st.lists(KEYS, min_size=1, max_size=3),
          op=st.sampled_from(["union", "inter", "diff"]),
          how=st.sampled_from([b"sum", b"min", b"max"]))
    def store(self, dst: str, srcs: list[str], op: str, how: bytes) -> None:
        try:
            inputs = [zsets.source(self.ks, s) for s in srcs]
        except TopicsError:
            assert any(self._wrongtype(s) for s in srcs)
            return
        pairs = zsets.combine(inputs, op, [1.0] * len(srcs), how)
        n, _ = zsets.store(self.ks, dst, pairs)
        assert n == len(pairs)
        tables = [self._zset(s) or {} for s in srcs]
        if op == "diff":
            want = {m: s for m, s in tables[0].items() if not any(m in t for t in tables[1:])}
        elif op == "union":
            want = {}
            for t in tables:
                for m, s in t.items():
                    want[m] = s if m not in want else zsets._aggregate(want[m], s, how)
        else:
            want = {m: s for m, s in tables[0].items() if all(m in t for t in tables[1:])}
        assert {m for m, _ in pairs} == set(want)
        if pairs:
            self.model[dst] = ("zset", dict(pairs), None)
        else:
            self.model.pop(dst, None)

    # ---- any kind ------------------------------------------------------------------------

    @rule(key=KEYS, value=MEMBERS)
    def set_string(self, key: str, value: bytes) -> None:
        ks_ops.put(self.ks, [(key, value)])
        self.model[key] = ("string", value, None)

    @rule(key=KEYS, ttl=st.integers(-10, 3000))
    def expire(self, key: str, ttl: int) -> None:
        live = self._live()
        deadline = self.clock.now_ms() + ttl
        n, _ = ks_ops.set_deadline(self.ks, key, deadline, False, False, False, False)
        assert n == (1 if key in live else 0)
        if key in live:
            if ttl <= 0:
                del self.model[key]
            else:
                self.model[key] = (*live[key][:2], deadline)

    @rule(keys=st.lists(KEYS, min_size=1, max_size=2))
    def delete(self, keys: list[str]) -> None:
        live = self._live()
        n, _ = ks_ops.delete(self.ks, keys)
        assert n == len(set(keys) & set(live))
        for k in keys:
            self.model.pop(k, None)

    @rule(src=KEYS, dst=KEYS, copy=st.booleans())
    def rename_or_copy(self, src: str, dst: str, copy: bool) -> None:
        live = self._live()
        if copy:
            n, _ = ks_ops.copy(self.ks, src, dst, True)
            assert n == (1 if src in live else 0)
            if n and src != dst:
                self.model[dst] = live[src]
            return
        try:
            ks_ops.rename(self.ks, src, dst, False)
        except TopicsError:
            assert src not in live
            return
        item = live[src]
        self.model.pop(src, None)
        self.model[dst] = item

    @rule(entries=st.sampled_from([128, 0, 1, 2]), value=st.sampled_from([64, 2]))
    def limits(self, entries: int, value: int) -> None:
        self.ks.zset_entries, self.ks.zset_value = entries, value

    def carry(self, ks: Any) -> None:
        ks.zset_entries, ks.zset_value = self.ks.zset_entries, self.ks.zset_value

    @invariant()
    def visible_equals_model(self) -> None:
        live = self._live()
        seen: Model = {}
        for k in NAMES:
            kind = self.ks.kind(k)
            if kind == "zset":
                zv = self.ks.colls[k]
                pairs = zv.pairs()
                assert pairs == sorted(pairs, key=lambda p: (p[1], p[0]))
                assert [zv.rank(m) for m, _ in pairs] == list(range(len(pairs)))
                seen[k] = ("zset", dict(pairs), self.ks.deadline(k))
            elif kind == "string":
                seen[k] = ("string", self.ks.get(k), self.ks.deadline(k))
        assert seen == live
        assert self.ks.size() == len(live)


ZsetsModel.TestCase.settings = settings(max_examples=60, stateful_step_count=40, deadline=None)
TestZsetsModel = ZsetsModel.TestCase
