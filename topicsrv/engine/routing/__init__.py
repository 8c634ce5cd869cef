"""Routing (seeds section 8): routers that forward one topic's records into another.

Owns router definitions and state (routers.py), one forwarding step (routerfwd.py), the graph
rules (routergraph.py) and the hop cap on gaps (gaphops.py).

May import: the log (engine/log/) and the shared engine modules (config, journal, glob);
`engine.core.Engine` for type hints only. Never groups/, queues/ or keyspace/
(tests/test_layering.py).
"""
