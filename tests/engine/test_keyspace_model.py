"""A hypothesis state machine over the keyspace: SET/GET/INCR/EXPIRE/PERSIST/DEL/RENAME/
FLUSHDB, the fake clock moving, active expiry ticks, and restarts (clean: checkpoint snapshot
+ WAL tail; crash: the last checkpoint + every journaled operation since, decoded from their
binary frames), against a dict-with-TTLs model. After every step the visible keyspace equals
the model's live keys; no expired key is ever visible, before or after a restart."""

from __future__ import annotations

from typing import Any

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from topicsrv.clock import FakeClock
from topicsrv.engine import Engine
from topicsrv.engine.journal import NullJournal
from topicsrv.engine.keyspace import ops
from topicsrv.engine.keyspace import strings as ks_ops
from topicsrv.errors import TopicsError
from topicsrv.storage import keyspacelog

KEYS = st.sampled_from(["a", "b", "c", "\xff\x00k"])
VALUES = st.sampled_from([b"1", b"-7", b"x", b"", b"9223372036854775807", b"\x00bin"])


class Wal(NullJournal):
    """The frames storage would write: each operation encoded as its T_KEYSPACE body."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []

    def keyspace_changed(self, op: list[tuple[Any, ...]]) -> None:  # type: ignore[override]
        self.bodies.append(ops.encode(op))


class Restarts(RuleBasedStateMachine):
    """What every keyspace state machine shares: an engine on a fake clock whose keyspace
    operations are kept as WAL frames, the clock moving with active expiry ticks, checkpoints,
    and restarts (clean: checkpoint + WAL tail; crash: the last checkpoint + every frame
    since). `carry` hands the settings a restart keeps to the new engine's keyspace."""

    def __init__(self) -> None:
        super().__init__()
        self.clock = FakeClock()
        self.wal = Wal()
        self.engine = Engine(self.clock, self.wal)
        self.checkpoint: bytes = ops.encode([])

    @property
    def ks(self) -> Any:
        return self.engine.keyspace

    def carry(self, ks: Any) -> None:
        """Settings the new keyspace keeps across a restart (none here)."""

    @rule(ms=st.integers(0, 2000))
    def tick(self, ms: int) -> None:
        self.clock.advance(ms)
        self.ks.active_expire()

    @rule()
    def checkpoint_now(self) -> None:
        self.checkpoint = ops.encode(self.ks.snapshot())
        self.wal.bodies.clear()

    @rule(crash=st.booleans(), downtime=st.integers(0, 2000))
    def restart(self, crash: bool, downtime: int) -> None:
        if not crash:  # a clean stop ends with a final checkpoint
            self.checkpoint_now()
        self.clock.advance(downtime)
        wal = Wal()
        engine = Engine(self.clock, wal)
        keyspacelog.replay(engine.keyspace, ops.decode(self.checkpoint), list(self.wal.bodies),
                           self.clock.now_ms())
        wal.bodies = list(self.wal.bodies)  # the WAL since the checkpoint is still on disk
        self.carry(engine.keyspace)
        self.engine, self.wal = engine, wal
        now = self.clock.now_ms()
        for name, d in list(engine.keyspace.expiry.deadlines.items()):  # expired stay gone:
            if d <= now:  # never visible (the lookup reaps it, journaled: keyspacelog Rule 4)
                assert engine.keyspace.kind(name) is None


class KeyspaceModel(Restarts):
    def __init__(self) -> None:
        super().__init__()
        self.model: dict[str, tuple[bytes, int | None]] = {}

    def _live(self) -> dict[str, tuple[bytes, int | None]]:
        now = self.clock.now_ms()
        return {k: v for k, v in self.model.items() if v[1] is None or v[1] > now}

    @rule(key=KEYS, value=VALUES, ttl=st.one_of(st.none(), st.integers(1, 3000)))
    def set(self, key: str, value: bytes, ttl: int | None) -> None:
        deadline = None if ttl is None else self.clock.now_ms() + ttl
        ks_ops.put(self.ks, [(key, value)], deadline or 0)
        self.model[key] = (value, deadline)

    @rule(key=KEYS)
    def get(self, key: str) -> None:
        live = self._live()
        assert self.ks.get(key) == (live[key][0] if key in live else None)

    @rule(key=KEYS, by=st.integers(-5, 5))
    def incr(self, key: str, by: int) -> None:
        live = self._live()
        old = live.get(key)
        try:
            new, _ = ks_ops.incr_by(self.ks, key, by)
        except TopicsError as exc:
            assert old is not None and exc.message in (
                "value is not an integer or out of range", "increment or decrement would overflow")
            return
        assert new == (int(old[0]) if old else 0) + by
        self.model[key] = (str(new).encode(), old[1] if old else None)

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
                self.model[key] = (live[key][0], deadline)

    @rule(key=KEYS)
    def persist(self, key: str) -> None:
        live = self._live()
        n, _ = ks_ops.persist(self.ks, key)
        assert n == (1 if key in live and live[key][1] is not None else 0)
        if n:
            self.model[key] = (live[key][0], None)

    @rule(keys=st.lists(KEYS, min_size=1, max_size=3))
    def delete(self, keys: list[str]) -> None:
        live = self._live()
        n, _ = ks_ops.delete(self.ks, keys)
        assert n == len(set(keys) & set(live))
        for k in keys:
            self.model.pop(k, None)

    @rule(src=KEYS, dst=KEYS)
    def rename(self, src: str, dst: str) -> None:
        live = self._live()
        try:
            ks_ops.rename(self.ks, src, dst, False)
        except TopicsError as exc:
            assert src not in live and exc.message == "no such key"
            return
        item = live[src]
        self.model.pop(src, None)
        self.model[dst] = item

    @rule()
    def flushdb(self) -> None:
        self.engine.keyspace.commit([("f",)])
        self.model.clear()

    @invariant()
    def visible_equals_model(self) -> None:
        live = self._live()
        assert {k: self.ks.get(k) for k in ["a", "b", "c", "\xff\x00k"] if self.ks.kind(k)} == \
            {k: v[0] for k, v in live.items()}
        assert self.ks.size() == len(live)
        assert {k: self.ks.deadline(k) for k in live} == {k: v[1] for k, v in live.items()}


KeyspaceModel.TestCase.settings = settings(max_examples=60, stateful_step_count=40, deadline=None)
TestKeyspaceModel = KeyspaceModel.TestCase
