"""The benchmark's floors are computed from the runs it recorded: which run each floor reads."""

from gquery.gpu.bench import floors

LIMITS = {"d2d_gbps": 3000.0, "h2d_pinned_gbps": 55.0}


def pinned(encoding, z, gpu_ms, chosen, pcie=1.0):
    return {"sf": 10, "z": z, "mode": "pinned", "encoding": encoding, "gpu_ms": gpu_ms, "duckdb_ms": 12.0,
            "duckdb_threads": 16, "h2d_ms": 1.0, "kernel_ms": 0.5, "pcie_bytes": int(pcie * 60e6),
            "pcie_bytes_per_row": pcie, "zero_copy_bytes": 0, "planner_choice": chosen, "effective_gbps": 1.0,
            "h2d_gbps": 50.0}


def test_host_memory_floors_read_the_planner_s_choice():
    """Against DuckDB, the run --encoding auto would make (here the bucket lists at Z = 30, the
    sliced scan at Z = half), not the fastest of all encodings nor a fixed one."""
    runs = [pinned("sliced", 30, 1.5, False), pinned("indexed", 30, 0.2, True, pcie=0.01),
            pinned("sliced", 500, 5.0, True, pcie=4.9), pinned("indexed", 500, 90.0, False, pcie=40.0)]
    got = {f["name"]: f for f in floors(runs, LIMITS)}
    assert got["host_vs_duckdb_30"]["value"] == 12.0 / 0.2 and "indexed" in got["host_vs_duckdb_30"]["what"]
    assert got["host_vs_duckdb_half"]["value"] == 12.0 / 5.0 and "sliced" in got["host_vs_duckdb_half"]["what"]
    assert got["pcie_bytes_per_row_30"]["value"] == 0.01 and got["pcie_bytes_per_row_half"]["value"] == 4.9
    half = got["host_vs_duckdb_half"]
    assert not half["met"] and abs(half["short_by"] - 0.6) < 1e-9 and "GPU 5.00 ms" in half["why"]
