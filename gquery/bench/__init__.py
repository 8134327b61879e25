"""Benchmarks and their reports, above the engines they measure and never inside them: the class
against DuckDB (queries), the class at scale (scale), and the course's optimization ladder (ladder)."""
