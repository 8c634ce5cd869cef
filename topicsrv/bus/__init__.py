"""Pub/sub: the bus both fronts subscribe to (bus.py), the subscribers' output limits
(limits.py) and keyspace notifications (keyspace.py). Nothing here is stored."""

from topicsrv.bus.bus import Bus, BusStats, Message, Subscriber
from topicsrv.bus.keyspace import Notifications
from topicsrv.bus.limits import OutputLimits

__all__ = ["Bus", "BusStats", "Message", "Notifications", "OutputLimits", "Subscriber"]
