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
    with pytest.raises(GqueryError, match="holds no lineitem"):
        tpch.find_lineitem(tmp_path / "empty")
    (tmp_path / "x.csv").write_text("a")
    with pytest.raises(GqueryError, match="not a lineitem file"):
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
        if timeout is None and "proc" not in seen:
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
