"""Engine test fixtures: an engine on a fake clock (time is driven, never waited for)."""

from __future__ import annotations

import pytest

from topicsrv.clock import FakeClock
from topicsrv.engine import Engine


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def eng(clock: FakeClock) -> Engine:
    return Engine(clock=clock)
