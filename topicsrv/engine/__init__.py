"""The topicsrv engine: pure, synchronous topic operations shared by every front."""

from topicsrv.engine.core import Engine

__all__ = ["Engine"]
