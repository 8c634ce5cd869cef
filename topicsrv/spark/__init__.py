"""A PySpark data source for topicsrv (format `topics`), over the stock redis-py client.

    from topicsrv.spark import TopicsDataSource
    spark.dataSource.register(TopicsDataSource)
    df = spark.read.format("topics").option("url", "redis://127.0.0.1:6379") \
        .option("topic", "a,b").load()

See docs/spark.md. Needs the `spark` extra (pyspark>=4.0, pyarrow).
"""

from __future__ import annotations

from typing import Any

from topicsrv.spark.launch import spark_session, use_this_python
from topicsrv.spark.reader import DataLossError
from topicsrv.spark.rows import SCHEMA_DDL
from topicsrv.spark.source import TopicsDataSource

__all__ = ["TopicsDataSource", "DataLossError", "SCHEMA_DDL", "use_this_python", "spark_session",
           "observe_loss"]


def observe_loss(df: Any, name: str = "topics_loss") -> Any:
    """Count tombstone rows and lost seqs as a Spark observed metric, then drop those rows.

    Use with includeTombstones=true and failOnDataLoss=false: every micro-batch's progress
    (`query.lastProgress.observedMetrics[name]`, a Row) then reports `gaps` and `lost_seqs`,
    and the rest of the pipeline sees records only.
    """
    from pyspark.sql import functions as F  # noqa: N812

    tomb = F.col("kind") == F.lit("tombstone")
    observed = df.observe(
        name,
        F.count(F.when(tomb, 1)).alias("gaps"),
        F.coalesce(F.sum(F.when(tomb, F.col("gap_to") - F.col("gap_from") + 1)), F.lit(0))
        .alias("lost_seqs"),
    )
    return observed.where(~tomb)
