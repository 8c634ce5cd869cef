"""A hypothesis state machine over sets in the keyspace (issue 36): SADD, SREM, SPOP (with and
without a count), SMOVE, the *STORE commands across kinds (a string or a set at the
destination), SET over any kind, EXPIRE, DEL, RENAME, COPY, the encoding limits changed on
the way, the fake clock, active expiry, checkpoints written whole or in parts while sets
change under them, and restarts (clean and crash) against a model of Python sets with TTLs.
After every step the visible keyspace equals the model's live keys, kind and members
included; an intset answers its members in ascending order."""

from __future__ import annotations

from typing import Any

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import invariant, rule

from tests.engine.test_keyspace_model import Restarts
from topicsrv.engine.keyspace import ops, sets
from topicsrv.engine.keyspace import strings as ks_ops
from topicsrv.engine.keyspace.setvalue import INTSET
from topicsrv.engine.keyspace.snapshot import Snapshot
from topicsrv.errors import TopicsError

NAMES = ["s1", "s2", "s3", "x"]
KEYS = st.sampled_from(NAMES)
MEMBERS = st.sampled_from([b"1", b"2", b"-3", b"10", b"a", b"", b"m" * 70, b"07"])
Model = dict[str, tuple[str, Any, int | None]]  # name -> (kind, value, deadline)


