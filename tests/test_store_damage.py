"""A store proves itself: nudge any number of its manifest, or damage any of its buffers, and reading it
either refuses in one line or gives back exactly the values it was written from, never other values.
Re-signing a nudged manifest (its checksum recomputed, as a buggy writer would) must still come to
one of the two: what a value means is checked against the buffers, or derived from them."""

import json
import re

import numpy as np
import pytest

from gquery import store
from gquery.query import BIGINT, DATE, INTEGER, VARCHAR, decimal
from gquery.schema import Schema
from gquery.table import Table

ROWS = 2 * 1024 + 77  # three frames, the last one short
TYPES = {"l_suppkey": BIGINT, "l_quantity": decimal(15, 2), "l_extendedprice": decimal(15, 2), "l_linenumber": INTEGER,
         "l_shipdate": DATE, "l_returnflag": VARCHAR}


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    rng = np.random.default_rng(8)
    values = {"l_suppkey": rng.integers(1, 3000, ROWS), "l_quantity": rng.integers(1, 51, ROWS) * 100,
              "l_extendedprice": rng.integers(-10**9, 10**9, ROWS), "l_linenumber": rng.integers(1, 8, ROWS),
              "l_shipdate": rng.integers(8000, 10500, ROWS), "l_returnflag": rng.integers(0, 3, ROWS)}
    table = Table.from_values(values, Schema(TYPES, {}), {"l_returnflag": ("A", "N", "R")})
    path = store.write_store(table, tmp_path_factory.mktemp("store") / "lineitem.gq", echo=lambda m: None)
    return path, values


def read_everything(path):
    """Every stored value, as a reader (a query) would see it: each column decoded, the key's slices
    and lists decoded, each dictionary."""
    t = store.open_store(path)
    out = {}
    for name, col in t.columns.items():
        strings = None if col.dictionary is None else list(col.dictionary)  # read now: a dictionary is read when asked for
        out[name] = (col.get("packed").decode().astype(np.int64).tolist(), strings, col.type)
        for enc in ("sliced", "indexed"):
            if enc in col.stored:
                out[f"{name}.{enc}"] = col.get(enc).decode().astype(np.int64).tolist()
    return out


