"""TPC-H lineitem on disk: generate it with tpchgen-cli (atomically) and find what a path holds.

Layout under the data folder (default ./dbgen_data, or $GQUERY_DATA_DIR):
    sf<SF>/lineitem.parquet                     one file, SF <= 10
    sf<SF>/lineitem/lineitem.<k>.parquet        parts, SF > 10 (ten SF per part)
    sf<SF>/lineitem.tbl, sf<SF>/lineitem-tbl/lineitem.<k>.tbl   the same in dbgen's pipe format
Both formats of one SF coexist. Older versions put .tbl parts in lineitem/; they are still read, and
moved to lineitem-tbl/ when parquet parts need the folder.
A dataset appears only by rename from a temporary folder, so its presence means it is complete.
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from gquery.errors import GqueryError, UsageError

SF_MIN, SF_MAX = 0.01, 1000.0
SF_PER_PART = 10  # above this, one parquet file of SF 10 (60M rows, ~2 GB) per part
FORMATS = ("parquet", "tbl")
PART_DIRS = {"parquet": "lineitem", "tbl": "lineitem-tbl"}
OLD_TBL_PART_DIR = "lineitem"  # before both formats could coexist
# Measured with tpchgen-cli 4.0 on a part of SF 1000, whose keys are the widest (278 MB parquet and
# 815 MB .tbl an SF; 201 and 742 at SF 0.1), plus a tenth for headroom.
BYTES_PER_SF = {"parquet": 306e6, "tbl": 897e6}
PROGRESS_SECONDS = 5  # how often a line of progress is printed where tpchgen-cli draws no bar
STOP_SIGNALS = {signal.SIGINT, signal.SIGTERM}  # raised as errors.Stopped by the CLI


def default_data_dir() -> Path:
    return Path(os.environ.get("GQUERY_DATA_DIR", "dbgen_data"))


def check_sf(sf: float) -> float:
    if not (isinstance(sf, (int, float)) and math.isfinite(sf) and SF_MIN <= sf <= SF_MAX):
        raise UsageError(f"scale factor must be a number from {SF_MIN:g} to {SF_MAX:g}, got {sf!r}")
    return float(sf)


def sf_label(sf: float) -> str:
    """'0.01', '1', '10', '1000': the folder name's suffix, the same for 10 and 10.0."""
    return format(check_sf(sf), "g")


def parts_for(sf: float) -> int:
    return max(1, math.ceil(sf / SF_PER_PART)) if sf > SF_PER_PART else 1


@dataclass(frozen=True)
class LineitemSource:
    """Where lineitem lies: one or more files of one format. `path` is what errors name."""

    path: Path
    format: str  # "parquet" or "tbl"
    files: tuple[Path, ...]

    def __str__(self) -> str:
        return str(self.path)


def _is_tbl(p: Path) -> bool:
    return p.suffix == ".tbl" or ".tbl." in p.name


def find_lineitem(path: Path | str) -> LineitemSource:
    """What a path holds: a parquet or .tbl file, a folder of parts, or a dataset folder sf<SF>."""
    path = Path(path)
    if path.is_file():
        if path.suffix == ".parquet":
            return LineitemSource(path, "parquet", (path,))
        if _is_tbl(path):
            return LineitemSource(path, "tbl", (path,))
        raise GqueryError(f"{path}: not a lineitem file (expected .parquet or .tbl)")
    if not path.is_dir():
        raise GqueryError(f"{path}: no such file or folder")
    for name in ("lineitem.parquet", "lineitem.tbl", PART_DIRS["parquet"], PART_DIRS["tbl"]):
        if (path / name).exists():
            return find_lineitem(path / name)
    parquet = sorted(p for p in path.iterdir() if p.suffix == ".parquet" and p.is_file())
    if parquet:
        return LineitemSource(path, "parquet", tuple(parquet))
    tbl = sorted(p for p in path.iterdir() if _is_tbl(p) and p.is_file())
    if tbl:
        return LineitemSource(path, "tbl", tuple(tbl))
    raise GqueryError(f"{path}: holds no lineitem .parquet or .tbl files")


