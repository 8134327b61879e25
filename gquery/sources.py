"""Where lineitem lies: one or more files of one format (tpch.find_lineitem says what a path holds)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class LineitemSource:
    """Where lineitem lies: one or more files of one format. `path` is what errors name."""

    path: Path
    format: str  # "parquet" or "tbl"
    files: tuple[Path, ...]

    def __str__(self) -> str:
        return str(self.path)
