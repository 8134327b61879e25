"""Benchmarks and their reports, above the engines they measure and never inside them: the class
against DuckDB (queries), the class at scale (scale), the key-scan engine's modes and encodings
(keyscan) with CuPy's one-liner beside it (cupy_baseline)."""
