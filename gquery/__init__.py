"""gquery: a columnar GPU query engine for SELECT SUM(l_quantity*l_extendedprice) FROM lineitem
WHERE l_suppkey < Z, validated against DuckDB. Nothing here imports pycuda: see gquery.gpu."""

__version__ = "0.1.0"
