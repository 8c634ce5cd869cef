"""The keyspace: string values and key expiry beside the engine's topics (docs/concepts.md
"One keyspace"). `Keyspace` (space.py) holds the strings and the expiry index; strings.py the
string commands' operations; ops.py the journaled unit; values.py Redis's value rules."""

from topicsrv.engine.keyspace.space import STREAM, STRING, Keyspace, wrongtype

__all__ = ["STREAM", "STRING", "Keyspace", "wrongtype"]