def numbers(node, where=()):
    """(path, value) of every integer in a JSON tree."""
    if isinstance(node, bool):
        return
    if isinstance(node, int):
        yield where, node
    elif isinstance(node, dict):
        for k, v in node.items():
            yield from numbers(v, where + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from numbers(v, where + (i,))


def edited(manifest: dict, where, change) -> dict:
    """A copy of a manifest with the entry at `where` made change(its value)."""
    m = json.loads(json.dumps(manifest))
    node = m
    for k in where[:-1]:
        node = node[k]
    node[where[-1]] = change(node[where[-1]])
    return m


def nudged(manifest: dict, where, delta: int) -> dict:
    return edited(manifest, where, lambda v: v + delta)


def copy_store(path, tmp_path):
    import shutil

    return shutil.copytree(path, tmp_path / "copy.gq")


@pytest.mark.parametrize("resign", [False, True], ids=["as edited", "re-signed"])
def test_every_manifest_number_nudged_is_refused_or_harmless(written, tmp_path, resign):
    path, _ = written
    want = read_everything(path)
    manifest = json.loads((path / "manifest.json").read_text())
    copy = copy_store(path, tmp_path)
    refused = harmless = 0
    for where, _ in numbers({k: v for k, v in manifest.items() if k != "checksum"}):
        for delta in (1, -1):
            m = nudged(manifest, where, delta)
            if resign:
                m["checksum"] = store._manifest_checksum(m)
            (copy / "manifest.json").write_text(json.dumps(m))
            try:
                got = read_everything(copy)
            except store.StoreError as e:
                assert "\n" not in str(e)
                refused += 1
                continue
            assert got == want, f"{where} {delta:+d} gave other values"
            harmless += 1
    (copy / "manifest.json").write_text(json.dumps(manifest))
    assert read_everything(copy) == want
    assert refused and not harmless  # even re-signed, every number the reader uses is checked against the buffers


def test_every_buffer_damaged_is_refused(written, tmp_path):
    path, _ = written
    copy = copy_store(path, tmp_path)
    for f in sorted(copy.glob("*.bin")):
        original = f.read_bytes()
        for damage in (lambda b: b[:-4], lambda b: b[:len(b) // 2] + bytes([b[len(b) // 2] ^ 0x10]) + b[len(b) // 2 + 1:],
                       lambda b: b + b"\0" * 8):
            f.write_bytes(damage(original))
            with pytest.raises(store.StoreError) as e:
                read_everything(copy)
            assert "\n" not in str(e.value) and f.name in str(e.value), f.name
        f.unlink()
        with pytest.raises(store.StoreError, match=f"missing {f.name}"):
            read_everything(copy)
        f.write_bytes(original)
    assert read_everything(copy) == read_everything(path)


def test_a_query_reads_only_the_columns_it_needs(written, tmp_path):
    """A damaged column no query reads does not stop a query that does not read it."""
    path, values = written
    copy = copy_store(path, tmp_path)
    (copy / "l_shipdate.words.bin").write_bytes(b"\0" * (copy / "l_shipdate.words.bin").stat().st_size)
    t = store.open_store(copy)
    assert t.columns["l_quantity"].values().tolist() == values["l_quantity"].tolist()
    with pytest.raises(store.StoreError, match="l_shipdate.words.bin is corrupt"):
        t.columns["l_shipdate"].values()


def test_a_part_of_another_store_in_a_parts_place_is_refused(tmp_path):
    """A parted store records each part's manifest: another store's part of as many rows, copied in a part's place,
    is refused in one line (it was read as this store's, and the sum was another table's), whether the parts are
    held at open or read a window at a time."""
    import shutil

    import pyarrow as pa
    import pyarrow.parquet as pq

    from gquery.tpch import find_lineitem

    stores = {}
    for name, base in (("a", 0), ("b", 1000)):
        folder = tmp_path / name / "t"
        folder.mkdir(parents=True)
        for k in (1, 2):
            pq.write_table(pa.table({"x": pa.array([base + 10 * k + i for i in range(2000)], pa.int64())}),
                           folder / f"p{k}.parquet")
        stores[name] = store.ensure_store(find_lineitem(folder), echo=lambda m: None)
    assert store.is_parted(stores["a"])
    assert store.open_store(stores["a"]).rows == 4000
    swapped = store.part_path(stores["a"], 2)
    shutil.rmtree(swapped)
    shutil.copytree(store.part_path(stores["b"], 2), swapped)
    for window in (None, 1):
        with pytest.raises(store.StoreError, match="part part-00002.gq is not the part this store was made of"):
            store.open_store(stores["a"], window=window)


def test_a_parted_manifest_re_signed_to_leave_out_or_repeat_a_part_is_refused(tmp_path):
    """A parted store's manifest edited and re-signed to leave out a part (in the middle, or the last, its folder still
    beside the others), to list one twice, or to record some parts' checksums and not others: refused in one line
    (each answered another table: the parts it listed). A store written again with fewer parts removes the parts
    past its last, so none lies beside them."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from gquery.tpch import find_lineitem

    folder = tmp_path / "t"
    folder.mkdir()
    for k in (1, 2, 3):
        pq.write_table(pa.table({"x": pa.array([10 * k + i for i in range(1500)], pa.int64())}), folder / f"p{k}.parquet")
    path = store.ensure_store(find_lineitem(folder), echo=lambda m: None)
    manifest = json.loads((path / "manifest.json").read_text())

    def without(k: int) -> dict:
        parts = [p for i, p in enumerate(manifest["parts"]) if i != k]
        return {**manifest, "parts": parts, "rows": sum(p["rows"] for p in parts)}

    twice = {**manifest, "parts": [manifest["parts"][0], manifest["parts"][0], manifest["parts"][2]]}
    some = {**manifest, "parts": [manifest["parts"][0], {k: v for k, v in manifest["parts"][1].items() if k != "checksum"},
                                  manifest["parts"][2]]}
    for n, (edit, says) in enumerate(((without(1), "lists the parts part-00001.gq, part-00003.gq, not part-00001.gq … "
                                                   "part-00002.gq"),
                                      (without(2), "part part-00003.gq lies beside the 2 parts its manifest lists"),
                                      (twice, "lists the parts part-00001.gq, part-00001.gq, part-00003.gq"),
                                      (some, "records some parts' checksums and not others"))):
        copy = copy_store(path, tmp_path / f"copy{n}")
        edit = {**edit, "checksum": store._manifest_checksum(edit)}
        (copy / "manifest.json").write_text(json.dumps(edit))
        for window in (None, 1):
            with pytest.raises(store.StoreError, match=re.escape(says)) as e:
                store.open_store(copy, window=window)
            assert "\n" not in str(e.value)
    (folder / "p3.parquet").unlink()
    again = store.ensure_store(find_lineitem(folder), echo=lambda m: None)
    assert store.open_store(again).rows == 3000 and not store.part_path(again, 3).exists()


def test_a_column_re_signed_to_read_another_columns_files_is_refused(written, tmp_path):
    """Two columns of one type whose manifest entries name the same files (l_quantity's entry made l_tax's, re-signed)
    read as each other: refused in one line."""
    path, _ = written
    manifest = json.loads((path / "manifest.json").read_text())
    columns, types = manifest["columns"], manifest["schema"]["types"]
    alike = next((a, b) for a in columns for b in columns if a < b and types.get(a) == types.get(b) and "buffers" in columns[a])
    copy = copy_store(path, tmp_path)
    m = replaced(manifest, ("columns", alike[1]), columns[alike[0]])
    (copy / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(store.StoreError, match="another column's files"):
        store.open_store(copy)


def entries(node, where=()):
    """The path of every entry of a JSON tree, each dict's and list's own before what it holds."""
    if where:
        yield where
    if isinstance(node, dict):
        for k, v in node.items():
            yield from entries(v, where + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from entries(v, where + (i,))


def replaced(manifest: dict, where, value) -> dict:
    """The entry at `where` made `value`, the manifest re-signed."""
    m = edited(manifest, where, lambda _: value)
    m["checksum"] = store._manifest_checksum(m)
    return m


def test_every_manifest_entry_of_another_shape_re_signed_is_refused_in_one_line_or_harmless(written, tmp_path):
    """A manifest entry made a value of another type (a column's entry null, the schema's types a list, the key a
    number), re-signed: a StoreError, never another exception out of the reader (an outside audit met
    AttributeError tracebacks), nor other values."""
    path, _ = written
    want = read_everything(path)
    manifest = json.loads((path / "manifest.json").read_text())
    copy = copy_store(path, tmp_path)
    tried = 0
    for where in entries({k: v for k, v in manifest.items() if k != "checksum"}):
        for value in (None, "x", 3, [], {}, [[1]]):
            m = replaced(manifest, where, value)
            (copy / "manifest.json").write_text(json.dumps(m))
            try:
                got = read_everything(copy)
            except store.StoreError as e:
                assert "\n" not in str(e)
            else:  # the same values (the key's lists gone where the key is: a store without an index)
                assert all(got[k] == want[k] for k in got) and set(want) - set(got) <= {"l_suppkey.sliced",
                                                                                       "l_suppkey.indexed"}, where
            tried += 1
    assert tried > 500


@pytest.mark.parametrize("name", ["/etc/hostname", "../copy.gq/l_suppkey.meta.bin", "..", ""])
def test_a_buffer_file_outside_the_store_is_refused(written, tmp_path, name):
    path, _ = written
    manifest = json.loads((path / "manifest.json").read_text())
    copy = copy_store(path, tmp_path)
    (copy / "manifest.json").write_text(json.dumps(replaced(manifest, ("columns", "l_quantity", "buffers", "meta",
                                                                        "file"), name)))
    with pytest.raises(store.StoreError, match="column l_quantity is not a store's"):
        read_everything(copy)


def test_a_manifest_nested_past_what_python_parses_is_refused(written, tmp_path):
    copy = copy_store(written[0], tmp_path)
    (copy / "manifest.json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(store.StoreError, match="unreadable manifest"):
        store.open_store(copy)


@pytest.mark.parametrize("where", ["a column's file", "the store's folder"])
def test_a_store_this_user_may_not_read_is_one_line_without_advice_to_rebuild(written, tmp_path, where):
    """chmod 000 on a buffer or on the folder: a StoreError saying it cannot be read (it raised PermissionError),
    never 'rebuild it' (its files are whole). As root, run without the capabilities that override permissions."""
    import os
    import shutil
    import subprocess
    import sys

    copy = copy_store(written[0], tmp_path)
    target = copy / "l_quantity.words.bin" if where == "a column's file" else copy
    prefix = []
    if os.geteuid() == 0:
        if not shutil.which("setpriv"):
            pytest.skip("root without setpriv: permissions do not apply to root")
        prefix = ["setpriv", "--bounding-set", "-dac_override,-dac_read_search"]
    code = ("import gquery\nfrom gquery import store\ntry:\n"
            f"    gquery.open({str(copy)!r}).sql('SELECT SUM(l_quantity) FROM lineitem', backend='cpu')\n"
            "except store.StoreError as e:\n    print(e)\n")
    target.chmod(0)
    try:
        done = subprocess.run([*prefix, sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    finally:
        target.chmod(0o755 if target.is_dir() else 0o644)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert done.stdout.strip().endswith("(Permission denied: " + str(copy / ("l_quantity.words.bin" if where ==
                                        "a column's file" else "manifest.json")) + ")"), done.stdout
    assert "rebuild" not in done.stdout


@pytest.mark.parametrize("change,said", [(-8, "is truncated (16 of 24 bytes)"),
                                         (8, "is longer than written (32 of 24 bytes)")])
def test_a_buffer_shorter_or_longer_than_written_says_which(written, tmp_path, change, said):
    copy = copy_store(written[0], tmp_path)
    zmax = copy / "l_quantity.zmax.bin"
    data = zmax.read_bytes()
    zmax.write_bytes(data[:change] if change < 0 else data + bytes(change))
    with pytest.raises(store.StoreError) as refused:
        read_everything(copy)
    assert f"l_quantity.zmax.bin {said}" in str(refused.value)
