"""Queues (seeds section 10): claim / ack / nack / extend over a topic of jobs.

Owns the lease projection (leases.py), the queue operations (queues.py), dead-lettering
(deadletter.py) and priority bands (priority.py).

May import: the log (engine/log/) and the shared engine modules (config, journal, glob);
`engine.core.Engine` for type hints only. Never groups/, routing/ or keyspace/
(tests/test_layering.py).
"""
