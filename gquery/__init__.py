"""gquery: a columnar GPU query engine for selection+aggregate SQL over parquet or .tbl tables (TPC-H's
lineitem with the mission's SELECT SUM(l_quantity*l_extendedprice) FROM lineitem WHERE l_suppkey < Z,
Q6 and Q1, or a user's own), exact and checked against DuckDB. Nothing here imports pycuda: see gquery.gpu.

    import gquery
    t = gquery.open("dbgen_data/sf10")
    a = t.sql("SELECT COUNT(*) FROM lineitem")   # a.rows, a.fetchall(), a.arrow(), a.df(), a.to_json()

Every error a user can act on is a GqueryError (a one-line message): UsageError for a bad argument,
OutOfClass for SQL the engines do not answer, UnknownName for a column or table the data lacks."""

from gquery.errors import GqueryError, UsageError

__version__ = "0.1.0"
__all__ = ["open", "connect", "GqueryError", "UsageError", "OutOfClass", "UnknownName", "__version__"]
_SQL_ERRORS = ("OutOfClass", "UnknownName", "SqlSyntaxError")  # from gquery.sql, which imports sqlglot: on use


def open(data, pinned=None, name=None):  # noqa: A001
    """gquery.open(path) → an opened table, named as its files name it (trips.parquet: FROM trips) or
    `name`; table.sql(text) → Answer, table.query(z) → the mission's Answer. See gquery.api."""
    if pinned is None or pinned is True:  # the driver's start and GPU 0's context (a few hundred ms) from now,
        # on a thread of their own, while the engine's modules import (NumPy's among them)
        from gquery.gpu.warm import no_pycuda, warm_up

        if not no_pycuda():
            warm_up()
    from gquery import api

    return api.open(data, pinned, name=name)


def connect(data, name=None, **options):
    """A PEP 249 connection to the table at `data`: con.cursor().execute(sql, params).fetchall(). See gquery.dbapi."""
    from gquery import dbapi

    return dbapi.connect(data, name=name, **options)


def __getattr__(name: str):
    if name in _SQL_ERRORS:
        from gquery import sql

        return getattr(sql, name)
    raise AttributeError(f"module 'gquery' has no attribute {name!r}")
