"""The benchmark's floors are computed from the runs it recorded: which run each floor reads."""


def class_run(sf, gpus, query, gpu_ms):
    return {"sf": sf, "gpus": gpus, "query": query, "gpu_ms": gpu_ms, "pcie_bytes_per_row": 3.4, "match": True,
            "reference": "DuckDB over the parquet", "reference_ms": 100.0, "rows_per_s": 1e9,
            "per_gpu": [{"gpu": g, "gpu_ms": gpu_ms} for g in range(gpus)]}


def test_the_class_at_scale_reads_one_gpu_against_several_and_each_sf_against_a_tenth_of_it():
    """Each query's time at SF x on one GPU over its time at SF x/10 (at most 10.5), and at one SF on k
    GPUs against one GPU (2 GPUs at least 1.8x): a floor a query, from the runs recorded."""
    from gquery.bench.scale import floors, markdown

    runs = [class_run(100, 1, "q6", 45.0), class_run(100, 2, "q6", 30.0), class_run(1000, 1, "q6", 450.0),
            class_run(100, 1, "q1", 80.0), class_run(100, 2, "q1", 40.0)]
    got = {f["what"]: f for f in floors(runs)}
    assert got["q6: time SF 1000 / SF 100, one GPU"]["value"] == 10.0 and got["q6: time SF 1000 / SF 100, one GPU"]["met"]
    two = got["q6: SF 100 on 2 GPUs / on 1"]
    assert two["value"] == 1.5 and not two["met"] and "GPU 1 30.0 ms" in two["why"]
    assert got["q1: SF 100 on 2 GPUs / on 1"]["met"] and len(got) == 3
    data = {"device": "GPU", "commit": "abc", "date": "today", "repeat": 5, "runs": runs, "floors": floors(runs),
            "dask": [{"query": "q6", "workers": 2, "parts": 10, "dask_ms": 40.0, "match": True}]}
    md = markdown(data, "gquery bench --scale --queries")
    assert "| 100 | 2 | q6 | MATCH |" in md and "| q6 | 2 | 10 | 40.0 | 30.0 | MATCH |" in md and "MISSED by 0.3" in md
    assert "Not run: no dask" in markdown({**data, "dask": {"unavailable": "no dask"}}, "x")


def test_the_class_at_scale_asks_what_the_store_holds_and_checks_against_duckdb_or_the_store(sf001, tmp_path):
    """Q6, Q1 and the mission at half the largest supplier where l_suppkey is stored (Q6 and Q1 alone
    where it is not); the reference is DuckDB over the parquet while it is there, else the NumPy
    reference over the same store, and both give the same rows."""
    from gquery import store
    from gquery.bench.queries import NEEDED
    from gquery.bench.scale import reference, texts
    from gquery.result import same

    full = store.write_store(sf001, tmp_path / "needed.gq", sf001, echo=lambda m: None, columns=list(NEEDED))
    table = store.open_store(full)
    named = dict(texts(table))
    assert list(named) == ["q6", "q1", "mission"]
    largest = int(table.columns["l_suppkey"].values().max())
    assert named["mission"].endswith(f"l_suppkey < {largest // 2}")
    rows, how, _ = reference(full, table, named["q6"])
    assert how == "DuckDB over the parquet"
    cpu_store = store.write_store(store.open_store(full), tmp_path / "no-source.gq", echo=lambda m: None)
    answer, how, _ = reference(cpu_store, store.open_store(cpu_store), named["q6"])
    assert how == "NumPy reference over the store" and same(answer.result, rows, False)
    from gquery.answer import cpu_answer
    from gquery.bench.scale import _equal
    from gquery.sql import parse

    for name, text in named.items():  # Q1's AVGs round as DuckDB's over parquet, not over a table
        rows, _, _ = reference(full, table, text)
        assert _equal(cpu_answer(parse(text, table.schema), table), rows), name
    no_key = store.write_store(sf001, tmp_path / "nokey.gq", sf001, echo=lambda m: None,
                               columns=[c for c in NEEDED if c != "l_suppkey"])
    assert [n for n, _ in texts(store.open_store(no_key))] == ["q6", "q1"]
