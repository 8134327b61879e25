import stat
import subprocess
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from gquery import tpch
from gquery.errors import GqueryError, UsageError


@pytest.mark.parametrize("sf,label", [(0.01, "0.01"), (1, "1"), (1.0, "1"), (10, "10"), (1000, "1000"), (2.5, "2.5")])
def test_sf_label(sf, label):
    assert tpch.sf_label(sf) == label


@pytest.mark.parametrize("sf", [0, -1, 0.001, 1001, float("nan"), float("inf")])
def test_bad_sf(sf):
    with pytest.raises(UsageError):
        tpch.check_sf(sf)


def test_parts():
    assert [tpch.parts_for(sf) for sf in (0.01, 1, 10, 10.5, 100, 1000)] == [1, 1, 1, 2, 10, 100]


def test_generate_writes_and_reuses(sf001, data_dir, monkeypatch):
    assert sf001.format == "parquet" and sf001.files == (data_dir / "sf0.01" / "lineitem.parquet",)
    assert pq.read_metadata(sf001.files[0]).num_rows > 50_000
    monkeypatch.setattr(tpch, "tpchgen_binary", lambda: pytest.fail("a complete dataset must be reused"))
    assert tpch.generate(0.01, data_dir, echo=lambda m: None) == sf001
    assert not list(data_dir.glob(".sf*"))


