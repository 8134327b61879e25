"""gquery: a columnar GPU query engine for SELECT SUM(l_quantity*l_extendedprice) FROM lineitem
WHERE l_suppkey < Z, validated against DuckDB. Nothing here imports pycuda: see gquery.gpu."""

__version__ = "0.1.0"


def open(data, pinned=None):  # noqa: A001
    """gquery.open(path) → an opened table; table.query(z, mode=...) → Result. See gquery.api."""
    from gquery import api

    return api.open(data, pinned)
