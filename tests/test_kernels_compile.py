"""Every kernel build compiles with nvcc for Hopper without register spills (no GPU needed)."""

import re
import shutil
import subprocess

import pytest

from gquery.gpu import kernels
from gquery.gpu.executor import SELECT_SUM, scan_builds
from gquery.gpu.ladder import builds as ladder_builds

NVCC = shutil.which("nvcc")
BUILDS = sorted({SELECT_SUM} | scan_builds() | ladder_builds(), key=str)


@pytest.mark.skipif(NVCC is None, reason="nvcc is not on the PATH")
@pytest.mark.parametrize("build", BUILDS, ids=lambda b: f"{b.source}{'+' + ' '.join(b.options) if b.options else ''}"
                                                        f"{'+' + ','.join(f'{k}={v}' for k, v in b.defines if k.endswith(('ENCODING', 'BYTES', 'PRODUCT'))) if b.source == 'scan.cu' else ''}")
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
        engine_source = {"select_sum": "select_sum.cu", "scan": "scan.cu"}.get(step.kernel)
        src = (kernels.CUDA_DIR / engine_source).read_text() if engine_source else ladder_src
        assert re.search(rf"__global__ void (__launch_bounds__\([\w, ]+\)\s+)?{step.kernel}\(", src), step.kernel
