"""Every kernel build compiles with nvcc for Hopper without register spills (no GPU needed)."""

import re
import shutil
import subprocess

import pytest

from gquery import cachefiles
from gquery.gpu import kernels, nvrtc
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


@pytest.mark.gpu
@pytest.mark.skipif(nvrtc.library() is None, reason="NVRTC is not installed on this host")
@pytest.mark.parametrize("build", BUILDS, ids=lambda b: f"{b.source}{'+' + ' '.join(b.options) if b.options else ''}")
def test_compiles_in_process_without_spills(build, no_local_memory):
    """The ladder's kernels through NVRTC too, with their options (a register cap), as the engine compiles
    them: each entry loaded on the GPU uses no local memory (ptxas's -v report is silent under -Ofc)."""
    no_local_memory(build)


TINY = kernels.build("tiny", code='#include "fused.cuh"\nextern "C" __global__ void tiny(long long* p) { *p = I64_MIN; }\n')


@pytest.mark.skipif(NVCC is None and nvrtc.library() is None, reason="neither nvcc nor NVRTC is on this host")
def test_a_kernel_is_compiled_once_then_read_from_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("GQUERY_KERNEL_CACHE", str(tmp_path / "kernels"))
    kernels._cubins.clear()
    code = kernels.cubin(TINY, "sm_90")
    assert code[:4] == b"\x7fELF" and len(list((tmp_path / "kernels").glob("*.cubin"))) == 1
    kernels._cubins.clear()  # a new process: from the disk
    (cached,) = (tmp_path / "kernels").glob("*.cubin")
    cachefiles.write_whole(cached, b"\x7fELF from the cache", "")
    assert kernels.cubin(TINY, "sm_90") == b"\x7fELF from the cache"
    kernels._cubins.clear()  # a byte of the file damaged (its digest no longer its contents'): compiled again
    damaged = bytearray(cached.read_bytes())
    damaged[-1] ^= 1
    cached.write_bytes(bytes(damaged))
    again = kernels.cubin(TINY, "sm_90")  # (nvcc's output differs by a temporary file's name from the first)
    assert again[:4] == b"\x7fELF" and again != b"\x7fELF from the cache" and cachefiles.read_whole(cached) == again


@pytest.mark.skipif(NVCC is None and nvrtc.library() is None, reason="neither nvcc nor NVRTC is on this host")
def test_a_cache_that_cannot_be_written_is_said_once_and_kernels_still_compile(tmp_path, monkeypatch, capsys):
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    monkeypatch.setenv("GQUERY_KERNEL_CACHE", str(blocked / "kernels"))
    kernels._cubins.clear()
    assert kernels.cubin(TINY, "sm_90")[:4] == b"\x7fELF"
    kernels._cubins.clear()
    assert kernels.cubin(TINY, "sm_90")[:4] == b"\x7fELF"
    said = capsys.readouterr().err.splitlines()
    assert len(said) == 1 and said[0].startswith(f"gquery: the kernel cache {blocked / 'kernels'} cannot be written"), said


def test_a_build_two_threads_ask_for_at_once_is_compiled_once(tmp_path, monkeypatch):
    """A kernel compiled ahead on a thread of its own serves the GPU's thread asking meanwhile: the second
    asker waits for the first compile; a compile that fails is tried again by the asker, who raises."""
    import threading
    import time

    monkeypatch.setenv("GQUERY_KERNEL_CACHE", str(tmp_path / "kernels"))
    kernels._cubins.clear()
    calls = []

    def slow(b, arch, which, included, options):
        calls.append(b)
        time.sleep(0.3)
        return b"\x7fELF compiled"

    monkeypatch.setattr(kernels, "_compile", slow)
    got = []
    threads = [threading.Thread(target=lambda: got.append(kernels.cubin(TINY, "sm_90"))) for _ in range(3)]
    for t in threads:
        t.start()
        time.sleep(0.05)
    for t in threads:
        t.join()
    assert got == [b"\x7fELF compiled"] * 3 and len(calls) == 1

    def broken(b, arch, which, included, options):
        calls.append(b)
        raise kernels.GqueryError("no compiler here")

    kernels._cubins.clear()
    monkeypatch.setattr(kernels, "_compile", broken)
    other = kernels.build("tiny2", code=TINY.code + "// another\n")
    with pytest.raises(kernels.GqueryError, match="no compiler here"):
        kernels.cubin(other, "sm_90")
    assert not kernels._compiling


@pytest.mark.skipif(NVCC is None and nvrtc.library() is None, reason="neither nvcc nor NVRTC is on this host")
def test_kernels_a_kept_plan_may_switch_to_are_compiled_ahead_on_a_thread_of_their_own(tmp_path, monkeypatch):
    """answer._compile_in_background: the builds land in the in-memory cache without the caller waiting; a
    build that cannot compile is left for the run that needs it (no thread dies loudly)."""
    import time

    from gquery import answer

    monkeypatch.setenv("GQUERY_KERNEL_CACHE", str(tmp_path / "kernels"))
    kernels._cubins.clear()
    broken = kernels.build("broken", code="this is not CUDA\n")
    answer._compile_in_background([broken, TINY], "sm_90")
    deadline = time.monotonic() + 120
    while not any(k[0] == TINY for k in kernels._cubins) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert any(k[0] == TINY for k in kernels._cubins) and not any(k[0] == broken for k in kernels._cubins)
    assert not kernels._compiling  # the failed compile let go of its claim: a later asker compiles it and is told why


def test_the_compiler_is_nvrtc_where_installed_unless_asked_otherwise(monkeypatch):
    monkeypatch.delenv("GQUERY_COMPILER", raising=False)
    assert kernels.compiler() == ("nvcc" if nvrtc.library() is None else "nvrtc")
    monkeypatch.setenv("GQUERY_COMPILER", "nvcc")
    assert kernels.compiler() == "nvcc"
