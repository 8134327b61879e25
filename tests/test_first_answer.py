"""What a first answer rests on, without a GPU: plans sized from frame metadata alone, the bytes a store's
encodings still have to read from disk and how a one-shot query's plan weighs them, columns read
ahead and together, and a GPU thread started unchecked on a host without a GPU."""

import dataclasses

import numpy as np
import pytest

from gquery import sql, store
from gquery.answer import parts_of, schema_of
from gquery.encodings import encode_column, frame_words, packed_bytes
from gquery.gpu.fusedplan import plan_fused
from gquery.table import KEY, PRICE, QUANTITY, read_ahead, read_all


@pytest.fixture
def opened(sf001):
    return store.open_store(store.ensure_store(sf001, echo=lambda m: None))


@pytest.mark.parametrize("rows", [0, 1, 1023, 1024, 1025, 70_001])
def test_packed_sizes_come_from_frame_metadata_alone(rows):
    values = np.random.default_rng(rows).integers(-10**9, 10**12, rows)
    packed = encode_column(values, "packed", 1)
    assert packed_bytes(packed.meta) == packed.nbytes
    for first, end in [(0, packed.frames), (0, min(1, packed.frames)), (packed.frames // 2, packed.frames), (1, 1)]:
        assert frame_words(packed.meta, first, end) == packed.frame_words(first, end)


def test_planning_reads_zone_maps_but_no_words(opened):
    query = sql.parse(sql.named_sql("q6"), schema_of(opened))
    plan = plan_fused(query, [opened], "pinned", 132)
    assert plan.tables[0].chunks
    assert not any("packed" in opened.columns[c].encodings for c in query.columns())


def test_cold_bytes_are_the_manifests_until_read(opened):
    key = opened.columns[KEY]
    assert key.cold_bytes("packed") > 0 and key.cold_bytes("sliced") > 0 and key.cold_bytes("indexed") > 0
    assert opened.columns[QUANTITY].cold_bytes("sliced") == 0  # no such encoding on disk
    key.get("packed")
    assert key.cold_bytes("packed") == 0
    assert key.cold_bytes("sliced") > 0


def _sparse_store(tmp_path):
    """1M rows, keys 1..100,000 in no order, with bucket lists: Z = 30 is worth the lists once they are read."""
    from gquery.query import BIGINT, decimal
    from gquery.schema import Schema
    from gquery.table import Table

    rng = np.random.default_rng(4)
    rows = 1_000_000
    values = {KEY: rng.integers(1, 100_001, rows), QUANTITY: rng.integers(1, 51, rows) * 100,
              PRICE: rng.integers(90_000, 10_000_000, rows)}
    schema = Schema({KEY: BIGINT, QUANTITY: decimal(15, 2), PRICE: decimal(15, 2)}, {})
    return store.open_store(store.write_store(Table.from_values(values, schema), tmp_path / "t.gq", echo=lambda m: None)), schema


def test_a_kept_table_reads_the_lists_in_the_background_and_later_calls_scan_by_index(tmp_path):
    """The first call rents (frames: no call waits for the lists on disk) and starts reading the lists on a
    thread; once read, the same query's plan scans by index. A one-shot table reads nothing it will not reuse."""
    import time

    from gquery.answer import gpu_plan

    opened, schema = _sparse_store(tmp_path)
    query = sql.parse(sql.named_sql("mission", 30), schema)
    key = opened.columns[KEY]
    gpu_plan(query, opened, 132, warmup=False, one_shot=True, plans={})
    time.sleep(0.2)
    assert "indexed" not in key.encodings and "sliced" not in key.encodings
    plans = {}
    first, _ = gpu_plan(query, opened, 132, warmup=False, plans=plans)
    assert first.tables[0].index is None and [(c.name, e) for c, e in first.worth_reading()] == [(KEY, "indexed")]
    time.sleep(0.2)
    assert key.cold_bytes("indexed")  # the lists wait for what the call itself reads, as its run reads it:
    for c, e in first.reads():
        c.get(e)
    deadline = time.monotonic() + 30
    while key.cold_bytes("indexed") and time.monotonic() < deadline:
        time.sleep(0.01)
    later, _ = gpu_plan(query, opened, 132, warmup=False, plans=plans)
    assert later.tables[0].index is not None


def test_a_prefetched_encoding_is_what_get_reads(tmp_path):
    opened, _ = _sparse_store(tmp_path)
    fresh, _ = _sparse_store(tmp_path / "again")
    opened.columns[KEY].prefetch("indexed")
    a, b = opened.columns[KEY].encodings["indexed"], fresh.columns[KEY].get("indexed")
    assert all(np.array_equal(x, y) for x, y in zip(a.buffers().values(), b.buffers().values()))
    assert a.buffers().keys() == b.buffers().keys()


def test_a_one_shot_query_counts_what_is_still_on_disk(tmp_path):
    """The planner weighs the index scan from the zone maps without reading the lists; a run that reads them
    from disk weighs each of their bytes 10x, so a one-shot sparse query scans frames, until the lists are in
    memory: then the warm choice (the lists) holds for one run too."""
    opened, schema = _sparse_store(tmp_path)
    query = sql.parse(sql.named_sql("mission", 30), schema)
    plan = plan_fused(query, parts_of(opened), "pinned", 132)
    key = opened.columns[KEY]
    assert plan.tables[0].index_option is not None and "indexed" not in key.encodings  # planned from zone maps
    warm = plan.choose()
    assert warm.tables[0].index is not None  # chosen warm: the lists are read to find the buckets' entries
    key.encodings.pop("indexed")
    once = plan.choose(runs=1)
    assert once.tables[0].index is None and "for 1 run, a byte still on disk weighed as 10" in once.scan_note
    assert "indexed" not in key.encodings  # not chosen: not read
    read_all([opened.columns[c] for c in (QUANTITY, PRICE)], "packed")
    key.get("indexed")
    assert plan.choose(runs=1).tables[0].index is not None  # nothing left to read: as warm


def test_read_ahead_reads_zone_maps_and_words_of_the_named_columns(opened):
    read_ahead([opened], ["l_quantity", "l_discount", "no_such_column"], ["l_discount"]).join(timeout=60)
    for name in ("l_quantity", "l_discount"):
        assert "packed" in opened.columns[name].encodings and opened.columns[name]._zones is not None
    assert "packed" not in opened.columns["l_tax"].encodings
    # the zone map WHERE tests sorted as the planner sorts it; the others left for a plan that asks
    assert opened.columns["l_quantity"]._zone_order is None
    made = opened.columns["l_discount"]._zone_order
    opened.columns["l_discount"]._zone_order = None
    again = opened.columns["l_discount"].zone_order()
    assert all(np.array_equal(a, b) if isinstance(a, np.ndarray) else
               all(np.array_equal(x, y) for x, y in zip(a, b)) if isinstance(a, tuple) else a == b
               for a, b in zip(dataclasses.astuple(made), dataclasses.astuple(again)))


def test_a_zone_map_and_its_order_wait_for_no_read_of_the_columns_words(opened):
    """A read of a column's words holds the column's lock throughout; the planner's zone map and its sorted order
    (zone_lock) are read and made meanwhile, not after it."""
    import threading

    column = opened.columns[KEY]
    holding, release = threading.Event(), threading.Event()

    def a_long_read():
        with column.lock:
            holding.set()
            release.wait(60)

    reader = threading.Thread(target=a_long_read)
    reader.start()
    holding.wait(60)
    try:
        made = {}
        planner = threading.Thread(target=lambda: made.update(order=column.zone_order(), zones=column.zones()))
        planner.start()
        planner.join(timeout=30)
        assert not planner.is_alive(), "the zone map waited for the column's lock"
        assert made["order"].lows.size == len(made["zones"][0]) == -(-opened.rows // 1024)
    finally:
        release.set()
        reader.join()


def test_a_read_ahead_reads_a_lone_column_and_sets_the_switch_interval_back(opened):
    import sys

    before = sys.getswitchinterval()
    read_ahead([opened], ["l_tax"], ["l_tax"]).join(timeout=60)
    assert "packed" in opened.columns["l_tax"].encodings and opened.columns["l_tax"]._zone_order is not None
    assert sys.getswitchinterval() == before


@pytest.mark.parametrize("text,named", [
    ("SELECT SUM(l_quantity * l_extendedprice) FROM lineitem WHERE l_suppkey < 30", ["l_quantity", "l_extendedprice", "l_suppkey"]),
    ('select sum("L_QUANTITY") from lineitem where L_Discount between 0.05 and 0.07', ["l_quantity", "l_discount"]),
    ("SELECT COUNT(*) FROM lineitem WHERE l_comment = 'l_tax l_suppkeys'", ["l_tax", "l_comment"]),
    ("SELECT l_quantityx FROM lineitem", []),
])
def test_a_first_querys_columns_are_named_before_its_text_is_parsed(opened, text, named):
    """api.named_columns: the table's columns whose names the text holds as words, whatever their case (a
    superset of what the query reads: a name in a string literal is read for nothing)."""
    from gquery.api import named_columns

    assert sorted(named_columns(text, opened.columns)) == sorted(named)


def test_read_ahead_leaves_a_damaged_column_for_the_query_to_report(sf001, tmp_path):
    import shutil

    path = shutil.copytree(store.ensure_store(sf001, echo=lambda m: None), tmp_path / "copy.gq")
    words = path / "l_quantity.words.bin"
    data = bytearray(words.read_bytes())
    data[100] ^= 0xFF
    words.write_bytes(bytes(data))
    table = store.open_store(path)
    read_ahead([table], ["l_quantity"]).join(timeout=60)
    with pytest.raises(store.StoreError, match="l_quantity.words.bin is corrupt"):
        table.columns["l_quantity"].get("packed")


def test_a_gpu_thread_started_unchecked_refuses_its_jobs_without_a_gpu():
    from gquery.gpu.device import DeviceThread, GpuUnavailable, probe

    if probe()[0] is not None:
        pytest.skip("this host has a GPU")
    thread = DeviceThread(7)  # as gquery.open starts GPU 0's, before the driver has answered
    with pytest.raises(GpuUnavailable, match="no usable GPU"):
        thread.submit(lambda: 1).result(timeout=30)
    thread.shutdown()


FIRST_QUERY = """
import json, sys, threading
import gquery
t = gquery.open(sys.argv[1])
try:
    a = t.sql(sys.argv[2], backend="gpu", check=True)
    print(json.dumps({"rows": [[str(v) for v in r] for r in a.rows], "check": a.check}))
except gquery.GqueryError as e:
    print(json.dumps({"error": str(e)}))
    sys.exit(1)
"""


@pytest.mark.gpu
@pytest.mark.parametrize("text", [
    "SELECT SUM(l_quantity * l_extendedprice) FROM lineitem WHERE l_suppkey < 300",
    "SELECT l_returnflag, COUNT(*) FROM lineitem WHERE l_comment <> 'l_tax l_discount' AND l_shipdate < DATE '1995-01-01' "
    "GROUP BY 1 ORDER BY 1",
])
def test_a_processs_first_query_reads_its_named_columns_ahead_and_answers_exactly(sf001, text):
    """A fresh process's first query on a GPU reads the columns its text names from the moment it is asked (before
    sqlglot's import and the parse: api.named_columns), a name in a string literal among them: its answer is the CPU
    reference's, and the process exits cleanly (the read-ahead's threads done)."""
    import json
    import subprocess
    import sys

    path = store.ensure_store(sf001, echo=lambda m: None)
    done = subprocess.run([sys.executable, "-c", FIRST_QUERY, str(path), text], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert json.loads(done.stdout)["check"] is True


@pytest.mark.gpu
def test_a_processs_first_query_that_does_not_parse_says_so_in_one_line_and_exits(sf001):
    """The read-ahead begun before the parse does not hold up the exit of a process whose first text is no query:
    one line, no traceback."""
    import json
    import subprocess
    import sys
    import time

    path = store.ensure_store(sf001, echo=lambda m: None)
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", FIRST_QUERY, str(path), "SELEC SUM(l_quantity) FROM lineitem WHERE l_suppkey < 3"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 1 and done.stderr == "" and time.monotonic() - started < 60
    said = json.loads(done.stdout)["error"]
    assert "\n" not in said and "Traceback" not in done.stdout


WARM_UP_ORDER = """
import importlib.abc, json, sys, types
from pathlib import Path
sys.path.insert(0, sys.argv[1])  # a pycuda package of nothing: find_spec finds it, and a GPU may be there
seen = {}

class Watch(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "gquery.api" and "api" not in seen:
            warm = sys.modules.get("gquery.gpu.warm")
            seen["api"] = warm is not None and warm.warming._thread is not None
        return None

sys.meta_path.insert(0, Watch())
import gquery
gquery.open(sys.argv[2])
print(json.dumps(seen))
"""


def test_gquery_open_begins_the_drivers_warm_up_before_it_imports_the_engines_modules(sf001, tmp_path):
    """The driver's start and GPU 0's context take a few hundred ms, on a thread of their own: gquery.open begins them
    before importing gquery.api (NumPy and the engine's modules, ~0.1 s), so a fresh process's first answer waits for
    the longer of the two, not their sum. Here without a driver: the warm-up's thread finds none and ends."""
    import json
    import subprocess
    import sys

    (tmp_path / "pycuda").mkdir()
    (tmp_path / "pycuda" / "__init__.py").write_text("")
    path = store.ensure_store(sf001, echo=lambda m: None)
    done = subprocess.run([sys.executable, "-c", WARM_UP_ORDER, str(tmp_path), str(path)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == {"api": True}
