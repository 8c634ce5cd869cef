"""Building a SparkSession for topicsrv jobs, under `python` and under `spark-submit` alike.

Rule 1: under `spark-submit` (PYSPARK_GATEWAY_PORT is set) the master, the Python of the
workers and the session config are spark-submit's; this module only registers the source.
Rule 2: under plain `python` with a local master, the workers run this interpreter (the
project's venv), so they can import topicsrv and its dependencies; a non-local master keeps
whatever PYSPARK_PYTHON the environment names (a path on the worker machines).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import Any


def use_this_python() -> None:
    """Make Spark's Python workers run this interpreter (the project's venv) unless the
    environment already chose one. Call before the SparkSession is created (local runs)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


def spark_session(app_name: str, master: str | None = None,
                  conf: Mapping[str, str] | None = None) -> Any:
    """A SparkSession with the `topics` format registered."""
    from pyspark.sql import SparkSession

    from topicsrv.spark.source import TopicsDataSource

    under_submit = "PYSPARK_GATEWAY_PORT" in os.environ
    if not under_submit and (master is None or master.startswith("local")):
        use_this_python()
    builder = SparkSession.builder.appName(app_name)
    if master:
        builder = builder.master(master)
    elif not under_submit:
        builder = builder.master("local[*]")
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.dataSource.register(TopicsDataSource)
    return session
