"""Consumer lag per partition over time, from a query's recorded progress."""

# The import path users write, kept where the code moved: the code and its documentation are in
# pyspark_kafka_group.observability.lag_plot. tests/unit/test_public_api.py pins these names and their signatures.

from pyspark_kafka_group.observability.lag_plot import LagRow, lag_history, plot_lag

__all__ = ["LagRow", "lag_history", "plot_lag"]