def dataset_dir(sf: float, data_dir: Path | str | None = None) -> Path:
    return Path(data_dir or default_data_dir()) / f"sf{sf_label(sf)}"


def existing_dataset(sf: float, data_dir: Path | str | None = None, fmt: str = "parquet") -> LineitemSource | None:
    """The complete dataset of this SF and format, or None. An unreadable one is an error, not
    something to overwrite: it may be the user's own data."""
    root = dataset_dir(sf, data_dir)
    if parts_for(sf) == 1:
        places = [root / f"lineitem.{fmt}"]
    else:
        places = [root / PART_DIRS[fmt]] + ([root / OLD_TBL_PART_DIR] if fmt == "tbl" else [])
    found = [find_lineitem(p) for p in places if p.is_dir() or p.is_file()]
    source = next((s for s in found if s.format == fmt), None)
    if source is None:
        return None
    if fmt == "parquet":
        import pyarrow.parquet as pq

        for f in source.files:
            try:
                pq.read_metadata(f)
            except Exception as e:  # pyarrow raises several types for a bad footer
                raise GqueryError(f"{f}: unreadable parquet ({e}); delete it to generate it again") from None
    return source


def tpchgen_binary() -> str:
    """tpchgen-cli from this Python's environment first, then PATH."""
    here = str(Path(sys.executable).parent)
    found = shutil.which("tpchgen-cli", path=here + os.pathsep + os.environ.get("PATH", ""))
    if not found:
        raise GqueryError("tpchgen-cli not found: install it with 'pip install tpchgen-cli'")
    return found


def _remove_stale_temps(root: Path) -> None:
    """Temporary folders of runs that were killed; a live run's folder is left alone."""
    for tmp in root.glob(".sf*.tmp-*"):
        try:
            pid = int(tmp.name.rsplit("-", 1)[1])
            os.kill(pid, 0)
        except (ValueError, ProcessLookupError):
            shutil.rmtree(tmp, ignore_errors=True)
        except PermissionError:
            pass


def _make_root(root: Path) -> None:
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise GqueryError(f"--data-dir {root}: cannot create the folder: {e.strerror}") from None
    if not root.is_dir():
        raise GqueryError(f"--data-dir {root}: not a folder")


def _check_free_space(sf: float, fmt: str, root: Path) -> None:
    needed = sf * BYTES_PER_SF[fmt]
    free = shutil.disk_usage(root).free
    if needed > free:
        raise GqueryError(f"SF {sf:g} as {fmt} needs {needed / 1e9:.1f} GB, {free / 1e9:.1f} GB free at {root}")


def _folder_bytes(folder: Path) -> int:
    total = 0
    for dirpath, _, names in os.walk(folder):
        for name in names:
            try:
                total += os.stat(os.path.join(dirpath, name)).st_size
            except OSError:  # a part tpchgen-cli is renaming
                pass
    return total


def _free_part_dir(final_dir: Path, fmt: str, echo) -> None:
    """Parquet parts go to lineitem/; an older version's .tbl parts there move to lineitem-tbl/."""
    target = final_dir / PART_DIRS[fmt]
    if fmt == "parquet" and target.is_dir() and find_lineitem(target).format == "tbl":
        if (final_dir / PART_DIRS["tbl"]).exists():
            raise GqueryError(f"{target}: holds .tbl parts and {final_dir / PART_DIRS['tbl']} exists too; "
                              "move one of them away")
        echo(f"moving the .tbl parts in {target} to {final_dir / PART_DIRS['tbl']}")
        os.replace(target, final_dir / PART_DIRS["tbl"])
    if target.exists():
        raise GqueryError(f"{target}: already exists and is not a {fmt} dataset; move it away")


