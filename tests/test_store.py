"""The encoded store: written atomically, verified, and refused in one line when it is not whole."""

import json
import os
from pathlib import Path

import numpy as np
import pytest

from gquery import store
from gquery.columns import LineitemColumns
from gquery.table import Table


def columns(rows=5000, seed=3):
    rng = np.random.default_rng(seed)
    return LineitemColumns.from_values(rng.integers(1, 100_001, rows), rng.integers(1, 51, rows) * 100,
                                       rng.integers(90_000, 10_000_000, rows))


@pytest.fixture
def written(tmp_path):
    cols = columns()
    return cols, store.write_store(Table.from_columns(cols), tmp_path / "lineitem.gq", echo=lambda m: None)


def test_round_trip_keeps_every_value_and_statistic(written):
    cols, path = written
    t = store.open_store(path)
    assert t.rows == cols.rows and not t.pinned
    plain = t.plain_columns()
    for a, b in zip(plain.arrays(), cols.arrays()):
        assert np.array_equal(a, b)
    sliced = t.encoded("sliced")["l_suppkey"]
    assert int(sliced.histogram.sum()) == cols.rows
    assert "indexed" in t.columns["l_suppkey"].stored  # read from the store, not derived
    indexed = t.columns["l_suppkey"].get("indexed")
    assert np.array_equal(indexed.decode(), cols.suppkey) and np.array_equal(indexed.histogram, sliced.histogram)
    assert {k: t.largest[k] for k in ("l_quantity", "l_extendedprice")} == Table.from_columns(cols).largest
    assert not [p for p in path.parent.iterdir() if p.name.startswith(".")], "temporary folder left behind"


def test_failed_verification_leaves_nothing(tmp_path, monkeypatch):
    def bad(*args):
        raise store.StoreError("simulated mismatch")

    monkeypatch.setattr(store, "_verify_column", bad)
    with pytest.raises(store.StoreError, match="simulated"):
        store.write_store(Table.from_columns(columns()), tmp_path / "lineitem.gq", echo=lambda m: None)
    assert list(tmp_path.iterdir()) == []


def test_never_overwrites_what_is_not_a_store(tmp_path):
    (tmp_path / "lineitem.gq").mkdir()
    (tmp_path / "lineitem.gq" / "mine.txt").write_text("user data")
    with pytest.raises(store.StoreError, match="not a gquery store"):
        store.write_store(Table.from_columns(columns(100)), tmp_path / "lineitem.gq", echo=lambda m: None)
    assert (tmp_path / "lineitem.gq" / "mine.txt").read_text() == "user data"


def _one_buffer(path):
    return sorted(path.glob("*.bin"), key=lambda p: p.stat().st_size)[-1]


@pytest.mark.parametrize("damage,message", [
    (lambda p: _one_buffer(p).write_bytes(_one_buffer(p).read_bytes()[:-8]), "truncated"),
    (lambda p: _flip(_one_buffer(p)), "corrupt"),
    (lambda p: _one_buffer(p).unlink(), "missing"),
    (lambda p: (p / "manifest.json").write_text("{not json"), "unreadable manifest"),
    (lambda p: _edit(p, version=99), "version"),
    (lambda p: _edit(p, format="other"), "not a gquery store"),
    (lambda p: _edit(p, rows="x"), "checksum"),
])
def test_damaged_store_is_refused_in_one_line(written, damage, message):
    _, path = written
    damage(path)
    with pytest.raises(store.StoreError, match=message) as e:
        store.check_store(path)  # opening reads the manifest; each buffer is checked when it is read
    assert "\n" not in str(e.value) and "gquery encode" in str(e.value)


