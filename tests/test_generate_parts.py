"""Part-by-part generation (issue #9): above SF 10, or with --parts, `gquery generate` writes the
encoded store one tpchgen-cli part at a time, deleting (or keeping) each part's parquet, so disk and
memory hold the store and one part. Tiny SFs in 2 or 3 parts stand in for SF 1000 in 100."""

import re
import shutil
import signal
import subprocess
import sys
import time

import pyarrow.parquet as pq
import pytest

from conftest import gquery
from gquery import answer, sql, store, tpch
from gquery.errors import GqueryError, Stopped
from gquery.reference import DuckDBTable
from test_bad_inputs import alive, one_error, stopped_generation
from test_tpch import copying_generator, shutil_usage

SF, PARTS = 0.03, 3
ZS = (1, 30, 150, 10**9)  # SF 0.03 has 300 suppliers: nothing, a few, half, everything
PROGRESS = re.compile(r"^part (\d+)/(\d+): ([\d,]+) rows encoded \([\d.,]+ [MG]B store\) in [\d.]+ s; ([\d,]+) rows so far$")


def quiet(message):
    pass


def rows_of(source) -> int:
    return sum(pq.read_metadata(f).num_rows for f in source.files)


def duckdb(source, z):
    ref = DuckDBTable(source, ["l_suppkey", "l_quantity", "l_extendedprice"])
    try:
        return ref.run_sql(sql.named_sql("mission", z), repeat=1, warmup=0).rows[0][0]
    finally:
        ref.close()


def cpu_mission(table, z):
    """The mission's SQL at Z through the CPU reference over a (parted) store: its one value."""
    return answer.cpu_answer(sql.parse(sql.named_sql("mission", z), answer.schema_of(table)), table).rows[0][0]


def no_temps(data) -> bool:
    return not list(data.glob(".sf*")) and not list(data.glob("sf*/lineitem.gq/.*"))


@pytest.fixture(scope="module")
def single(tmp_path_factory):
    """SF 0.03 in one file, generated as before parts: what the parts must add up to."""
    return tpch.generate(SF, tmp_path_factory.mktemp("single"), echo=quiet)


@pytest.fixture(scope="module")
def kept(tmp_path_factory):
    data = tmp_path_factory.mktemp("kept")
    r = gquery("generate", "--sf", SF, "--parts", PARTS, "--keep-parquet", "--data-dir", data)
    assert r.returncode == 0, r.stderr
    return data, r


def test_parts_add_up_to_the_single_file_and_answer_as_duckdb(kept, single):
    data, r = kept
    path = data / "sf0.03" / "lineitem.gq"
    progress = [m.groups() for m in map(PROGRESS.match, r.stderr.splitlines()) if m]
    assert [(k, n) for k, n, _, _ in progress] == [(str(k), "3") for k in (1, 2, 3)], r.stderr
    files = tuple(data / "sf0.03" / "lineitem" / f"lineitem.{k}.parquet" for k in (1, 2, 3))
    assert store.as_source(path).files == files and "3 parquet files in" in r.stdout
    table = store.open_store(path)
    assert table.parts == PARTS and table.rows == rows_of(single) == int(progress[-1][3].replace(",", ""))
    for k, f in enumerate(files, start=1):  # each part's store names its kept file: staleness is checked there
        assert store.source_files(store.part_path(path, k)) == [f.resolve()]
        assert table.part_rows[k - 1] == pq.read_metadata(f).num_rows
    for z in ZS:
        assert cpu_mission(table, z) == duckdb(single, z) == duckdb(store.as_source(path), z)
    assert no_temps(data) and not (path / tpch.GENERATING).exists()


def test_a_kept_dataset_is_found_not_generated_again(kept, monkeypatch):
    data, _ = kept
    monkeypatch.setattr(tpch, "tpchgen_binary", lambda: pytest.fail("a complete store must be reused"))
    whole = store.as_source(data / "sf0.03" / "lineitem.gq")
    notes = []
    assert tpch.generate(SF, data, echo=notes.append) == whole == tpch.existing_dataset(SF, data)
    assert tpch.generate(SF, data, parts=2, echo=notes.append) == whole
    assert notes == [f"{whole}: already generated, reused as it is (delete it to generate it in 2 parts)"]


def stalling_generator(tmp_path):
    """tpchgen-cli for part 1; for any later part, a generator that says its pid and never ends."""
    script, pid_file = tmp_path / "stalling-tpchgen", tmp_path / "stalled.pid"
    script.write_text("#!/bin/bash\n"
                      'part=""; for a in "$@"; do [ "$prev" = --part ] && part=$a; prev=$a; done\n'
                      f'[ "$part" = 1 ] && exec {tpch.tpchgen_binary()} "$@"\n'
                      f"echo $$ > {pid_file}\n"
                      "exec sleep 60\n")
    script.chmod(0o755)
    return script, pid_file


