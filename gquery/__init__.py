"""gquery: a columnar GPU query engine for selection+aggregate SQL over TPC-H lineitem (the mission's
SELECT SUM(l_quantity*l_extendedprice) FROM lineitem WHERE l_suppkey < Z, Q6, Q1, a user's own),
exact and checked against DuckDB. Nothing here imports pycuda: see gquery.gpu."""

__version__ = "0.1.0"


def open(data, pinned=None):  # noqa: A001
    """gquery.open(path) → an opened table; table.sql(text) → Answer, table.query(z) → the mission's Answer. See gquery.api."""
    from gquery import api

    return api.open(data, pinned)