def _flip(file):
    data = bytearray(file.read_bytes())
    data[len(data) // 2] ^= 0xFF
    file.write_bytes(bytes(data))


def _edit(path, **fields):
    m = json.loads((path / "manifest.json").read_text())
    m.update(fields)
    (path / "manifest.json").write_text(json.dumps(m))


def test_stale_store_is_refused_and_rebuilt_from_its_source(sf001, tmp_path):
    from gquery.runner import open_table
    from gquery.tpch import find_lineitem

    data = tmp_path / "data"
    data.mkdir()
    parquet = data / "lineitem.parquet"
    parquet.write_bytes(sf001.files[0].read_bytes())
    source = find_lineitem(parquet)
    notes = []
    table = open_table(source, echo=notes.append, build_store=True)
    path = store.store_path_for(source)
    assert store.is_store(path) and store.source_files(path) == [parquet.resolve()]
    os.utime(parquet, ns=(1, 1))  # the parquet changed after the store was written
    with pytest.raises(store.StoreError, match="stale"):
        store.open_store(path)
    again = open_table(source, echo=notes.append)
    assert any("rebuilding" in n for n in notes)
    assert again.rows == table.rows and store.open_store(path).rows == table.rows


def _rewrite(path, buffer_file, array):
    """Replace a buffer with `array`, its checksums and the manifest's updated: a hand-made store
    that the checksums cannot tell from a written one."""
    array.tofile(path / buffer_file)
    m = json.loads((path / "manifest.json").read_text())
    entries = [*(e for c in m["columns"].values() for e in c["buffers"].values()), *(m["key"] or {}).get("buffers", {}).values()]
    for meta in entries:
        if meta["file"] == buffer_file:
            meta["crc32"] = store._piece_crcs(array)
    store._write_manifest(path, m)


def test_bucket_lists_naming_a_row_past_the_last_are_refused(written):
    """A GPU gathers factors by the listed row ids: an id past the last row is refused on opening,
    in one line, even when the files' checksums agree with it (a hand-made store)."""
    _, path = written
    ids = np.fromfile(path / "l_suppkey.ids.bin", dtype=np.uint32)
    ids[7] = len(ids) + 3
    _rewrite(path, "l_suppkey.ids.bin", ids)
    with pytest.raises(store.StoreError, match="past the last") as e:
        store.open_store(path).columns["l_suppkey"].get("indexed")
    assert "\n" not in str(e.value)


def _halves(sf001, folder):
    """Two parquet files of different rows in one folder: the first and second half of SF 0.01."""
    import pyarrow.parquet as pq

    folder.mkdir()
    whole = pq.read_table(sf001.files[0])
    half = whole.num_rows // 2
    a, b = folder / "a.parquet", folder / "b.parquet"
    pq.write_table(whole.slice(0, half), a)
    pq.write_table(whole.slice(half), b)
    return a, b


def test_two_files_of_one_folder_never_share_a_store(sf001, tmp_path):
    """A store beside a.parquet answered for b.parquet in the same folder (both looked for lineitem.gq
    there): each file now has its own store, and a store answers only for the files it was built from."""
    from gquery.runner import open_table
    from gquery.tpch import find_lineitem

    a, b = _halves(sf001, tmp_path / "data")
    ta = open_table(find_lineitem(a), build_store=True)
    tb = open_table(find_lineitem(b), build_store=True)
    assert store.store_path_for(find_lineitem(a)) == tmp_path / "data" / "a.gq"
    assert store.source_files(tmp_path / "data" / "b.gq") == [b.resolve()]
    assert ta.rows + tb.rows == open_table(sf001).rows and ta.rows != tb.rows
    # a store of a's name, but of b's rows (as a renamed or copied store is): refused and rebuilt from a
    os.replace(tmp_path / "data" / "a.gq", tmp_path / "a-old.gq")
    os.rename(tmp_path / "data" / "b.gq", tmp_path / "data" / "a.gq")
    notes = []
    again = open_table(find_lineitem(a), echo=notes.append)
    assert again.rows == ta.rows and any("built from other files" in n for n in notes), notes


def test_opening_a_file_leaves_a_store_of_other_files_beside_it_as_it_is(tmp_path):
    """x.gq built from a folder x/ lies where x.parquet's store would: opening x.parquet read it, found it built from
    other files, and built x.parquet's store over it, so x.gq answered x.parquet's rows from then on. Now x.parquet is
    read itself, and x.gq still answers for x/."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    import gquery

    (tmp_path / "x").mkdir()
    pq.write_table(pa.table({"a": [1, 2]}), tmp_path / "x" / "p1.parquet")
    pq.write_table(pa.table({"a": [3, 4]}), tmp_path / "x" / "p2.parquet")
    pq.write_table(pa.table({"a": [7]}), tmp_path / "x.parquet")
    from gquery.tpch import find_lineitem

    built = store.ensure_store(find_lineitem(tmp_path / "x"), echo=lambda m: None)
    assert built == tmp_path / "x.gq" and store.is_parted(built)
    assert gquery.open(tmp_path / "x.parquet").sql("SELECT SUM(a) FROM x", backend="cpu").rows == [(7,)]
    assert store.is_parted(built) and gquery.open(built).sql("SELECT SUM(a) FROM x", backend="cpu").rows == [(10,)]


def test_a_store_of_a_folder_of_one_file_is_named_for_the_folder(tmp_path):
    """A folder of one parquet file is the folder's table (rides), opened as files or as the store encode made of it
    (the store was named for its one file, part-001, and `FROM rides` over it an unknown table)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    import gquery
    from gquery.tpch import find_lineitem

    (tmp_path / "rides").mkdir()
    pq.write_table(pa.table({"k": [1, 1, 2], "v": [1, 2, 3]}), tmp_path / "rides" / "part-001.parquet")
    built = store.ensure_store(find_lineitem(tmp_path / "rides"), echo=lambda m: None)
    assert store.table_name(built) == "rides" and not store.is_parted(built)
    assert gquery.open(built).sql("SELECT SUM(v) FROM rides", backend="cpu").rows == [(6,)]


def test_a_folder_of_parts_that_gains_a_file_is_other_data(sf001, tmp_path):
    """The store of a folder of parts records its files: one file more (or fewer) is other data, and the
    store is rebuilt with every file's rows, never answering for the files it knew."""
    import shutil

    from gquery.runner import open_table
    from gquery.tpch import find_lineitem

    a, b = _halves(sf001, tmp_path / "halves")
    parts = tmp_path / "parts"
    parts.mkdir()
    shutil.copy(a, parts / "lineitem.1.parquet")
    first = open_table(find_lineitem(parts), build_store=True)
    shutil.copy(b, parts / "lineitem.2.parquet")
    notes = []
    both = open_table(find_lineitem(parts), echo=notes.append, build_store=True)
    assert both.rows == open_table(sf001).rows > first.rows
    assert any("built from other files" in n for n in notes), notes


def test_the_cli_answers_each_file_of_a_folder_from_its_own_rows(sf001, tmp_path):
    """As a user met it: `gquery run --data a.parquet`, then `--data b.parquet` in the same folder,
    answered b's query from a's store (DuckDB's check caught it: MISMATCH)."""
    import json

    from conftest import gquery

    a, b = _halves(sf001, tmp_path / "data")
    for f in (a, b, a):
        text = f"SELECT COUNT(*), SUM(l_quantity) FROM {Path(f).stem}"  # each file is the table its name says
        r = gquery("run", "--data", f, "--backend", "cpu", "--json", "--repeat", 1, "--sql", text)
        assert r.returncode == 0, r.stderr
        out = json.loads(r.stdout)
        assert out["check"] is True and out["rows"] == out["duckdb"]["rows"], (f, out["rows"])


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full on this system")
def test_a_full_disk_names_the_file_and_the_reason(tmp_path):
    """A store written to a full disk said only "117164 requested and 0 written" (ndarray.tofile's words,
    seen on a GPU host): the error now names the file and the system's reason, for the CLI's one line."""
    (tmp_path / "l_quantity.words.bin").symlink_to("/dev/full")  # every write there fails as a full disk does
    with pytest.raises(OSError) as e:
        store._Writer(tmp_path).buffer("l_quantity.words", np.arange(100_000))
    assert e.value.filename == str(tmp_path / "l_quantity.words.bin") and "No space left" in e.value.strerror


def test_a_store_goes_where_the_user_says_or_into_gquerys_cache_never_unasked_beside_the_data(sf001, tmp_path):
    """`run --data FILE` builds the file's store in gquery's cache folder (said in one line) and reuses it;
    `--store PATH` puts it there; a store `gquery encode` made beside the data is the one used."""
    import shutil

    from conftest import gquery

    data = tmp_path / "data"
    data.mkdir()
    shutil.copy(sf001.files[0], data / "lineitem.parquet")
    args = ("run", "--data", data / "lineitem.parquet", "--backend", "cpu", "--repeat", 1, "--query", "q6")
    first = gquery(*args)
    from gquery.tpch import find_lineitem

    cached = store.cache_path_for(find_lineitem(data / "lineitem.parquet"))
    assert first.returncode == 0 and f"building the store of {data / 'lineitem.parquet'} in {cached}" in first.stderr
    assert sorted(p.name for p in data.iterdir()) == ["lineitem.parquet"] and store.is_store(cached)
    again = gquery(*args)
    assert again.returncode == 0 and "building" not in again.stderr
    there = tmp_path / "mine.gq"
    asked = gquery(*args, "--store", there)
    assert asked.returncode == 0 and f"building the store of {data / 'lineitem.parquet'} in {there}" in asked.stderr
    assert store.is_store(there) and "building" not in gquery(*args, "--store", there).stderr
    encoded = gquery("encode", "--data", data / "lineitem.parquet")
    assert encoded.returncode == 0 and store.is_store(data / "lineitem.gq")
    shutil.rmtree(cached)
    beside = gquery(*args, "--json")
    assert beside.returncode == 0 and "building" not in beside.stderr and not cached.exists()
    assert json.loads(beside.stdout)["source"] == str(data / "lineitem.parquet")


def test_encoding_says_how_far_it_has_come(sf001, tmp_path, monkeypatch):
    monkeypatch.setattr(store, "PROGRESS_SECONDS", 0)  # every column, where a real store says so every 2 s
    said = []
    store.write_store(sf001, tmp_path / "lineitem.gq", sf001, echo=said.append)
    progress = [m for m in said if m.startswith("encoding lineitem.gq: ")]
    columns = len(store.open_store(tmp_path / "lineitem.gq").columns)
    assert progress[0] == f"encoding lineitem.gq: 0 of {columns} columns done, l_orderkey next"
    assert len(progress) == columns and progress[-1].startswith(f"encoding lineitem.gq: {columns - 1} of {columns}")


def test_a_killed_writes_temporary_folder_is_removed_by_the_next_write(sf001, tmp_path):
    """A write killed before its rename leaves its temporary folder (.NAME.tmp-PID): the next write of the store
    removes those of processes gone, and leaves a live process's."""
    import subprocess
    import sys

    from gquery.tpch import find_lineitem

    source = find_lineitem(sf001.files[0])
    path = tmp_path / "mine.gq"
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    left = tmp_path / f".mine.gq.tmp-{gone.pid}"
    (left / "part").mkdir(parents=True)
    live = tmp_path / ".mine.gq.tmp-1"  # (pid 1 is alive)
    live.mkdir()
    store.write_store(source, path, source, echo=lambda m: None)
    assert store.is_store(path) and not left.exists() and live.exists()
