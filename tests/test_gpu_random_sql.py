"""On a GPU host: random SQL of the class (gquery/bench/querygen.py, drawn as the CPU reference's test draws it)
on the GPU equals DuckDB asked the same text, over TPC-H SF 0.01 as generated, clustered by l_shipdate
(zone maps prune), parted in three files whose dictionaries differ, and with NULLs in most columns (about one
row in seven, l_tax at every row before 1995); each query in one mode, the
modes in turn. The draws reach the class's edges at modest rates (querygen's docstring): IS [NOT] NULL,
GROUP BY l_orderkey or l_partkey (its top groups by an aggregate, LIMIT 1..12, or all), IN lists of up
to 2,000 keys, 20..60 nested parentheses, 10..30 nested NOTs, an AND/OR of up to 300 comparisons and a
sum of up to 100 terms: each a kernel of its own shape. A query the fused kernel refuses (a value that
may pass 128 bits, groups past the device memory it may take) must say so in one line, and nearly all
must run on the GPU."""

import datetime
import random

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from conftest import with_nulls
from gquery.bench import querygen
from gquery import answer, sql, store, tpch
from gquery.errors import deep_expressions
from gquery.gpu.codegen import NotOnGpu
from gquery.reference import DuckDBTable
from gquery.result import same

pytestmark = pytest.mark.gpu
MODES = ("resident", "pinned", "registered", "pageable")
QUERIES = 60  # the same in every design: each is a kernel of its own shape, compiled once (about half a second)
COLUMNS = querygen.COLUMNS  # what querygen's queries read


@pytest.fixture(scope="module")
def engine():
    from gquery.gpu.executor import Engine, close_last

    e = Engine()
    yield e
    close_last(e)


def design_store(design: str, sf001, folder):
    """(store path, DuckDB's source) of one design of SF 0.01."""
    if design == "parted":  # three files: before 1995, after (no 'O' status before: other dictionaries), a sliver
        whole = pq.read_table(sf001.files[0])
        whole = whole.cast(pa.schema([f.with_type(pa.large_string()) if pa.types.is_string_view(f.type) else f
                                      for f in whole.schema]))  # pyarrow filters no string_view
        early = pc.less(whole["l_shipdate"], pa.scalar(datetime.date(1995, 1, 1), pa.date32()))
        data = folder / "parts"
        data.mkdir()
        for k, t in enumerate((whole.filter(early), whole.filter(pc.invert(early)).slice(7), whole.slice(0, 7)), start=1):
            pq.write_table(t, data / f"lineitem.{k}.parquet")
        source = tpch.find_lineitem(data)
        return store.write_parted(source, folder / "parts.gq", echo=lambda m: None), source
    if design == "nulls":  # NULLs in every column querygen reads but l_suppkey and l_returnflag
        whole = pq.read_table(sf001.files[0])
        whole = whole.cast(pa.schema([f.with_type(pa.large_string()) if pa.types.is_string_view(f.type) else f
                                      for f in whole.schema]))  # pyarrow's if_else takes no string_view
        whole = with_nulls(whole, [n for n in COLUMNS if n not in ("l_suppkey", "l_returnflag")], 11)
        (folder / "nulls").mkdir()
        pq.write_table(whole, folder / "nulls" / "lineitem.parquet")
        source = tpch.find_lineitem(folder / "nulls" / "lineitem.parquet")
        return store.write_store(source, folder / "nulls.gq", source, echo=lambda m: None), source
    sort_by = design.split(":")[1] if ":" in design else None
    return store.write_store(sf001, folder / "lineitem.gq", sf001, echo=lambda m: None, sort_by=sort_by), sf001


@pytest.mark.parametrize("design", ["as-generated", "clustered:l_shipdate", "parted", "nulls"])
@deep_expressions  # parsed, planned and generated as the API's entry points do: trees past the interpreter's 1,000 frames
def test_random_queries_equal_duckdb(engine, sf001, tmp_path, design):
    path, source = design_store(design, sf001, tmp_path)
    table = store.open_store(path, engine.memory)
    duck = DuckDBTable(source, COLUMNS, threads=2)
    refused, on_gpu, indexed, sliced = [], 0, 0, 0
    try:
        for k in range(QUERIES):
            text = querygen.query(random.Random(f"gpu {k}"))
            query = sql.parse(text, answer.schema_of(table))
            want = duck.run_sql(text, repeat=1)
            assert want.unavailable is None, (text, want.unavailable)
            mode = MODES[k % len(MODES)]
            try:
                got = answer.gpu_answer(query, table, engine, mode, repeat=1, warmup=False)
            except NotOnGpu as e:  # the documented reasons only, in one line
                assert "\n" not in str(e) and ("128 bits" in str(e) or "MB of device memory" in str(e)), (text, e)
                refused.append((text, str(e)))
                continue
            assert same(got.result, want.rows, bool(query.order_by)), (design, mode, text, got.rows[:4], want.rows[:4])
            on_gpu += 1
            if mode in ("pinned", "registered"):  # every table that can be scanned by l_suppkey's lists, so scanned
                by_index = answer.gpu_answer(query, table, engine, mode, repeat=1, warmup=False, scan="index")
                assert by_index.rows == got.rows, (design, mode, text, "index")
                indexed += sum(t.index is not None for t in by_index.plan.tables)
                by_top = answer.gpu_answer(query, table, engine, mode, repeat=1, warmup=False, scan="sliced")
                assert by_top.rows == got.rows, (design, mode, text, "sliced")
                sliced += sum(t.sliced is not None for t in by_top.plan.tables)
    finally:
        duck.close()
        engine.memory.release_table(table)
    assert on_gpu >= 0.9 * QUERIES, refused
    assert design in ("parted", "nulls") or indexed > 0  # a single store keeps l_suppkey's lists (NULLs: by frames)
    assert design != "as-generated" or sliced > 0  # and its top bytes (not where it is the sort column)