def test_stopped_then_resumed_keeps_finished_parts_and_deletes_parquet(tmp_path, single):
    script, pid_file = stalling_generator(tmp_path)
    data = tmp_path / "data"
    path = data / "sf0.03" / "lineitem.gq"
    cli = f"from gquery import cli, tpch; tpch.tpchgen_binary = lambda: {str(script)!r}; cli.main()"
    proc = subprocess.Popen([sys.executable, "-c", cli, "generate", "--sf", str(SF), "--parts", str(PARTS),
                             "--data-dir", str(data)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not (pid_file.exists() and pid_file.read_text().strip()) and time.monotonic() < deadline:
        time.sleep(0.02)
    first = store.part_path(path, 1)
    before = (first.stat().st_ino, first.stat().st_mtime_ns, (first / "manifest.json").stat().st_mtime_ns)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 143 and err.splitlines()[-1] == "gquery: terminated" and "Traceback" not in err, err
    assert not alive(int(pid_file.read_text())), "tpchgen-cli outlived gquery"
    assert not store.is_store(path) and not store.part_path(path, 2).exists() and no_temps(data)
    assert tpch.existing_dataset(SF, data) is None and tpch.in_progress(path) == {"parts": 3, "keep_parquet": False}
    for asked in (path, path.parent):  # the unfinished store, or its dataset's folder, asked as data
        said = one_error(gquery("run", "--data", asked, "--z", "30", "--backend", "cpu"), 1)
        assert said == (f"gquery: error: {path}: a store gquery generate has not finished (3 parts): run that gquery "
                        "generate again, and it goes on from the parts it wrote")

    r = gquery("generate", "--sf", SF, "--data-dir", data)  # no --parts: the interrupted build says 3
    assert r.returncode == 0, r.stderr
    assert "1 of 3 parts already encoded" in r.stderr and "part 1/3:" not in r.stderr and "part 3/3:" in r.stderr
    assert (first.stat().st_ino, first.stat().st_mtime_ns, (first / "manifest.json").stat().st_mtime_ns) == before
    table = store.open_store(path)
    assert table.parts == PARTS and table.rows == rows_of(single)
    assert cpu_mission(table, 150) == duckdb(single, 150)
    assert not (path.parent / "lineitem").exists() and no_temps(data) and "no parquet kept" in r.stdout
    assert tpch.existing_dataset(SF, data) == store.as_source(path) and store.as_source(path).files == ()


@pytest.mark.parametrize("signum,code,line", [(signal.SIGTERM, 143, "gquery: terminated"),
                                              (signal.SIGINT, 130, "gquery: interrupted")], ids=["SIGTERM", "SIGINT"])
def test_signal_during_a_part_ends_the_generator_and_leaves_no_part(tmp_path, signum, code, line):
    data = tmp_path / "data"
    rc, err = stopped_generation(tmp_path, signum, "--sf", "0.02", "--parts", "2", "--data-dir", str(data))
    assert rc == code and err.splitlines()[-1] == line and "Traceback" not in err, err
    path = data / "sf0.02" / "lineitem.gq"
    assert no_temps(data) and not list(path.glob("part-*")) and not store.is_store(path)


def test_free_space_is_checked_before_any_part(tmp_path, monkeypatch):
    monkeypatch.setattr(tpch, "tpchgen_binary", lambda: pytest.fail("must not start without the space"))
    monkeypatch.setattr(tpch.shutil, "disk_usage", lambda p: shutil_usage(free=10**9))
    with pytest.raises(GqueryError, match=r"^SF 1000 in 100 parts \(100 to encode: store 376\.0 GB, parquet 3\.1 GB\) "
                                          r"needs 379\.1 GB, 1\.0 GB free at "):
        tpch.generate(1000, tmp_path, echo=quiet)
    with pytest.raises(GqueryError, match=r"parquet 306\.0 GB\) needs 682\.0 GB"):
        tpch.generate(1000, tmp_path, keep_parquet=True, echo=quiet)
    assert list(tmp_path.iterdir()) == []


def test_a_plain_rerun_goes_on_as_the_stopped_run_began(tmp_path, monkeypatch):
    monkeypatch.setattr(tpch, "tpchgen_binary", lambda: copying_generator(tmp_path))
    write_part, data = store.write_part, tmp_path / "data"

    def stopped_at_part_2(path, part, *args, **kwargs):
        if part == 2:
            raise Stopped(signal.SIGTERM)
        return write_part(path, part, *args, **kwargs)

    monkeypatch.setattr(store, "write_part", stopped_at_part_2)
    with pytest.raises(Stopped):
        tpch.generate(10.01, data, keep_parquet=True, echo=quiet)
    monkeypatch.setattr(store, "write_part", write_part)
    with pytest.raises(GqueryError, match=r"interrupted generation in 2 parts; give --parts 2 to resume it"):
        tpch.generate(10.01, data, parts=3, echo=quiet)
    notes = []
    source = tpch.generate(10.01, data, echo=notes.append)  # part 2's parquet was kept before it stopped
    assert "1 of 2 parts already encoded (1 rows); resuming" in notes and len(source.files) == 2
    assert not (source.path / tpch.GENERATING).exists() and tpch.existing_dataset(10.01, data) == source


def test_above_sf_10_parts_are_the_default_and_deleted(tmp_path, monkeypatch):
    monkeypatch.setattr(tpch, "tpchgen_binary", lambda: copying_generator(tmp_path))
    notes = []
    source = tpch.generate(10.01, tmp_path / "data", echo=notes.append)
    assert source.path == tmp_path / "data" / "sf10.01" / "lineitem.gq" and source.files == ()
    assert store.part_count(source.path) == 2 and [n for n in notes if n.startswith("part ")][-1].startswith("part 2/2")
    assert sorted(p.name for p in source.path.parent.iterdir()) == ["lineitem.gq"]


@pytest.mark.parametrize("args,message", [
    (["--parts", "0"], "--parts must be from 1 to 45,000 at SF 0.03"),
    (["--parts", "-3"], "--parts must be from 1 to 45,000 at SF 0.03"),
    (["--parts", "45001"], "got 45001"),
    (["--parts", "x"], "Invalid value for '--parts'"),
    (["--parts", "2", "--format", "tbl"], "leave out --format tbl"),
], ids=["zero", "negative", "more than orders", "not a number", "tbl"])
def test_bad_parts_are_one_line_before_any_work(tmp_path, args, message):
    r = gquery("generate", "--sf", SF, *args, "--data-dir", tmp_path / "data")
    assert message in one_error(r, 2)
    assert not (tmp_path / "data").exists()


def test_encode_of_a_folder_of_parts_says_parts(kept, tmp_path):
    data, _ = kept
    parts = tmp_path / "parts"
    shutil.copytree(data / "sf0.03" / "lineitem", parts)
    r = gquery("encode", "--data", parts)
    assert r.returncode == 0, r.stderr
    assert "(3 parts, 180," in r.stdout and "part 3/3:" in r.stderr
    path = tmp_path / "parts.gq"  # beside the folder, named for it
    assert len(store.as_source(path).files) == 3
    (parts / "lineitem.2.parquet").unlink()  # DuckDB must not answer over some of the parts
    assert store.as_source(path).files == ()


def test_check_reads_a_generated_store_whole_and_generates_its_damaged_part_again(tmp_path, single):
    """A store generated part by part keeps no parquet to encode again: a damaged part is said in one line naming
    generate --check, which reads every part against its checksums and generates the damaged one again (the
    others kept as they are); a store found whole is left as it is."""
    data = tmp_path / "data"
    assert gquery("generate", "--sf", SF, "--parts", PARTS, "--data-dir", data).returncode == 0
    path = data / "sf0.03" / "lineitem.gq"
    first = store.part_path(path, 1) / "manifest.json"
    before = first.stat().st_mtime_ns
    words = store.part_path(path, 2) / "l_quantity.words.bin"
    damaged = bytearray(words.read_bytes())
    damaged[len(damaged) // 2] ^= 0xFF
    words.write_bytes(bytes(damaged))
    r = gquery("run", "--data", path, "--z", "150", "--backend", "cpu")
    assert "'gquery generate --sf SF --check' writes its damaged parts again" in one_error(r, 1)
    assert "part 2/3" not in gquery("generate", "--sf", SF, "--data-dir", data).stderr  # reused unread, as before
    r = gquery("generate", "--sf", SF, "--data-dir", data, "--check")
    assert r.returncode == 0, r.stderr
    assert "l_quantity.words.bin is corrupt (checksum); writing it again" in r.stderr
    assert "part 2/3:" in r.stderr and "part 1/3:" not in r.stderr and "part 3/3:" not in r.stderr
    assert first.stat().st_mtime_ns == before and not (path / tpch.GENERATING).exists() and no_temps(data)
    table = store.open_store(path)
    assert table.parts == PARTS and table.rows == rows_of(single)
    for z in ZS:
        assert cpu_mission(table, z) == duckdb(single, z)
    again = gquery("generate", "--sf", SF, "--data-dir", data, "--check")
    assert again.returncode == 0 and f"{path}: every part read and checked, whole ({rows_of(single):,} rows)" in again.stderr
