"""A device's job thread (gpu.multi): jobs run in order on one thread, errors reach the caller, and
it still takes jobs while atexit handlers run, where engines are closed on their own thread."""

import subprocess
import sys
import threading

import pytest

from gquery.gpu.device import JobThread


def test_jobs_run_in_order_on_one_thread():
    worker = JobThread("test-jobs")
    seen = []
    futures = [worker.submit(lambda i=i: (seen.append(i), threading.current_thread().name)[1]) for i in range(50)]
    names = {f.result(timeout=10) for f in futures}
    worker.shutdown()
    assert seen == list(range(50))
    assert names == {"test-jobs"}


def test_an_error_reaches_the_caller_and_the_thread_goes_on():
    worker = JobThread("test-errors")
    with pytest.raises(ZeroDivisionError):
        worker.submit(lambda: 1 // 0).result(timeout=10)
    assert worker.submit(lambda a, b: a + b, 2, 3).result(timeout=10) == 5
    worker.shutdown()


def test_it_takes_jobs_inside_an_atexit_handler():
    script = ("import atexit\nfrom gquery.gpu.device import JobThread\nw = JobThread('exit')\n"
              "atexit.register(lambda: print('closed on', w.submit(lambda: __import__('threading')"
              ".current_thread().name).result(timeout=10)))\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "closed on exit"
    assert out.stderr == ""
