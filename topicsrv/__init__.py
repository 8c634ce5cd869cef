"""topicsrv: an event-log server that never tells a consumer "all good" after it lost data."""

from topicsrv import buildinfo as _buildinfo

__version__ = "0.1.0"

_buildinfo.install_hook()  # before any hot module is imported (buildinfo Rule 3)
