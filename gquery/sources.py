"""Where a table lies: one or more files of one format (tpch.find_lineitem says what a path holds),
and the name SQL calls it by."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

DEFAULT_TABLE = "lineitem"  # TPC-H's, and a table's made from arrays or an Arrow table without a name
SUFFIXES = (".parquet", ".tbl")


@dataclass(frozen=True)
class LineitemSource:
    """Where a table lies: one or more files of one format. `path` is what errors name."""

    path: Path
    format: str  # "parquet" or "tbl"
    files: tuple[Path, ...]

    def __str__(self) -> str:
        return str(self.path)

    @property
    def name(self) -> str:
        return table_name([self.path, *self.files])


def table_name(paths) -> str:
    """The name SQL calls a table of these files by: TPC-H's files (lineitem.parquet, lineitem.3.tbl, a
    folder lineitem/) are `lineitem`; one file is its stem (trips.parquet: trips); a folder of parts is
    the folder's name (trips/part-1.parquet: trips). The first path is the one the user named."""
    paths = [Path(p) for p in paths]
    if not paths:
        return DEFAULT_TABLE
    stems = {_stem(p.name) for p in paths if p.suffix in SUFFIXES}
    if stems and all(s == DEFAULT_TABLE or s.startswith(DEFAULT_TABLE + ".") for s in stems):
        return DEFAULT_TABLE
    first = paths[0]
    if any(c in first.name for c in "*?["):  # a glob: the folder its files are in
        first = first.parent
    if first.suffix in SUFFIXES or first.suffix == ".gq":
        return _stem(first.name)
    return first.name or DEFAULT_TABLE


def _stem(name: str) -> str:
    for suffix in (*SUFFIXES, ".gq"):
        name = name.removesuffix(suffix)
    return name


_WORD = re.compile(r"[^\W\d][\w$]*")  # a name written bare (letters of any script, as DuckDB's lexer takes them)
_QUOTED_NAME = re.compile(r'"((?:[^"]|"")*)"')


def named_columns(text: str, columns) -> list[str]:
    """The columns whose names the text holds, as words or quoted, in any case of their ASCII letters: a superset of
    those its query reads, found without parsing it (a name in a string literal is counted for nothing)."""
    words = {w.lower() for w in _WORD.findall(text)} | {q.replace('""', '"').lower() for q in _QUOTED_NAME.findall(text)}
    return [name for name in columns if name.lower() in words]


def quoted(name: str) -> str:
    """The name as a SQL identifier DuckDB reads back as the same name, whatever it holds (a keyword, a dash)."""
    return '"' + name.replace('"', '""') + '"'
