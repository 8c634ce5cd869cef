"""The log: a topic's records and everything that reads, writes or removes them.

Owns `Topic` (topic.py), its segments and their packed columns (segments, columns, blobs), the
record codec (records, entries), the read pipeline (reads), the write body (writes), deletes,
tombstones, the tag index, stream IDs (xids) and the idempotency table.

May import: the shared engine modules (engine/config, engine/glob, engine/journal) and
`engine.core.Engine` for type hints only. Never groups/, queues/, routing/ or keyspace/: they
are built on the log, not the other way round (tests/test_layering.py).
"""