def _wait(proc: subprocess.Popen, tmp: Path, expected_bytes: float, bar: bool, echo) -> int:
    """tpchgen-cli's exit code. Where it draws no bar (stderr is not a terminal), a line every few
    seconds says how much it has written."""
    while True:
        try:
            rc = proc.wait(timeout=PROGRESS_SECONDS)
            break
        except subprocess.TimeoutExpired:
            if not bar:
                written = _folder_bytes(tmp)
                echo(f"generating: {written / 1e9:.2f} GB written of about {expected_bytes / 1e9:.2f} GB")
    if bar:
        print(file=sys.stderr, flush=True)  # tpchgen-cli's last bar ends without a newline
    return rc


def _run_tpchgen(cmd: list[str], tmp: Path, expected_bytes: float, progress: bool, echo, what: str) -> None:
    """tpchgen-cli to its end; on any exit from here (an error, Ctrl-C, SIGTERM as errors.Stopped)
    no generator outlives us."""
    proc = None
    try:
        # the signals wait until `proc` is set: raised inside Popen, they would orphan the generator
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
        try:
            # tpchgen-cli draws its own progress bars on a terminal; its errors go to our stderr.
            proc = subprocess.Popen(cmd + ([] if progress else ["--no-progress"]), stdout=subprocess.DEVNULL,
                                    preexec_fn=lambda: signal.pthread_sigmask(signal.SIG_SETMASK, mask))
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        rc = _wait(proc, tmp, expected_bytes, progress, echo)
        if rc != 0:
            raise GqueryError(f"tpchgen-cli failed (exit {rc}) generating {what}")
    except BaseException:
        if proc is not None and proc.returncode is None:
            # not proc.kill() and wait(): a signal raised inside Popen.wait can leave its lock held
            with contextlib.suppress(OSError):
                os.kill(proc.pid, signal.SIGKILL)
                os.waitpid(proc.pid, 0)
        raise


def generate(sf: float, data_dir: Path | str | None = None, *, fmt: str = "parquet",
             progress: bool | None = None, echo=print) -> LineitemSource:
    """Generate lineitem at this SF unless a complete dataset is there; return its source."""
    sf = check_sf(sf)
    if fmt not in FORMATS:
        raise UsageError(f"format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    final_dir = dataset_dir(sf, data_dir)
    root = final_dir.parent
    if root.exists() and not root.is_dir():
        raise GqueryError(f"--data-dir {root}: not a folder")
    found = existing_dataset(sf, data_dir, fmt)
    if found is not None:
        return found
    _make_root(root)
    _remove_stale_temps(root)
    _check_free_space(sf, fmt, root)
    parts = parts_for(sf)
    final_name = PART_DIRS[fmt] if parts > 1 else f"lineitem.{fmt}"
    if final_dir.is_dir() and parts > 1:
        _free_part_dir(final_dir, fmt, echo)
    binary = tpchgen_binary()
    tmp = root / f".{final_dir.name}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    cmd = [binary, fmt, "-s", format(sf, "g"), "--tables", "lineitem", "-o", str(tmp)]
    if parts > 1:
        cmd += ["--parts", str(parts)]
    if progress is None:
        progress = sys.stderr.isatty()
    echo(f"generating TPC-H lineitem SF {sf:g} ({fmt}, {parts} part{'s' * (parts > 1)}) into {final_dir}")
    try:
        _run_tpchgen(cmd, tmp, sf * BYTES_PER_SF[fmt], progress, echo, f"SF {sf:g}")
        produced = tmp / ("lineitem" if parts > 1 else f"lineitem.{fmt}")
        if not produced.exists():
            raise GqueryError(f"tpchgen-cli wrote no {produced.name} for SF {sf:g}")
        final_dir.mkdir(exist_ok=True)
        os.replace(produced, final_dir / final_name)  # the one step that makes it visible
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return find_lineitem(final_dir / final_name)
