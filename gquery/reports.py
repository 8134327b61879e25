"""Benchmark reports: reports/<name>-<gpu>.json and .md, each naming the device and the commit."""

from __future__ import annotations

import datetime
import json
import os
import re
import subprocess
from pathlib import Path

from gquery.errors import GqueryError
from gquery.timing import median_host_ms


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


def host_speed(runs: int = 9) -> dict:
    """The host's time for one fixed piece of work, the median of `runs`: Python's (a dict, a list and a sum
    over 20,000 integers) and NumPy's (200 rounds of small-array calls, as a plan makes them). A query's host
    time beyond the GPU is work of both kinds: reports from other hosts, or from one busy otherwise, are read
    beside these (the same commit has met 93 and 107 floors on two H100 hosts)."""
    import numpy as np

    keys = np.arange(0, 60_000, 3, dtype=np.int64)

    def python() -> int:
        d = {i: 3 * i for i in range(20_000)}
        return sum(d[i] for i in range(0, 20_000, 3)) + len([str(i) for i in range(5_000)])

    def numpy() -> int:
        total = 0
        for k in range(200):
            total += int(np.searchsorted(keys, 97 * k)) + int(np.cumsum(keys[k:k + 64])[-1]) + int((keys[:256] < k).sum())
        return total

    return {"python_ms": median_host_ms(python, runs), "numpy_ms": median_host_ms(numpy, runs)}


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
    except OSError as e:  # (said of the file asked for, not of its temporary name)
        raise GqueryError(f"{path}: cannot be written ({e.strerror or e})") from None
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
