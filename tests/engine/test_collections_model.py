"""A hypothesis state machine over lists and hashes in the keyspace (issue 35): pushes, pops,
LSET/LINSERT/LREM/LTRIM/LMOVE, HSET/HDEL/HINCRBY, a SET over any kind, EXPIRE, DEL, RENAME,
COPY, the fake clock moving, active expiry, small listpack limits changed on the way, and
restarts (clean: checkpoint snapshot + WAL tail; crash: the last checkpoint + every journaled
operation since, decoded from their binary frames), against a model of Python lists and
dicts with TTLs. After every step the visible keyspace equals the model's live keys, kind,
contents and order included; no expired key is ever visible, before or after a restart."""

from __future__ import annotations

from typing import Any

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import invariant, rule

from tests.engine.test_keyspace_model import Restarts
from topicsrv.engine.keyspace import hashes, lists
from topicsrv.engine.keyspace import strings as ks_ops
from topicsrv.errors import TopicsError

NAMES = ["l1", "l2", "h1", "s1"]
KEYS = st.sampled_from(NAMES)
ELEMS = st.sampled_from([b"a", b"b", b"", b"x" * 130, b"7"])
FIELDS = st.sampled_from([b"f", b"g", b"h" * 70, b""])
Model = dict[str, tuple[str, Any, int | None]]  # name -> (kind, value, deadline)


