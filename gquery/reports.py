"""Benchmark reports: reports/<name>-<gpu>.json and .md, each naming the device and the commit."""

from __future__ import annotations

import datetime
import json
import os
import re
import subprocess
from pathlib import Path


def slug(device_name: str) -> str:
    """'NVIDIA H100 80GB HBM3' → 'nvidia-h100-80gb-hbm3'."""
    return re.sub(r"[^a-z0-9]+", "-", device_name.lower()).strip("-")


def commit() -> str:
    """$GQUERY_COMMIT (set where the checkout travels without .git), else git's HEAD (+dirty)."""
    if os.environ.get("GQUERY_COMMIT"):
        return os.environ["GQUERY_COMMIT"]
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                               text=True, check=True).stdout.strip()
        return head + ("+dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def stamp() -> dict:
    return {"commit": commit(), "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}


def md_table(headers: list[str], rows: list[list]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join("" if c is None else str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def write_whole(path: Path, data: str | bytes) -> None:
    """The file whole or not at all: written beside it under a temporary name, then renamed over it."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_bytes(data.encode() if isinstance(data, str) else data)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write(directory: Path | str, name: str, data: dict, markdown: str) -> tuple[Path, Path]:
    """Write <name>.json and <name>.md into directory, each whole or not at all."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    j, m = directory / f"{name}.json", directory / f"{name}.md"
    write_whole(j, json.dumps(data, indent=2, default=str) + "\n")
    write_whole(m, markdown.rstrip() + "\n")
    return j, m