class SetsModel(Restarts):
    def __init__(self) -> None:
        super().__init__()
        self.model: Model = {}

    def _live(self) -> Model:
        now = self.clock.now_ms()
        return {k: v for k, v in self.model.items() if v[2] is None or v[2] > now}

    def _members(self, key: str) -> set[bytes] | None:
        """The model's set at `key`; None for no key; raises for another kind."""
        live = self._live()
        if key not in live:
            return None
        if live[key][0] != "set":
            raise TypeError
        return set(live[key][1])

    def _put(self, key: str, members: set[bytes], deadline: int | None) -> None:
        if members:
            self.model[key] = ("set", members, deadline)
        else:
            self.model.pop(key, None)

    def _deadline(self, key: str) -> int | None:
        live = self._live()
        return live[key][2] if key in live else None

    @rule(key=KEYS, members=st.lists(MEMBERS, min_size=1, max_size=5))
    def sadd(self, key: str, members: list[bytes]) -> None:
        try:
            have = self._members(key)
        except TypeError:
            try:
                sets.sadd(self.ks, key, members)
            except TopicsError:
                return
            raise AssertionError("SADD over another kind") from None
        n, _ = sets.sadd(self.ks, key, members)
        old = have or set()
        assert n == len(set(members) - old)
        self._put(key, old | set(members), self._deadline(key))

    @rule(key=KEYS, members=st.lists(MEMBERS, min_size=1, max_size=4))
    def srem(self, key: str, members: list[bytes]) -> None:
        try:
            have = self._members(key)
        except TypeError:
            try:
                sets.srem(self.ks, key, members)
            except TopicsError:
                return
            raise AssertionError("SREM over another kind") from None
        n, _ = sets.srem(self.ks, key, members)
        assert n == len(set(members) & (have or set()))
        if have is not None:
            self._put(key, have - set(members), self._deadline(key))

    @rule(key=KEYS, count=st.one_of(st.none(), st.integers(0, 6)))
    def spop(self, key: str, count: int | None) -> None:
        try:
            have = self._members(key)
        except TypeError:
            return
        out, _ = sets.spop(self.ks, key, count)
        if have is None:
            assert out == (None if count is None else [])
            return
        got = {out} if count is None else set(out)
        assert got <= have and len(got) == (1 if count is None else min(count, len(have)))
        if count is not None:
            assert len(out) == len(got)
        self._put(key, have - got, self._deadline(key))

    @rule(src=KEYS, dst=KEYS, member=MEMBERS)
    def smove(self, src: str, dst: str, member: bytes) -> None:
        try:
            have = self._members(src)
            if have is None:
                n, _, _ = sets.smove(self.ks, src, dst, member)
                assert n == 0
                return
            there = self._members(dst)
        except TypeError:
            try:
                sets.smove(self.ks, src, dst, member)
            except TopicsError:
                return
            raise AssertionError("SMOVE over another kind") from None
        n, _, _ = sets.smove(self.ks, src, dst, member)
        assert n == int(member in have)
        if n and src != dst:
            self._put(src, have - {member}, self._deadline(src))
            self._put(dst, (there or set()) | {member}, self._deadline(dst))

    @rule(op=st.sampled_from(["inter", "union", "diff"]), dst=KEYS,
          srcs=st.lists(KEYS, min_size=1, max_size=3))
    def store(self, op: str, dst: str, srcs: list[str]) -> None:
        try:
            inputs = [self._members(k) for k in srcs]
        except TypeError:
            try:
                getattr(sets, op)(self.ks, srcs)
            except TopicsError:
                return
            raise AssertionError("a set operation over another kind") from None
        given = [s or set() for s in inputs]
        if op == "inter":
            want = set.intersection(*given)
            result: Any = sets.inter(self.ks, srcs)
            assert set(result) == want and len(result) == len(want)
        elif op == "union":
            want = set.union(*given)
            result = sets.union(self.ks, srcs)
        else:
            want = given[0].difference(*given[1:])
            result = sets.diff(self.ks, srcs)
        n, _ = sets.store(self.ks, dst, result)
        assert n == len(want)
        if want:
            self.model[dst] = ("set", want, None)
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
        except TopicsError as exc:
            assert src not in live and exc.message == "no such key"
            return
        item = live[src]
        self.model.pop(src, None)
        self.model[dst] = item

    @rule(intset=st.sampled_from([512, 1, 3]), entries=st.sampled_from([128, 1, 4]),
          value=st.sampled_from([64, 1]))
    def limits(self, intset: int, entries: int, value: int) -> None:
        self.ks.set_intset, self.ks.set_entries, self.ks.set_value = intset, entries, value

    def carry(self, ks: Any) -> None:
        ks.set_intset, ks.set_entries = self.ks.set_intset, self.ks.set_entries
        ks.set_value = self.ks.set_value

    @rule(units=st.integers(1, 4), member=MEMBERS)
    def checkpoint_in_parts(self, units: int, member: bytes) -> None:
        """The checkpoint of the live server (snapshot.py): parts of `units` while SADD/SREM
        change a set between parts; recovery replays the WAL from the checkpoint's start."""
        snap = Snapshot(self.ks)
        self.ks.saving = snap
        self.wal.bodies.clear()
        parts: list[Any] = []
        step = 0
        try:
            while True:
                part = snap.next_part(units)
                if part is None:
                    break
                parts += part
                key = NAMES[step % 3]
                step += 1
                if key in self._live() and self._live()[key][0] != "set":
                    continue
                if step % 2:
                    self.sadd(key, [member])
                else:
                    self.srem(key, [member])
        finally:
            self.ks.saving = None
        self.checkpoint = ops.encode(parts)

    @invariant()
    def visible_equals_model(self) -> None:
        live = self._live()
        seen: Model = {}
        for k in NAMES:
            kind = self.ks.kind(k)
            if kind == "set":
                sv = self.ks.colls[k]
                members = list(sv)
                assert len(members) == len(set(members)) == len(sv)
                if sv.encoding == INTSET:
                    assert [int(m) for m in members] == sorted(int(m) for m in members)
                seen[k] = ("set", set(members), self.ks.deadline(k))
            elif kind == "string":
                seen[k] = ("string", self.ks.get(k), self.ks.deadline(k))
            else:
                assert kind is None
        assert seen == live
        assert self.ks.size() == len(live)


SetsModel.TestCase.settings = settings(max_examples=120, stateful_step_count=40, deadline=None)
TestSetsModel = SetsModel.TestCase