class CollectionsModel(Restarts):
    def __init__(self) -> None:
        super().__init__()
        self.model: Model = {}

    def _live(self) -> Model:
        now = self.clock.now_ms()
        return {k: v for k, v in self.model.items() if v[2] is None or v[2] > now}

    def _kind_ok(self, key: str, kind: str) -> bool:
        live = self._live()
        return key not in live or live[key][0] == kind

    def _set_list(self, key: str, items: list[bytes], deadline: int | None) -> None:
        if items:
            self.model[key] = ("list", items, deadline)
        else:
            self.model.pop(key, None)

    # ---- lists ---------------------------------------------------------------------------

    @rule(key=KEYS, values=st.lists(ELEMS, min_size=1, max_size=4), left=st.booleans(),
          xx=st.booleans())
    def push(self, key: str, values: list[bytes], left: bool, xx: bool) -> None:
        live = self._live()
        try:
            n, _ = lists.push(self.ks, key, values, left, xx)
        except TopicsError:
            assert not self._kind_ok(key, "list")
            return
        if xx and key not in live:
            assert n == 0
            return
        old = list(live[key][1]) if key in live else []
        new = values[::-1] + old if left else old + values
        assert n == len(new)
        self._set_list(key, new, live[key][2] if key in live else None)

    @rule(key=KEYS, count=st.integers(1, 4), left=st.booleans())
    def pop(self, key: str, count: int, left: bool) -> None:
        live = self._live()
        try:
            got, _ = lists.pop(self.ks, key, count, left)
        except TopicsError:
            assert not self._kind_ok(key, "list")
            return
        if key not in live:
            assert got is None
            return
        items = list(live[key][1])
        want = items[:count] if left else items[::-1][:count]
        assert got == want
        rest = items[count:] if left else items[:max(len(items) - count, 0)]
        self._set_list(key, rest, live[key][2])

    @rule(key=KEYS, index=st.integers(-4, 4), value=ELEMS)
    def lset(self, key: str, index: int, value: bytes) -> None:
        live = self._live()
        try:
            lists.lset(self.ks, key, index, value)
        except TopicsError:
            items = live[key][1] if key in live and live[key][0] == "list" else None
            assert items is None or not -len(items) <= index < len(items)
            return
        items = list(live[key][1])
        items[index] = value
        self.model[key] = ("list", items, live[key][2])

    @rule(key=KEYS, before=st.booleans(), pivot=ELEMS, value=ELEMS)
    def linsert(self, key: str, before: bool, pivot: bytes, value: bytes) -> None:
        live = self._live()
        try:
            n, _ = lists.linsert(self.ks, key, before, pivot, value)
        except TopicsError:
            assert not self._kind_ok(key, "list")
            return
        if key not in live:
            assert n == 0
            return
        items = list(live[key][1])
        if pivot not in items:
            assert n == -1
            return
        i = items.index(pivot)
        items.insert(i if before else i + 1, value)
        assert n == len(items)
        self.model[key] = ("list", items, live[key][2])

    @rule(key=KEYS, count=st.integers(-2, 2), value=ELEMS)
    def lrem(self, key: str, count: int, value: bytes) -> None:
        live = self._live()
        try:
            n, _ = lists.lrem(self.ks, key, count, value)
        except TopicsError:
            assert not self._kind_ok(key, "list")
            return
        if key not in live:
            assert n == 0
            return
        items = list(live[key][1])
        hits = [i for i, v in enumerate(items) if v == value]
        hits = hits[:count] if count > 0 else hits[count:] if count < 0 else hits
        assert n == len(hits)
        self._set_list(key, [v for i, v in enumerate(items) if i not in hits], live[key][2])

    @rule(key=KEYS, start=st.integers(-5, 5), stop=st.integers(-5, 5))
    def ltrim(self, key: str, start: int, stop: int) -> None:
        live = self._live()
        try:
            lists.ltrim(self.ks, key, start, stop)
        except TopicsError:
            assert not self._kind_ok(key, "list")
            return
        if key not in live:
            return
        items = list(live[key][1])
        s, e = lists.clamp(start, stop, len(items))
        self._set_list(key, items[s:e + 1] if s <= e else [], live[key][2])

    @rule(src=KEYS, dst=KEYS, from_left=st.booleans(), to_left=st.booleans())
    def lmove(self, src: str, dst: str, from_left: bool, to_left: bool) -> None:
        live = self._live()
        try:
            got, _ = lists.move(self.ks, src, dst, from_left, to_left)
        except TopicsError:
            assert not self._kind_ok(src, "list") or not self._kind_ok(dst, "list")
            return
        if src not in live:
            assert got is None
            return
        items = list(live[src][1])
        value = items.pop(0 if from_left else -1)
        assert got == value
        self._set_list(src, items, live[src][2])
        live = self._live()
        other = list(live[dst][1]) if dst in live else []
        other = [value, *other] if to_left else [*other, value]
        self._set_list(dst, other, live[dst][2] if dst in live else None)

    # ---- hashes --------------------------------------------------------------------------

    @rule(key=KEYS, pairs=st.lists(st.tuples(FIELDS, ELEMS), min_size=1, max_size=3))
    def hset(self, key: str, pairs: list[tuple[bytes, bytes]]) -> None:
        live = self._live()
        try:
            n, _ = hashes.hset(self.ks, key, pairs)
        except TopicsError:
            assert not self._kind_ok(key, "hash")
            return
        table = dict(live[key][1]) if key in live else {}
        new = {f for f, _ in pairs} - set(table)
        assert n == len(new)
        table.update(pairs)
        self.model[key] = ("hash", table, live[key][2] if key in live else None)

    @rule(key=KEYS, fields=st.lists(FIELDS, min_size=1, max_size=3))
    def hdel(self, key: str, fields: list[bytes]) -> None:
        live = self._live()
        try:
            n, _ = hashes.hdel(self.ks, key, fields)
        except TopicsError:
            assert not self._kind_ok(key, "hash")
            return
        if key not in live:
            assert n == 0
            return
        table = dict(live[key][1])
        assert n == len(set(fields) & set(table))
        for f in fields:
            table.pop(f, None)
        if table:
            self.model[key] = ("hash", table, live[key][2])
        else:
            self.model.pop(key)

    @rule(key=KEYS, field=FIELDS, by=st.integers(-3, 3))
    def hincrby(self, key: str, field: bytes, by: int) -> None:
        live = self._live()
        try:
            n, _ = hashes.incr_by(self.ks, key, field, by)
        except TopicsError:
            ok = key not in live or live[key][0] != "hash"
            if not ok:
                old = live[key][1].get(field)
                ok = old is not None and not old.lstrip(b"-").isdigit()
            assert ok or not self._kind_ok(key, "hash")
            return
        table = dict(live[key][1]) if key in live else {}
        assert n == int(table.get(field, b"0")) + by
        table[field] = str(n).encode()
        self.model[key] = ("hash", table, live[key][2] if key in live else None)

    # ---- any kind ------------------------------------------------------------------------

    @rule(key=KEYS, value=ELEMS)
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

    @rule(fill=st.sampled_from([-2, 1, 2]), entries=st.sampled_from([512, 1, 2]))
    def limits(self, fill: int, entries: int) -> None:
        self.ks.list_fill, self.ks.hash_entries = fill, entries

    def carry(self, ks: Any) -> None:
        ks.list_fill, ks.hash_entries = self.ks.list_fill, self.ks.hash_entries

    @invariant()
    def visible_equals_model(self) -> None:
        live = self._live()
        seen: Model = {}
        for k in NAMES:
            kind = self.ks.kind(k)
            if kind == "list":
                seen[k] = ("list", list(self.ks.colls[k]), self.ks.deadline(k))
            elif kind == "hash":
                seen[k] = ("hash", dict(self.ks.colls[k].items()), self.ks.deadline(k))
            elif kind == "string":
                seen[k] = ("string", self.ks.get(k), self.ks.deadline(k))
        assert seen == live
        assert self.ks.size() == len(live)


CollectionsModel.TestCase.settings = settings(max_examples=80, stateful_step_count=40,
                                              deadline=None)
TestCollectionsModel = CollectionsModel.TestCase