def test_find_lineitem_kinds(sf001, sf001_tbl, tmp_path):
    assert tpch.find_lineitem(sf001.files[0].parent).format == "parquet"  # dataset folder prefers parquet
    assert tpch.find_lineitem(sf001_tbl.files[0]).format == "tbl"
    parts = tmp_path / "parts"
    parts.mkdir()
    for k in (1, 2):
        (parts / f"lineitem.tbl.{k}").write_text("")
    src = tpch.find_lineitem(parts)
    assert src.format == "tbl" and len(src.files) == 2
    with pytest.raises(GqueryError, match="no such file"):
        tpch.find_lineitem(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(GqueryError, match="holds no .parquet or .tbl files, nor a gquery store"):
        tpch.find_lineitem(tmp_path / "empty")
    (tmp_path / "x.csv").write_text("a")
    with pytest.raises(GqueryError, match="not a table.s file"):
        tpch.find_lineitem(tmp_path / "x.csv")


def fake_generator(tmp_path: Path, body: str) -> str:
    """A stand-in for tpchgen-cli that writes a partial file and then fails in the given way."""
    script = tmp_path / "fake-tpchgen"
    script.write_text("#!/bin/bash\n"
                      'out=""; while [ $# -gt 0 ]; do [ "$1" = -o ] && out=$2; shift; done\n'
                      'echo partial > "$out/lineitem.parquet"\n' + body + "\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return str(script)


@pytest.mark.parametrize("body", ["exit 3", "kill -9 $$"], ids=["fails", "killed"])
def test_interrupted_generation_leaves_nothing(tmp_path, monkeypatch, body):
    monkeypatch.setattr(tpch, "tpchgen_binary", lambda: fake_generator(tmp_path, body))
    with pytest.raises(GqueryError, match="tpchgen-cli failed"):
        tpch.generate(0.02, tmp_path / "data", echo=lambda m: None)
    assert tpch.existing_dataset(0.02, tmp_path / "data") is None
    assert not list((tmp_path / "data").glob(".sf*")), "temporary folder left behind"
    assert not (tmp_path / "data" / "sf0.02" / "lineitem.parquet").exists()


def test_ctrl_c_kills_generator_and_cleans_up(tmp_path, monkeypatch):
    monkeypatch.setattr(tpch, "tpchgen_binary", lambda: fake_generator(tmp_path, "sleep 60"))
    real_wait = subprocess.Popen.wait
    seen = {}

    def interrupted_wait(self, timeout=None):
        if "proc" not in seen:
            seen["proc"] = self
            try:
                real_wait(self, timeout=0.5)
            except subprocess.TimeoutExpired:
                pass
            raise KeyboardInterrupt
        return real_wait(self, timeout=timeout)

    monkeypatch.setattr(subprocess.Popen, "wait", interrupted_wait)
    with pytest.raises(KeyboardInterrupt):
        tpch.generate(0.02, tmp_path / "data", echo=lambda m: None)
    assert seen["proc"].poll() is not None, "the generator must not outlive the interruption"
    assert tpch.existing_dataset(0.02, tmp_path / "data") is None
    assert not list((tmp_path / "data").glob(".sf*"))


def test_stale_temp_of_dead_run_is_removed_not_reused(tmp_path, data_dir):
    root = tmp_path / "data"
    stale = root / ".sf0.01.tmp-999999999"
    stale.mkdir(parents=True)
    (stale / "lineitem.parquet").write_text("partial")
    assert tpch.existing_dataset(0.01, root) is None
    src = tpch.generate(0.01, root, echo=lambda m: None)
    assert not stale.exists()
    assert pq.read_metadata(src.files[0]).num_rows > 0


def test_corrupt_dataset_is_an_error_not_overwritten(tmp_path):
    final = tmp_path / "sf0.01" / "lineitem.parquet"
    final.parent.mkdir()
    final.write_bytes(b"not parquet")
    with pytest.raises(GqueryError, match="delete it"):
        tpch.generate(0.01, tmp_path, echo=lambda m: None)
    assert final.read_bytes() == b"not parquet"


def test_bad_format():
    with pytest.raises(UsageError):
        tpch.generate(0.01, "x", fmt="csv")


def tiny_lineitem(folder: Path) -> dict[str, Path]:
    """One row of lineitem in each format, for a fake generator to copy."""
    import pyarrow as pa
    from decimal import Decimal

    folder.mkdir(parents=True, exist_ok=True)
    dec = pa.decimal128(15, 2)
    pq.write_table(pa.table(dict(l_suppkey=pa.array([1], pa.int64()), l_quantity=pa.array([Decimal("1.00")], dec),
                                 l_extendedprice=pa.array([Decimal("2.00")], dec))), folder / "t.parquet")
    (folder / "t.tbl").write_text("1|2|1|4|1.00|2.00|0|0|N|O|1996-01-01|1996-01-01|1996-01-01|x|y|z|\n")
    return {"parquet": folder / "t.parquet", "tbl": folder / "t.tbl"}


def copying_generator(tmp_path: Path) -> str:
    """A stand-in for tpchgen-cli that writes tpchgen-cli's layout (a folder of parts with --parts,
    only part k with --part k)."""
    t = tiny_lineitem(tmp_path / "templates")
    script = tmp_path / "copying-tpchgen"
    script.write_text("#!/bin/bash\n"
                      'fmt=$1; out=""; parts=""; part=""\n'
                      'while [ $# -gt 0 ]; do [ "$1" = -o ] && out=$2; [ "$1" = --parts ] && parts=$2\n'
                      '  [ "$1" = --part ] && part=$2; shift; done\n'
                      f'src={t["parquet"]}; [ "$fmt" = tbl ] && src={t["tbl"]}\n'
                      'if [ -n "$parts" ]; then mkdir -p "$out/lineitem"\n'
                      '  for k in ${part:-$(seq 1 "$parts")}; do cp "$src" "$out/lineitem/lineitem.$k.$fmt"; done\n'
                      'else cp "$src" "$out/lineitem.$fmt"; fi\n')
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return str(script)


def test_both_formats_of_one_sf_above_10_coexist(tmp_path, monkeypatch):
    monkeypatch.setattr(tpch, "tpchgen_binary", lambda: copying_generator(tmp_path))
    data = tmp_path / "data"
    tbl = tpch.generate(10.01, data, fmt="tbl", echo=lambda m: None)
    parquet = tpch.generate(10.01, data, fmt="parquet", keep_parquet=True, echo=lambda m: None)
    assert (tbl.format, tbl.path.name, len(tbl.files)) == ("tbl", "lineitem-tbl", 2)
    assert (parquet.format, parquet.path.name, len(parquet.files)) == ("parquet", "lineitem.gq", 2)
    assert {f.parent.name for f in parquet.files} == {"lineitem"}
    monkeypatch.setattr(tpch, "tpchgen_binary", lambda: pytest.fail("a complete dataset must be reused"))
    assert tpch.generate(10.01, data, fmt="tbl", echo=lambda m: None) == tbl
    assert tpch.generate(10.01, data, fmt="parquet", echo=lambda m: None) == parquet


def test_old_tbl_parts_are_read_and_moved_not_lost(tmp_path, monkeypatch):
    monkeypatch.setattr(tpch, "tpchgen_binary", lambda: copying_generator(tmp_path))
    old = tmp_path / "data" / "sf10.01" / "lineitem"
    old.mkdir(parents=True)
    for k in (1, 2):
        (old / f"lineitem.{k}.tbl").write_text(tiny_lineitem(tmp_path / "t")["tbl"].read_text())
    assert tpch.existing_dataset(10.01, tmp_path / "data", "tbl").path == old
    assert tpch.existing_dataset(10.01, tmp_path / "data", "parquet") is None
    notes = []
    parquet = tpch.generate(10.01, tmp_path / "data", keep_parquet=True, echo=notes.append)
    assert parquet.format == "parquet" and {f.parent for f in parquet.files} == {old}
    moved = tpch.existing_dataset(10.01, tmp_path / "data", "tbl")
    assert moved.path.name == "lineitem-tbl" and len(moved.files) == 2 and any("moving" in n for n in notes)


def test_free_space_is_checked_before_generating(tmp_path, monkeypatch):
    monkeypatch.setattr(tpch, "tpchgen_binary", lambda: pytest.fail("must not start without the space"))
    monkeypatch.setattr(tpch.shutil, "disk_usage", lambda p: shutil_usage(free=10**9))
    with pytest.raises(GqueryError, match=r"SF 1000 as tbl needs 897\.0 GB, 1\.0 GB free at "):
        tpch.generate(1000, tmp_path, fmt="tbl", echo=lambda m: None)
    assert not list(tmp_path.glob(".sf*"))


def shutil_usage(free: int):
    import shutil

    return shutil._ntuple_diskusage(10 * free, 9 * free, free)


def test_progress_lines_where_no_bar_is_drawn(tmp_path, monkeypatch):
    script = tmp_path / "slow-tpchgen"
    script.write_text(f"#!/bin/bash\nsleep 0.6\nexec {copying_generator(tmp_path)} \"$@\"\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setattr(tpch, "tpchgen_binary", lambda: str(script))
    monkeypatch.setattr(tpch, "PROGRESS_SECONDS", 0.1)
    notes = []
    tpch.generate(0.02, tmp_path / "data", progress=False, echo=notes.append)
    assert sum("GB written of about" in n for n in notes) >= 2


@pytest.mark.parametrize("kind", ["file", "under-a-file"])
def test_data_dir_that_cannot_be_a_folder(tmp_path, kind):
    blocker = tmp_path / "f"
    blocker.write_text("x")
    data = blocker if kind == "file" else blocker / "sub"
    with pytest.raises(GqueryError, match="--data-dir"):
        tpch.generate(0.01, data, echo=lambda m: None)
