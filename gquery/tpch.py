"""TPC-H lineitem on disk: generate it with tpchgen-cli (atomically) and find what a path holds.

Layout under the data folder (default ./dbgen_data, or $GQUERY_DATA_DIR):
    sf<SF>/lineitem.parquet                     one file, SF <= 10
    sf<SF>/lineitem.gq/part-<k>.gq              SF > 10 (ten SF per part) or --parts: the encoded store,
                                                generated and encoded part by part
    sf<SF>/lineitem/lineitem.<k>.parquet        those parts' parquet, where kept (--keep-parquet)
    sf<SF>/lineitem.tbl, sf<SF>/lineitem-tbl/lineitem.<k>.tbl   the same in dbgen's pipe format
Both formats of one SF coexist. Older versions put .tbl parts in lineitem/; they are still read, and
moved to lineitem-tbl/ when parquet parts need the folder.
A single file appears only by rename from a temporary folder, so its presence means it is complete.
Part by part, each part's store appears by rename and the store's manifest last: a store without a
manifest is a build in progress (its file GENERATING says in how many parts, and whether the
parquet is kept), resumed by a rerun.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import signal
import sys
import time
from pathlib import Path

from gquery.errors import GqueryError, UsageError
from gquery.sources import LineitemSource

SF_MIN, SF_MAX = 0.01, 1000.0
SF_PER_PART = 10  # above this, one parquet file of SF 10 (60M rows, ~2 GB) per part
FORMATS = ("parquet", "tbl")
PART_DIRS = {"parquet": "lineitem", "tbl": "lineitem-tbl"}
OLD_TBL_PART_DIR = "lineitem"  # before both formats could coexist
# Measured with tpchgen-cli 4.0 on a part of SF 1000, whose keys are the widest (278 MB parquet and
# 815 MB .tbl an SF; 201 and 742 at SF 0.1), plus a tenth for headroom.
BYTES_PER_SF = {"parquet": 306e6, "tbl": 897e6}
# The encoded store of every column, l_comment's strings held: 341.9 MB at SF 1 in 4 parts (each part keeps its own
# dictionaries; 329.7 MB in one), plus a tenth for SF 1000's wider keys and headroom
STORE_BYTES_PER_SF = 376e6
ORDERS_PER_SF = 1_500_000  # tpchgen-cli splits orders among parts: more parts than orders leaves some empty
GENERATING = "GENERATING"  # in a store being generated part by part: {"parts": N, "keep_parquet": bool}
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


def check_parts(parts: int, sf: float) -> int:
    """--parts: from 1 to the SF's orders (tpchgen-cli takes up to 2^31 - 1, but leaves parts past
    the orders empty)."""
    most = max(1, int(check_sf(sf) * ORDERS_PER_SF))
    if not (isinstance(parts, int) and 1 <= parts <= most):
        raise UsageError(f"--parts must be from 1 to {most:,} at SF {sf:g} (one order a part at least), got {parts}")
    return parts


def _is_tbl(p: Path) -> bool:
    return p.suffix == ".tbl" or ".tbl." in p.name


def find_lineitem(path: Path | str) -> LineitemSource:
    """What a path holds: a parquet or .tbl file, a folder of parts, a dataset folder sf<SF>, or a glob
    of files (data/*.parquet: the files it matches, of one format)."""
    path = Path(path)
    if not path.exists() and any(c in str(path) for c in "*?["):
        return _glob(path)
    if path.is_file():
        if path.suffix == ".parquet":
            return LineitemSource(path, "parquet", (path,))
        if _is_tbl(path):
            return LineitemSource(path, "tbl", (path,))
        raise GqueryError(f"{path}: not a table's file (expected .parquet or .tbl)")
    if not path.is_dir():
        raise GqueryError(f"{path}: no such file or folder" if not path.exists() else
                          f"{path}: not a table's file (expected .parquet or .tbl)")
    for name in ("lineitem.parquet", "lineitem.tbl", PART_DIRS["parquet"], PART_DIRS["tbl"]):
        if (path / name).exists():
            return find_lineitem(path / name)
    parquet = sorted(p for p in path.iterdir() if p.suffix == ".parquet" and p.is_file())
    tbl = sorted(p for p in path.iterdir() if _is_tbl(p) and p.is_file())
    if parquet and tbl:  # (which is the table is not the folder's to say)
        raise GqueryError(f"{path}: holds both .parquet and .tbl files: give one format's files, as a glob "
                          f"({path / '*.parquet'}) or a file")
    if parquet:
        return LineitemSource(path, "parquet", tuple(parquet))
    if tbl:
        return LineitemSource(path, "tbl", tuple(tbl))
    whole = _whole_store(path)  # a dataset generated part by part, its parquet deleted
    if whole is not None:
        return whole
    from gquery import store

    for unfinished in (path, path / store.STORE_NAME):
        settings = in_progress(unfinished)
        if settings is not None:
            raise GqueryError(f"{unfinished}: a store gquery generate has not finished ({settings['parts']} parts): "
                              "run that gquery generate again, and it goes on from the parts it wrote")
    raise GqueryError(f"{path}: holds no .parquet or .tbl files, nor a gquery store")


def _glob(pattern: Path) -> LineitemSource:
    import glob

    files = tuple(sorted(Path(f) for f in glob.glob(str(pattern)) if Path(f).is_file()))
    if not files:
        raise GqueryError(f"{pattern}: no file matches")
    kinds = {"tbl" if _is_tbl(f) else f.suffix.lstrip(".") for f in files}
    if kinds not in ({"parquet"}, {"tbl"}):
        raise GqueryError(f"{pattern}: matches {', '.join(sorted(kinds))} files; a table is parquet or .tbl files, of one format")
    return LineitemSource(pattern, kinds.pop(), files)


def dataset_dir(sf: float, data_dir: Path | str | None = None) -> Path:
    return Path(data_dir or default_data_dir()) / f"sf{sf_label(sf)}"


def _whole_store(folder: Path) -> LineitemSource | None:
    """The complete store in a dataset folder as a source (its path the store; its files the
    parquet it was built from where all are kept), or None."""
    from gquery import store

    path = folder / store.STORE_NAME
    return store.as_source(path) if store.is_store(path) else None


def in_progress(store_path: Path) -> dict | None:
    """The settings of a part-by-part generation in progress in this store folder, or None."""
    try:
        settings = json.loads((store_path / GENERATING).read_text())
        return {"parts": int(settings["parts"]), "keep_parquet": bool(settings["keep_parquet"])}
    except (OSError, ValueError, KeyError, TypeError):
        return None


def existing_dataset(sf: float, data_dir: Path | str | None = None, fmt: str = "parquet") -> LineitemSource | None:
    """The complete dataset of this SF and format, or None. An unreadable one is an error, not
    something to overwrite: it may be the user's own data. A complete store counts as the parquet
    dataset (its parquet may be deleted); where parts are generated (SF > 10) it comes first, and a
    build in progress means the parquet parts beside it are not all there."""
    root = dataset_dir(sf, data_dir)
    if fmt == "parquet" and parts_for(sf) > 1:
        from gquery.store import STORE_NAME

        whole = _whole_store(root)
        if whole is not None or in_progress(root / STORE_NAME) is not None:
            return whole
    if parts_for(sf) == 1:
        places = [root / f"lineitem.{fmt}"]
    else:
        places = [root / PART_DIRS[fmt]] + ([root / OLD_TBL_PART_DIR] if fmt == "tbl" else [])
    found = [find_lineitem(p) for p in places if p.is_dir() or p.is_file()]
    source = next((s for s in found if s.format == fmt), None)
    if source is None:
        return _whole_store(root) if fmt == "parquet" else None
    if fmt == "parquet":
        import pyarrow.parquet as pq

        for f in source.files:
            try:
                pq.read_metadata(f)
            except Exception as e:  # pyarrow raises several types for a bad footer
                raise GqueryError(f"{f}: unreadable parquet ({e}); delete it to generate it again") from None
    return source


def _part_count(source: LineitemSource) -> int:
    from gquery import store

    return store.part_count(source.path) if store.is_store(source.path) else len(source.files)


def tpchgen_binary() -> str:
    """tpchgen-cli from this Python's environment first, then PATH."""
    here = str(Path(sys.executable).parent)
    found = shutil.which("tpchgen-cli", path=here + os.pathsep + os.environ.get("PATH", ""))
    if not found:
        raise GqueryError("tpchgen-cli not found: install it with 'pip install tpchgen-cli'")
    return found


def _remove_stale_temps(root: Path, patterns=(".sf*.tmp-*",)) -> None:
    """Temporary files and folders (named ...-<pid>) of runs that were killed; a live run's are left alone."""
    for tmp in (t for pattern in patterns for t in root.glob(pattern)):
        try:
            pid = int(tmp.name.rsplit("-", 1)[1])
            os.kill(pid, 0)
        except (ValueError, ProcessLookupError):
            if tmp.is_dir():
                shutil.rmtree(tmp, ignore_errors=True)
            else:
                tmp.unlink(missing_ok=True)
        except PermissionError:
            pass


def _make_root(root: Path) -> None:
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise GqueryError(f"--data-dir {root}: cannot create the folder: {e.strerror}") from None
    if not root.is_dir():
        raise GqueryError(f"--data-dir {root}: not a folder")


def _check_free_space(needed: float, what: str, root: Path) -> None:
    free = shutil.disk_usage(root).free
    if needed > free:
        raise GqueryError(f"{what} needs {needed / 1e9:.1f} GB, {free / 1e9:.1f} GB free at {root}")


def _folder_bytes(folder: Path) -> int:
    total = 0
    for dirpath, _, names in os.walk(folder):
        for name in names:
            try:
                total += os.stat(os.path.join(dirpath, name)).st_size
            except OSError:  # a part tpchgen-cli is renaming
                pass
    return total


def _move_old_tbl_parts(final_dir: Path, echo) -> None:
    """Parquet parts go to lineitem/; an older version's .tbl parts there move to lineitem-tbl/."""
    target = final_dir / PART_DIRS["parquet"]
    if target.is_dir() and any(map(_is_tbl, target.iterdir())):
        if (final_dir / PART_DIRS["tbl"]).exists():
            raise GqueryError(f"{target}: holds .tbl parts and {final_dir / PART_DIRS['tbl']} exists too; "
                              "move one of them away")
        echo(f"moving the .tbl parts in {target} to {final_dir / PART_DIRS['tbl']}")
        os.replace(target, final_dir / PART_DIRS["tbl"])


def _wait(proc, tmp: Path, expected_bytes: float, bar: bool, echo) -> int:
    """tpchgen-cli's exit code (`proc`: its subprocess.Popen). Where it draws no bar (stderr is not a
    terminal), a line every few seconds says how much it has written."""
    import subprocess

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
    import subprocess  # (here, not at the module's import: opening a store finds its files with this module)

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


def generate(sf: float, data_dir: Path | str | None = None, *, fmt: str = "parquet", parts: int | None = None,
             keep_parquet: bool = False, progress: bool | None = None, echo=print, check: bool = False) -> LineitemSource:
    """Generate lineitem at this SF unless a complete dataset is there; return its source. Above
    SF 10, or with `parts`, parquet is generated part by part into the encoded store (see
    generate_parts); otherwise one tpchgen-cli run writes the file(s), renamed into place. `check`: a complete
    store generated part by part is read whole and its damaged parts generated again (mend_parts)."""
    sf = check_sf(sf)
    if fmt not in FORMATS:
        raise UsageError(f"format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    if parts is not None:
        check_parts(parts, sf)
    if fmt != "parquet" and (parts is not None or keep_parquet):
        raise UsageError("--parts and --keep-parquet generate parquet: leave out --format tbl")
    final_dir = dataset_dir(sf, data_dir)
    root = final_dir.parent
    if root.exists() and not root.is_dir():
        raise GqueryError(f"--data-dir {root}: not a folder")
    found = existing_dataset(sf, data_dir, fmt)
    if found is not None:
        if parts is not None and _part_count(found) != parts:
            echo(f"{found}: already generated, reused as it is (delete it to generate it in {parts} parts)")
        if check and fmt == "parquet":
            from gquery import store

            if Path(found.path) == final_dir / store.STORE_NAME and store.is_parted(found.path):
                return mend_parts(sf, final_dir, sys.stderr.isatty() if progress is None else progress, echo)
        return found
    _make_root(root)
    _remove_stale_temps(root)
    if progress is None:
        progress = sys.stderr.isatty()
    if fmt == "parquet":
        from gquery.store import STORE_NAME

        resumed = in_progress(final_dir / STORE_NAME) or {}  # a plain rerun goes on as the stopped run began
        if parts is not None or resumed or parts_for(sf) > 1:
            return generate_parts(sf, final_dir, parts or resumed.get("parts") or parts_for(sf),
                                  keep_parquet=keep_parquet or resumed.get("keep_parquet", False), progress=progress,
                                  echo=echo)
    _check_free_space(sf * BYTES_PER_SF[fmt], f"SF {sf:g} as {fmt}", root)
    parts = parts_for(sf)  # .tbl parts above SF 10, in one run
    final_name = PART_DIRS[fmt] if parts > 1 else f"lineitem.{fmt}"
    if parts > 1 and (final_dir / final_name).exists():
        raise GqueryError(f"{final_dir / final_name}: already exists and is not a {fmt} dataset; move it away")
    binary = tpchgen_binary()
    tmp = root / f".{final_dir.name}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    cmd = [binary, fmt, "-s", format(sf, "g"), "--tables", "lineitem", "-o", str(tmp)]
    if parts > 1:
        cmd += ["--parts", str(parts)]
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


def mend_parts(sf: float, final_dir: Path, progress: bool = False, echo=print) -> LineitemSource:
    """A complete store generated part by part, read whole: each part checked against its checksums (and, where
    its parquet is kept, built from that file: store.part_rows). Parts found damaged or missing are generated and
    written again, as a stopped generation resumes (generate_parts), its manifest written once they are whole;
    a store found whole is left as it is. tpchgen-cli writes a part as it wrote it first: the same rows."""
    from gquery import store

    path = final_dir / store.STORE_NAME
    parts = store.part_count(path)
    kept = [final_dir / PART_DIRS["parquet"] / f"lineitem.{k}.parquet" for k in range(1, parts + 1)]
    keep_parquet = all(f.is_file() for f in kept)
    done = {k: n for k, f in enumerate(kept, start=1)
            if (n := store.part_rows(path, k, f if keep_parquet else None, echo)) is not None}
    if len(done) == parts:
        echo(f"{path}: every part read and checked, whole ({sum(done.values()):,} rows)")
        return store.as_source(path)
    _mark_generating(path, parts, keep_parquet)
    (path / "manifest.json").unlink(missing_ok=True)  # (no store until its parts are whole again)
    return generate_parts(sf, final_dir, parts, keep_parquet=keep_parquet, progress=progress, echo=echo, checked=done)


def _mark_generating(path: Path, parts: int, keep_parquet: bool) -> None:
    """The store folder marked a generation in progress (in_progress reads it): a rerun resumes it."""
    path.mkdir(parents=True, exist_ok=True)
    marker = path / f".{GENERATING}.tmp-{os.getpid()}"
    marker.write_text(json.dumps({"parts": parts, "keep_parquet": keep_parquet}) + "\n")
    os.replace(marker, path / GENERATING)


def generate_parts(sf: float, final_dir: Path, parts: int, *, keep_parquet: bool = False, progress: bool = False,
                   echo=print, checked: dict | None = None) -> LineitemSource:
    """lineitem as a parted store (final_dir/lineitem.gq), one tpchgen-cli part at a time: each part
    generated, encoded, verified and written atomically, and its parquet deleted
    (or, with keep_parquet, moved into lineitem/ first) before the next starts, so the disk holds
    the store and one part's parquet, and memory one part. Parts already whole are kept: a rerun
    does only what is missing (`checked`: the parts already found whole, and their rows; mend_parts'). Returns the
    store as a source (store.as_source)."""
    from gquery import store

    root = final_dir.parent
    path = final_dir / store.STORE_NAME
    kept = final_dir / PART_DIRS["parquet"]
    kept_file = lambda k: kept / f"lineitem.{k}.parquet"  # noqa: E731
    building = in_progress(path)
    if building is not None and building["parts"] != parts:
        raise GqueryError(f"{path}: holds an interrupted generation in {building['parts']} parts; give --parts "
                          f"{building['parts']} to resume it, or delete the folder")
    if path.exists() and building is None:
        raise GqueryError(f"{path}: exists and is not a complete store or a generation of one; move it away")
    if path.is_dir():
        _remove_stale_temps(path, (".*.tmp-*", ".*.old-*"))
    # a part kept as parquet counts only where its store was built from that file
    done = checked if checked is not None else {
        k: n for k in range(1, parts + 1)
        if (n := store.part_rows(path, k, kept_file(k) if keep_parquet else None, echo)) is not None}
    todo = [k for k in range(1, parts + 1) if k not in done]
    fresh = sum(not kept_file(k).is_file() for k in todo)  # parts tpchgen-cli must write
    part_sf = sf / parts
    store_bytes = len(todo) * part_sf * STORE_BYTES_PER_SF
    parquet_bytes = (fresh if keep_parquet else min(fresh, 1)) * part_sf * BYTES_PER_SF["parquet"]
    _check_free_space(store_bytes + parquet_bytes, f"SF {sf:g} in {parts} parts ({len(todo)} to encode: "
                      f"store {store_bytes / 1e9:.1f} GB, parquet {parquet_bytes / 1e9:.1f} GB)", root)
    binary = tpchgen_binary()
    _mark_generating(path, parts, keep_parquet)
    if keep_parquet:
        _move_old_tbl_parts(final_dir, echo)
    echo(f"generating TPC-H lineitem SF {sf:g} part by part ({parts} part{'s' * (parts > 1)} of SF {part_sf:g}; "
         f"parquet {f'kept in {kept}' if keep_parquet else 'deleted once encoded'}) into {path}")
    rows = sum(done.values())
    if done:
        echo(f"{len(done)} of {parts} parts already encoded ({rows:,} rows); resuming")
    tmp = root / f".{final_dir.name}.tmp-{os.getpid()}"
    try:
        for k in todo:
            started = time.perf_counter()
            f = kept_file(k)
            if not f.is_file():
                f = _generate_part(binary, sf, parts, k, tmp, progress, echo)
                if keep_parquet:
                    kept.mkdir(exist_ok=True)
                    os.replace(f, kept_file(k))  # atomic: a kept part is whole; its store names this path
                    f = kept_file(k)
            rows += store.write_part(path, k, parts, LineitemSource(f, "parquet", (f,)), record_source=f.parent == kept,
                                     rows_before=rows, started=started, echo=echo)
            if f.parent != kept:
                f.unlink()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    store.finish_parted(path, parts, echo=echo)
    (path / GENERATING).unlink(missing_ok=True)
    return store.as_source(path)


def _generate_part(binary: str, sf: float, parts: int, k: int, tmp: Path, progress: bool, echo) -> Path:
    """Part k of `parts` as parquet, in the temporary folder."""
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    cmd = [binary, "parquet", "-s", format(sf, "g"), "--tables", "lineitem", "--parts", str(parts), "--part", str(k),
           "-o", str(tmp)]
    _run_tpchgen(cmd, tmp, sf / parts * BYTES_PER_SF["parquet"], progress, echo, f"part {k} of SF {sf:g}")
    produced = tmp / PART_DIRS["parquet"] / f"lineitem.{k}.parquet"
    if not produced.is_file():
        raise GqueryError(f"tpchgen-cli wrote no {produced.name} for SF {sf:g}")
    return produced
