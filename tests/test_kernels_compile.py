"""Every kernel build compiles with nvcc for Hopper without register spills (no GPU needed)."""

import re
import shutil
import subprocess

import pytest

from gquery.gpu import kernels
from gquery.bench.ladder import builds as ladder_builds

NVCC = shutil.which("nvcc")
BUILDS = sorted(ladder_builds(), key=str)  # ladder.cu's builds and select_sum.cu's (the fused_engine step)


@pytest.mark.skipif(NVCC is None, reason="nvcc is not on the PATH")
@pytest.mark.parametrize("build", BUILDS, ids=lambda b: f"{b.source}{'+' + ' '.join(b.options) if b.options else ''}")
def test_compiles_without_spills(build, tmp_path):
    cmd = [NVCC, "-cubin", "-arch=sm_90", "-Xptxas", "-v", f"-I{kernels.CUDA_DIR}", *build.nvcc_options(),
           "-o", str(tmp_path / "k.cubin"), str(kernels.CUDA_DIR / build.source)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    report = r.stderr
    entries = re.findall(r"Compiling entry function '(\w+)'", report)
    assert entries, report
    spills = re.findall(r"(\d+) bytes spill stores, (\d+) bytes spill loads", report)
    assert len(spills) == len(entries)
    assert all(s == ("0", "0") for s in spills), report
    assert "error" not in report.lower()


def test_every_ladder_kernel_exists_in_its_source():
    from gquery.ladder import STEPS

    ladder_src = (kernels.CUDA_DIR / "ladder.cu").read_text()
    for step in STEPS:
        if step.kernel == "fused":
            continue  # generated for the query and compiled as any query's is (tests/test_fused_plan.py)
        src = (kernels.CUDA_DIR / "select_sum.cu").read_text() if step.kernel == "select_sum" else ladder_src
        assert re.search(rf"__global__ void (__launch_bounds__\([\w, ]+\)\s+)?{step.kernel}\(", src), step.kernel
