"""topicsrv: an event-log server that never tells a consumer "all good" after it lost data."""

__version__ = "0.1.0"
