"""Shared fixtures: a small generated dataset, and the `gpu` marker's skip with the probe's reason."""

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from gquery import sources, tpch

# the stores gquery builds for data it was not asked to write beside go to its cache folder: the tests'
# to a folder of their own, for this session, not the user's ~/.cache (the CLI's processes inherit it)
if "GQUERY_STORE_DIR" not in os.environ:
    os.environ["GQUERY_STORE_DIR"] = tempfile.mkdtemp(prefix="gquery-test-stores-")
    atexit.register(shutil.rmtree, os.environ["GQUERY_STORE_DIR"], True)
if "GQUERY_QUERY_CACHE" not in os.environ:  # and the texts it keeps parsed (gquery.textcache), alike
    os.environ["GQUERY_QUERY_CACHE"] = tempfile.mkdtemp(prefix="gquery-test-queries-")
    atexit.register(shutil.rmtree, os.environ["GQUERY_QUERY_CACHE"], True)


def pytest_collection_modifyitems(config, items):
    gpu_items = [i for i in items if "gpu" in i.keywords]
    if not gpu_items:
        return
    from gquery.gpu.device import probe

    info, reason = probe()
    if info is None:
        skip = pytest.mark.skip(reason=f"no usable GPU: {reason}")
        for item in gpu_items:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def data_dir(tmp_path_factory) -> Path:
    """Where datasets are generated: $GQUERY_DATA_DIR when set (the GPU host reuses its data), else
    a temporary folder of this session."""
    return Path(os.environ.get("GQUERY_DATA_DIR") or tmp_path_factory.mktemp("dbgen_data"))


@pytest.fixture(scope="session")
def sf001(data_dir) -> sources.LineitemSource:
    return tpch.generate(0.01, data_dir, echo=lambda m: None)


@pytest.fixture(scope="session")
def sf001_tbl(data_dir) -> sources.LineitemSource:
    return tpch.generate(0.01, data_dir, fmt="tbl", echo=lambda m: None)


def gquery(*args, cwd=None, env=None):
    """Run the CLI as a user would: a separate process, text output, exit code."""
    return subprocess.run([sys.executable, "-m", "gquery", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, env={**os.environ, **(env or {})}, timeout=600)


@pytest.fixture
def no_local_memory():
    """A check: a build compiled by NVRTC as the engine compiles it, every kernel of it loaded on the GPU
    uses no local memory (no spills)."""
    def check(build) -> None:
        import pycuda.driver as cuda

        from gquery.gpu import kernels, nvrtc
        from gquery.gpu.device import require

        arch = require().arch
        module = cuda.module_from_buffer(nvrtc.compile_cubin(build.text(), build.source, kernels.headers(),
                                                             build.nvrtc_options(arch)))
        names = kernels.entries(build)
        assert names
        for name in names:
            f = module.get_function(name)
            assert f.local_size_bytes == 0, (name, kernels.resources(f))

    return check


def with_nulls(table, names, seed: int):
    """A TPC-H Arrow table with NULLs in the `names` columns (drawn in that order): at about one row in seven,
    and l_tax at every row shipped before 1995 too (a part whose column is all NULL)."""
    import datetime

    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    rng = np.random.default_rng(seed)
    early = pc.less(table["l_shipdate"], pa.scalar(datetime.date(1995, 1, 1), pa.date32()))
    for name in names:
        nulls = pa.array(rng.random(table.num_rows) < 1 / 7)
        if name == "l_tax":
            nulls = pc.or_(nulls, early)
        i = table.column_names.index(name)
        table = table.set_column(i, name, pc.if_else(nulls, pa.scalar(None, table.schema.field(name).type), table[name]))
    return table


def arrow_data(table, folder):
    """(the Arrow table, a DuckDB connection with it registered as t, a folder): a module's data asked of DuckDB
    and of gquery alike; the connection closed when the module is done (the fixture's generator)."""
    import duckdb

    con = duckdb.connect()
    con.register("t", table)
    yield table, con, folder
    con.close()
