"""The host's heap kept for a query's arrays (gquery.host.keep_heap): measured in a fresh process, as a plan's
NumPy arrays come and go."""

import os
import platform
import subprocess
import sys

import pytest

from gquery.errors import UsageError
from gquery.host import keep_heap

# a plan's arrays at SF 10 (58,581 frames of float64 and int8), made and freed, and the page faults each round took
ROUNDS = """
import resource, numpy as np
from gquery.host import keep_heap
keep_heap()
def plan():
    a = np.ones(58581); b = a * 2; c = b + a; d = (c > 1).astype(np.int8); e = np.cumsum(c)
    return float((e / 3)[-1]) + int(d[0])
for _ in range(5):
    plan()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(50):
    plan()
print((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 50)
"""


def _faults_a_round(keep: str) -> float:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")} | {"GQUERY_KEEP_HEAP": keep}
    out = subprocess.run([sys.executable, "-c", ROUNDS], env=env, capture_output=True, text=True, check=True)
    return float(out.stdout.split()[-1])


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="the heap kept is glibc's malloc's (mallopt)")
def test_a_plans_arrays_reuse_the_heap_not_fresh_pages():
    kept, left = _faults_a_round("1"), _faults_a_round("0")
    assert kept < 20, kept  # 0.5 MB arrays from the heap kept: no page faulted in afresh
    assert left > 10 * max(kept, 1), (kept, left)  # malloc as it was: each mapped and faulted in anew


def test_a_keep_heap_setting_other_than_0_or_1_is_one_line(monkeypatch):
    monkeypatch.setenv("GQUERY_KEEP_HEAP", "yes")
    with pytest.raises(UsageError, match="GQUERY_KEEP_HEAP must be 0 or 1, got 'yes'"):
        keep_heap()
