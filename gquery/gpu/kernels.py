"""Kernel sources in gquery/gpu/cuda/*.cu: compile-time constants injected as -D defines, compiled
for the device's architecture in-process by NVRTC (gpu/nvrtc.py; nvcc where a host has no NVRTC),
kept in memory and cached on disk across processes, loaded per context and thread."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import threading
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from gquery.cachefiles import read_whole, write_whole
from gquery.errors import GqueryError

CUDA_DIR = Path(__file__).parent / "cuda"
BASE_OPTIONS = ("-O3", "-std=c++17", "-lineinfo")
NVRTC_OPTIONS = ("-std=c++17", "-lineinfo", "--device-int128")  # NVRTC optimizes device code by default
CUBINS_KEPT = 256  # machine code kept in memory (tens of KB each): what a compile on one thread left for another


@dataclass(frozen=True)
class Build:
    """One compilation of one source: what the engine and the ladder launch, and what the CPU test
    compiles with nvcc for spills."""

    source: str  # a file of cuda/, or a name for generated `code`
    defines: tuple[tuple[str, int], ...] = ()
    options: tuple[str, ...] = field(default=())
    code: str = ""  # generated source (gpu/codegen.py): compiled as it is, cached by its text

    def nvcc_options(self) -> list[str]:
        return [*BASE_OPTIONS, *self.options, *(f"-D{k}={v}" for k, v in self.defines)]

    def nvrtc_options(self, arch: str) -> list[str]:
        """A query's generated kernel compiles fast (-Ofc=min: it is on the user's clock, and runs as fast);
        the ladder's sources as the course compiled them (under -Ofc=min its select_sum keeps 8 bytes in
        local memory)."""
        from gquery.gpu.nvrtc import fast_compile

        return [*NVRTC_OPTIONS, *(fast_compile() if self.code else ()), f"--gpu-architecture={arch}",
                *self.options, *(f"-D{k}={v}" for k, v in self.defines)]

    def text(self) -> str:
        return self.code or (CUDA_DIR / self.source).read_text()


def build(source: str, options: tuple[str, ...] = (), code: str = "", **defines: int) -> Build:
    return Build(source, tuple(sorted(defines.items())), tuple(options), code)


_modules: dict = {}


def _context_key() -> tuple[int, int]:
    """The current context, and the thread it is current on: PyCUDA ties what a context loads to
    the thread that made the context current (a primary context retained on two threads is two),
    and frees it only there."""
    import pycuda.driver as cuda

    return cuda.Context.get_current().handle, threading.get_ident()


def module(b: Build):
    """The compiled module for this build on the current context, on this thread: from this process's
    modules, else from the cubin cache on disk, else compiled by nvcc (and cached)."""
    import pycuda.driver as cuda

    from gquery.gpu.device import require

    info = require()
    key = (*_context_key(), b)
    if key not in _modules:
        _modules[key] = cuda.module_from_buffer(cubin(b, info.arch))
    return _modules[key]


def cache_dir() -> Path:
    """$GQUERY_KERNEL_CACHE, else ~/.cache/gquery/kernels: compiled kernels, a file a build."""
    return Path(os.environ.get("GQUERY_KERNEL_CACHE") or Path.home() / ".cache" / "gquery" / "kernels")


def compiler() -> str:
    """nvrtc (in-process) where this host has it, else nvcc; $GQUERY_COMPILER=nvcc|nvrtc chooses."""
    from gquery.gpu import nvrtc

    asked = os.environ.get("GQUERY_COMPILER", "")
    if asked == "nvcc" or (asked != "nvrtc" and nvrtc.library() is None):
        return "nvcc"
    return "nvrtc"


def headers() -> dict[str, str]:
    """The headers the kernels include ("fused.cuh", "tile.cuh"), by name: NVRTC is handed them in memory."""
    return {p.name: p.read_text() for p in sorted(CUDA_DIR.glob("*.cuh"))}


_warming: list[threading.Thread] = []


def warm_up_compiler() -> None:
    """Start NVRTC now on a thread of its own (loading it and compiling a kernel of one line with the
    engine's headers and options): a process's first compile otherwise spends ~0.2 s starting the compiler,
    which this overlaps with opening a table and reading its columns instead of a new shape's first answer."""
    if _warming or os.environ.get("GQUERY_COMPILER") == "nvcc":
        return
    _warming.append(threading.Thread(target=_warm_compiler, name="gquery-nvrtc-warm-up", daemon=True))
    _warming[0].start()


def _warm_compiler() -> None:
    from gquery.gpu import nvrtc

    if nvrtc.library() is None:  # looked for here: loading the library takes milliseconds too
        return
    warm = build("warm", code='#include "fused.cuh"\n'
                 'extern "C" __global__ void warm(u64* p) { atomic_add_128(p, (i128)*p * I64_MAX); }\n')
    try:  # for an architecture every NVRTC that compiles these headers has
        nvrtc.compile_cubin(warm.text(), "warm.cu", headers(), warm.nvrtc_options("sm_80"))
    except nvrtc.CompileError:  # said, if it matters, by the first real compile
        pass


_cubins: dict = {}
_cubins_lock = threading.Lock()
_compiling: dict = {}  # (build, arch, compiler) → an Event set when the thread compiling it is done


def compiled(b: Build, arch: str) -> bool:
    """Whether the build's machine code for `arch` is in memory (cubin returns it at once)."""
    return (b, arch, compiler()) in _cubins


def cubin(b: Build, arch: str) -> bytes:
    """A build's machine code for `arch`, compiled once: kept in memory (a compile on a query's own
    thread serves the GPU's thread), and on disk keyed by its source, the headers it includes (read
    now, so an edited header is a new key), its options, the architecture and the compiler, so a new
    process loads it in milliseconds. A thread asking for a build another is compiling waits for that
    compile (a kernel compiled ahead on a thread of its own serves the GPU's thread)."""
    which = compiler()
    key = (b, arch, which)
    found = _cubins.get(key)
    if found is not None:
        return found
    with _cubins_lock:
        other = _compiling.get(key)
        if other is None:
            _compiling[key] = mine = threading.Event()
    if other is not None:
        other.wait()
        found = _cubins.get(key)
        if found is not None:
            return found
        return cubin(b, arch)  # the other compile failed: this thread tries, and raises its error
    try:
        return _cubin(b, arch, which, key)
    finally:
        with _cubins_lock:
            _compiling.pop(key, None)
        mine.set()


def _cubin(b: Build, arch: str, which: str, key: tuple) -> bytes:
    included = headers()
    options = b.nvrtc_options(arch) if which == "nvrtc" else b.nvcc_options()
    digest = hashlib.sha256("\0".join([b.text(), *included.values(), *options, arch, _compiler_id(which)]).encode()).hexdigest()
    path = cache_dir() / f"{digest}.cubin"
    code = read_whole(path)
    if code is None:  # (none yet, or damaged: a byte changed in a cubin may still load, and compute another thing)
        code = _compile(b, arch, which, included, options)
        write_whole(path, code, "kernels compile again in each process")
    with _cubins_lock:
        if len(_cubins) >= CUBINS_KEPT:
            _cubins.clear()
        _cubins[key] = code
    return code


def _compile(b: Build, arch: str, which: str, headers: dict[str, str], options: list[str]) -> bytes:
    if which == "nvrtc":
        from gquery.gpu.nvrtc import compile_cubin

        return compile_cubin(b.text(), b.source if b.source.endswith(".cu") else f"{b.source}.cu", headers, options)
    import subprocess  # (here: its import, about 10 ms, is not a first query's where NVRTC compiles)
    import tempfile

    nvcc = shutil.which("nvcc")
    if nvcc is None:
        raise GqueryError("cannot compile a kernel: this host has neither NVRTC nor nvcc (install the CUDA toolkit)")
    with tempfile.TemporaryDirectory(prefix="gquery-nvcc-") as folder:
        src, out = Path(folder) / "kernel.cu", Path(folder) / "kernel.cubin"
        src.write_text(b.text())
        r = subprocess.run([nvcc, "-cubin", f"-arch={arch}", f"-I{CUDA_DIR}", *options, "-o", str(out), str(src)],
                           capture_output=True, text=True)
        if r.returncode != 0:
            lines = [line for line in r.stderr.splitlines() if line.strip()]
            raise GqueryError(f"nvcc could not compile {b.source}: {' | '.join(lines[:3])}")
        return out.read_bytes()


def _compiler_id(which: str) -> str:
    if which == "nvrtc":
        from gquery.gpu.nvrtc import version

        return version()
    return _nvcc()


@lru_cache(maxsize=1)
def _nvcc() -> str:
    """Which nvcc compiles: its path, size and time (a new toolkit is a new cache key)."""
    found = shutil.which("nvcc") or ""
    if not found:
        return "nvcc?"
    st = Path(found).resolve().stat()
    return f"{Path(found).resolve()}:{st.st_size}:{st.st_mtime_ns}"


def drop_modules() -> None:
    """Forget the modules this thread loaded in the current context, here: PyCUDA unloads a module
    only on its own thread, so one left for the interpreter's exit warns instead."""
    here = _context_key()
    for key in [k for k in _modules if k[:2] == here]:
        del _modules[key]


def function(b: Build, entry: str):
    return module(b).get_function(entry)


def entries(b: Build) -> list[str]:
    """The kernels a build defines (its __global__ functions), by name."""
    return re.findall(r"__global__\s+void\s+(?:__launch_bounds__\([^)]*\)\s+)?(\w+)\s*\(", b.text())


def resources(func) -> dict:
    """Registers, static shared memory and local (spilled) bytes of a compiled kernel."""
    return {"registers": func.num_regs, "shared_bytes": func.shared_size_bytes,
            "local_bytes": func.local_size_bytes}


def blocks_per_sm(func, block_threads: int, dynamic_shared: int = 0) -> int:
    """Blocks of this kernel an SM keeps resident, from its registers, shared memory (static and
    `dynamic_shared` bytes a block) and block size (the CUDA occupancy calculator's rules, sm_80+)."""
    import pycuda.driver as cuda

    dev = cuda.Context.get_device()
    a = cuda.device_attribute
    get = lambda name, default: dev.get_attribute(getattr(a, name)) if hasattr(a, name) else default
    threads_per_sm = get("MAX_THREADS_PER_MULTIPROCESSOR", 2048)
    warps = -(-block_threads // 32)
    regs_per_warp = -(-max(func.num_regs, 1) * 32 // 256) * 256  # allocated 256 at a time
    shared = func.shared_size_bytes + dynamic_shared + 1024  # the runtime reserves 1 KB per block
    return min(threads_per_sm // block_threads,
               get("MAX_REGISTERS_PER_MULTIPROCESSOR", 65536) // (regs_per_warp * warps),
               get("MAX_SHARED_MEMORY_PER_MULTIPROCESSOR", 228 * 1024) // shared,
               get("MAX_BLOCKS_PER_MULTIPROCESSOR", 32))


def occupancy(func, block_threads: int, dynamic_shared: int = 0) -> float:
    """Fraction of the SM's thread slots this kernel keeps resident."""
    import pycuda.driver as cuda

    threads_per_sm = cuda.Context.get_device().get_attribute(cuda.device_attribute.MAX_THREADS_PER_MULTIPROCESSOR)
    return blocks_per_sm(func, block_threads, dynamic_shared) * block_threads / threads_per_sm
